"""Mixed FL where clients move only the embedding rows their data touches.

Seed 004 §1 and App. C.3: when the central loss is a data-free regulariser
over a large embedding table (the spreadout of the movie recommender),
computing it at the server frees clients from ever holding the whole table.
A client then downloads only the rows of the items in its round's data,
trains on them, and uploads updates for those rows; Gradient Transfer also
sends it those rows of the augmenting central gradient.

Here that is real TFF communication, not bookkeeping:

* each client computes the sorted ids of the rows its next K batches read
  (`row_ids_fn`), padded to the fixed `max_rows_per_client` that TFF's
  fixed-size keys need;
* `tff.federated_select` moves those rows (and for Gradient Transfer those
  rows of g~_c) from the server; the other weights are broadcast;
* the client trains K SGD steps on a table holding only its rows, and uploads
  `(row ids, row updates, other updates, weight)`;
* `tff.federated_aggregate` scatters the row updates into a table-sized sum
  at the aggregator, so no client ever sends or receives a full table.

With every row selected this is exactly `build_mixed_fl` with a
data-free central loss (a test pins that). With fewer rows it differs in one
place, as in the paper: Gradient Transfer adds g~_c only to the rows a client
holds, so rows no sampled client touches change only through the server's
central step (PT, 2-way GT) or not at all this round (1-way GT). For the
same reason 2-way GT's inferred federated gradient of a row subtracts g~_c
only for the steps of the clients that held it, and is 0 for a row nobody
held (`mixed_fl_step.transfer_gradients`); the server step itself is the one
`build_mixed_fl` runs.

Measurements (`client_work`, means over the cohort): `rows_per_client` (n),
`embedding_bytes_per_client` (table rows moved both ways: 2 n d, or 3 n d
with GT, x 4 bytes: seed 004 Table 5's communication), `bytes_downloaded_
per_client` and `bytes_uploaded_per_client` (everything, including the other
weights and, up, the 4-byte row ids), `client_flops_per_client` (with
`flops_per_step`); also `train`, `sgd_steps`, `num_local_steps` (K, so the
driver's simulated time applies) and `central/loss`.
"""

import collections
from collections.abc import Callable
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed import checks
from tff_mixed import keys
from tff_mixed import schedules
from tff_mixed.templates import client_extensions
from tff_mixed.templates import common
from tff_mixed.templates import mixed_fl_step
from tff_mixed.templates import row_selection
from tff_mixed.templates import scheduled_client_work
from tff_mixed.templates import step_loop
from tff_mixed.templates import work_metrics

PARALLEL_TRAINING = mixed_fl_step.PARALLEL_TRAINING
ONE_WAY_GRADIENT_TRANSFER = mixed_fl_step.ONE_WAY_GRADIENT_TRANSFER
TWO_WAY_GRADIENT_TRANSFER = mixed_fl_step.TWO_WAY_GRADIENT_TRANSFER
AUGMENTING_GRADIENT = client_extensions.AUGMENTING_GRADIENT


def build_selected_rows_mixed_fl(
    model_fn: common.ModelFn,
    client_optimizer_fn: common.OptimizerFn,
    server_optimizer_fn: Optional[common.OptimizerFn] = None,
    *,
    row_ids_fn: Callable[[object], tf.Tensor],
    central_loss_fn: mixed_fl_step.CentralLossFn,
    mixing: str,
    num_local_steps: schedules.ScheduleOrSteps,
    max_rows_per_client: int,
    table_index: int = 0,
    central_optimizer_fn: Optional[common.OptimizerFn] = None,
    merge_optimizer_fn: Optional[common.OptimizerFn] = None,
    federated_weight: float = 0.5,
    central_weight: float = 0.5,
    num_central_steps: Optional[int] = None,
    client_learning_rate: Optional[schedules.ScheduleOrValue] = None,
    metrics_aggregator: Optional[Callable[..., tff.Computation]] = None,
    flops_per_step: Optional[Callable[[tf.Tensor], tf.Tensor]] = None,
) -> tff.learning.templates.LearningProcess:
  """Builds mixed FL with per-client row selection of one embedding table.

  Round t follows `build_mixed_fl` for the same `mixing` (seed 004,
  Algorithms 1-2, the same server step: `mixed_fl_step`), with a data-free
  central loss, except that a client receives, trains and uploads only the
  table rows its K batches read (see the module doc); x(t+1) equals
  `build_mixed_fl`'s when every row is selected.

  The state keeps the model at `global_model_weights`, K and the client
  optimizer's hyper-parameters (and Gradient Transfer's g~_c) at
  `client_work`, and the server's optimizers and g~_f at `server`, like
  `build_mixed_fl`'s.

  Signatures:
    initialize: `( -> S@SERVER)`
    next: `(<S@SERVER, {B*}@CLIENTS> -> <state=S@SERVER, metrics=M@SERVER>)`

  Args:
    model_fn: No-arg callable returning a `VariableModel` whose trainable
      variable `table_index` is the [N, d] table the data indexes (and no
      non-trainable variables).
    client_optimizer_fn: Client optimizer, any `tff.learning.optimizers`
      one: it starts each round from its initial state on the client's
      table (as in `tff.learning`), so a row the client does not read keeps
      zero gradient and state and does not move, as in dense training. Plain
      SGD (`build_sgdm` without momentum) for 2-way GT, whose App. A.2
      inference assumes it (anything else is refused).
    server_optimizer_fn: Default SGD, learning rate 1.
    row_ids_fn: `batch -> int tensor` of the table rows the batch reads
      (any shape; negative ids are padding and ignored).
    central_loss_fn: The data-free central loss, `(model, None) -> scalar`.
    mixing: 'parallel_training', 'one_way_gradient_transfer' or
      'two_way_gradient_transfer'.
    num_local_steps: K: an int >= 1 or a `tff_mixed.schedules.Schedule`;
      every client takes K steps (its batches cycled).
    max_rows_per_client: The fixed number of keys TFF selects per client
      (pads with repeats of a held row). A client whose K batches read more
      rows fails the round with an error naming this argument.
    table_index: Which trainable variable is the table.
    central_optimizer_fn: Default SGD with lr = client lr x server lr.
    merge_optimizer_fn: Default SGD, learning rate 1 (PT, 2-way GT).
    federated_weight: w_f > 0, scales the client loss gradient.
    central_weight: w_c > 0, scales the central loss gradient.
    num_central_steps: J (default each round's K; 1-way GT always takes 1).
    client_learning_rate: Optional number or schedule overriding the client
      optimizer's learning rate each round.
    metrics_aggregator: Optional, as in `tff.learning`.
    flops_per_step: Optional `batch size -> FLOPs` of one client step
      (TF arithmetic), for the `client_flops_per_client` measurement.

  There is no `model_aggregator`: the table's rows are summed by the
  scatter at `tff.federated_aggregate` that keeps every upload sparse.

  Raises:
    TypeError, ValueError: Naming the argument that is wrong.
  """
  w_f = checks.check_number(federated_weight, 'federated_weight')
  w_c = checks.check_number(central_weight, 'central_weight')
  mixed_fl_step.check_arguments(mixing, w_f, w_c)
  one_way = mixing == ONE_WAY_GRADIENT_TRANSFER
  two_way = mixing == TWO_WAY_GRADIENT_TRANSFER
  gradient_transfer = one_way or two_way
  optimizers = mixed_fl_step.resolve_optimizers(
      mixing, client_optimizer_fn=client_optimizer_fn,
      server_optimizer_fn=server_optimizer_fn,
      central_optimizer_fn=central_optimizer_fn,
      merge_optimizer_fn=merge_optimizer_fn,
      client_learning_rate=client_learning_rate)
  max_rows = checks.check_num_steps(max_rows_per_client, 'max_rows_per_client')
  if num_central_steps is not None:
    num_central_steps = checks.check_num_steps(
        num_central_steps, 'num_central_steps')
  if metrics_aggregator is None:
    metrics_aggregator = tff.learning.metrics.sum_then_finalize
  hparams = common.hparams_of(optimizers.client)
  scheduled = scheduled_client_work.Schedules(
      num_local_steps, client_learning_rate, list(hparams))

  with tf.Graph().as_default():
    model = model_fn()
    variables = model.trainable_variables
    if not 0 <= table_index < len(variables) or len(
        variables[table_index].shape) != 2:
      raise ValueError(
          f'table_index={table_index} is not a 2-D trainable variable of the '
          'model.')
    num_rows, dim = (int(s) for s in variables[table_index].shape)
    shapes = [tuple(int(s) for s in v.shape) for v in variables]
    dtypes = [v.dtype.as_numpy_dtype for v in variables]
    data_type = tff.SequenceType(tff.types.tensorflow_to_type(model.input_spec))
    finalizers = work_metrics.work_finalizers(model, flops=False)
  if max_rows > num_rows:
    raise ValueError(
        f'max_rows_per_client={max_rows} exceeds the table\'s {num_rows} rows.')
  others = [i for i in range(len(shapes)) if i != table_index]
  other_shapes = [shapes[i] for i in others]
  other_floats = sum(int(np.prod(s)) for s in other_shapes)
  specs = tuple(tf.TensorSpec(s, d) for s, d in zip(shapes, dtypes))
  zeros = [np.zeros(s, d) for s, d in zip(shapes, dtypes)]

  def split(tensors):
    return tensors[table_index], [tensors[i] for i in others]

  def join(table, rest):
    tensors = list(rest)
    tensors.insert(table_index, table)
    return tensors

  # ----------------------------------------------------------------- state
  initial_weights_fn = common.initial_model_weights_computation(model_fn)
  weights_type = initial_weights_fn.type_signature.result

  @tff.tensorflow.computation
  def client_work_init():
    state = collections.OrderedDict([
        (keys.OPTIMIZER_HPARAMS, hparams),
        (keys.NUM_LOCAL_STEPS, np.int32(1))])
    if gradient_transfer:
      state[AUGMENTING_GRADIENT] = zeros
    return scheduled.initialize(state)

  @tff.tensorflow.computation
  def server_init():
    return mixed_fl_step.initial_server_state(optimizers, specs)

  @tff.federated_computation
  def init_fn():
    return tff.federated_zip(collections.OrderedDict(
        global_model_weights=tff.federated_eval(initial_weights_fn, tff.SERVER),
        client_work=tff.federated_eval(client_work_init, tff.SERVER),
        server=tff.federated_eval(server_init, tff.SERVER)))

  state_type = init_fn.type_signature.result
  client_work_type = state_type.member.client_work
  central_computation = mixed_fl_step.build_central_computation(
      model_fn, mixing, optimizers, central_loss_fn=central_loss_fn,
      central_data_fn=None, central_weight=w_c,
      num_central_steps=num_central_steps, central_seed=0,
      central_shuffle_buffer=0, server_type=state_type.member.server,
      weights_type=weights_type, client_work_type=client_work_type)

  @tff.tensorflow.computation(weights_type, client_work_type)
  def broadcast_parts(weights, client_work):
    """The table, the other weights, (GT) g~_c split the same way, and
    what every client receives: K and the optimizer's hyper-parameters."""
    table, rest = split(list(weights.trainable))
    aug = client_work[AUGMENTING_GRADIENT] if gradient_transfer else zeros
    aug_table, aug_rest = split(list(aug))
    inputs = collections.OrderedDict(
        (key, client_work[key]) for key in (
            keys.OPTIMIZER_HPARAMS,
            keys.NUM_LOCAL_STEPS))
    return table, rest, aug_table, aug_rest, inputs

  # ---------------------------------------------------------------- client
  download = row_selection.RowDownload(
      data_type, row_ids_fn,
      table_type=tff.TensorType(dtypes[table_index], [num_rows, dim]),
      max_rows_per_client=max_rows)

  def scatter_rows(row_keys, count, rows):
    valid = row_keys[:count, tf.newaxis]
    return tf.scatter_nd(valid, rows[:count], [num_rows, dim])

  rows_type = tff.SequenceType(tff.TensorType(np.float32, [dim]))
  other_types = [tff.TensorType(d, s) for d, s in
                 zip([dtypes[i] for i in others], other_shapes)]
  inputs_type = broadcast_parts.type_signature.result[4]

  @tff.tensorflow.computation(
      data_type, tff.TensorType(np.int32, [max_rows]), np.int32, rows_type,
      other_types, rows_type, other_types, inputs_type)
  def client_train(data, row_keys, count, rows, rest, aug_rows, aug_rest,
                   inputs):
    rows = rows.batch(max_rows).get_single_element()
    table = scatter_rows(row_keys, count, rows)
    initial = tff.learning.models.ModelWeights(
        trainable=join(table, rest), non_trainable=[])
    aug = None
    if gradient_transfer:
      aug = join(scatter_rows(row_keys, count, aug_rows.batch(
          max_rows).get_single_element()), aug_rest)
    update_fn = step_loop.build_k_step_update(
        model_fn, client_weighting=tff.learning.ClientWeighting.NUM_EXAMPLES,
        loss_weight=w_f)
    out = update_fn(optimizers.client,
                    inputs[keys.OPTIMIZER_HPARAMS],
                    inputs[keys.NUM_LOCAL_STEPS], initial, data,
                    aug)
    table_update, rest_update = split(list(out.result.update))
    valid = tf.cast(tf.range(max_rows) < count, tf.float32)[:, tf.newaxis]
    row_update = tf.gather(table_update, row_keys) * valid
    weight = out.result.update_weight
    upload = collections.OrderedDict(
        keys=row_keys,
        weighted_rows=weight * row_update,
        weighted_rest=[weight * u for u in rest_update],
        weight=weight,
    )
    if two_way:  # For g_f: the unweighted sums, and who held which row.
      upload['rows'] = row_update
      upload['rest'] = rest_update
      kept = tf.cast(out.result.update_weight > 0, tf.float32)
      upload['steps'] = tf.cast(out.sgd_steps, tf.float32) * kept
      upload['count'] = count
    return upload, work_metrics.work_metrics(out), row_selection.client_costs(
        out, count, dim=dim, other_floats=other_floats,
        gradient_transfer=gradient_transfer, flops_per_step=flops_per_step)

  # ----------------------------------------------------------- aggregation
  aggregate_rows = row_selection.build_row_aggregation(
      client_train.type_signature.result[0], num_rows=num_rows, dim=dim,
      other_shapes=other_shapes, max_rows=max_rows, two_way=two_way)
  aggregate_metrics = metrics_aggregator(
      finalizers, client_train.type_signature.result[1])

  # ---------------------------------------------------------------- server
  @tff.tensorflow.computation
  def server_update(server, weights, round_state, total, central_delta,
                    central_steps):
    """(server state, x(t+1), client work state): `mixed_fl_step`'s step."""
    x = list(weights.trainable)
    mean = [tf.math.divide_no_nan(t, total['weight'])
            for t in join(total['rows'], total['rest'])]
    gradient_transfer_inputs = {}
    if two_way:
      steps = total['steps']
      gradient_transfer_inputs = dict(
          update_sum=join(total['unweighted_rows'], total['unweighted_rest']),
          client_learning_rate=tf.cast(
              round_state[keys.OPTIMIZER_HPARAMS][
                  keys.LEARNING_RATE], tf.float32),
          client_steps=steps,
          # A client adds g~_c only to the rows it holds.
          augmented_steps=join(total['row_steps'], [steps] * len(others)),
          central_gradient=list(round_state[AUGMENTING_GRADIENT]))
    new_server, new_x, new_central_gradient = mixed_fl_step.server_update(
        mixing, optimizers, server=server, x=x, mean_update=mean,
        central_delta=list(central_delta), central_steps=central_steps,
        **gradient_transfer_inputs)
    client_work = collections.OrderedDict(round_state)
    if two_way:
      client_work[AUGMENTING_GRADIENT] = new_central_gradient
    return new_server, tff.learning.models.ModelWeights(
        trainable=new_x, non_trainable=weights.non_trainable), client_work

  @tff.tensorflow.computation
  def finish(round_state, client_work, metrics, mean_costs):
    """The schedules advanced; the client work's measurements (the K-step
    client work's, with the selected rows' costs)."""
    work = work_metrics.work_measurements(
        metrics, round_state, mean_costs)
    return scheduled.advance(
        round_state, client_work,
        work[keys.FIRST_STEP_LOSS]), work

  @tff.federated_computation(state_type, tff.FederatedType(data_type,
                                                           tff.CLIENTS))
  def next_fn(state, client_data):
    server, weights = state.server, state.global_model_weights
    round_state, central = mixed_fl_step.prepare(
        mixing, central_computation, server, weights, state.client_work)
    central_delta, central_loss, _, central_steps = central
    table, rest, aug_table, aug_rest, inputs = tff.federated_map(
        broadcast_parts, (weights, round_state))
    inputs_at_clients = tff.federated_broadcast(inputs)
    row_keys, counts, rows = download(
        table, client_data,
        inputs_at_clients[keys.NUM_LOCAL_STEPS])
    rest_at_clients = tff.federated_broadcast(rest)
    if gradient_transfer:
      aug_rows = download.select(row_keys, aug_table)
      aug_rest_at_clients = tff.federated_broadcast(aug_rest)
    else:  # Nothing to send: the clients' zeros are made locally.
      aug_rows, aug_rest_at_clients = rows, rest_at_clients
    upload, metrics, costs = tff.federated_map(
        client_train, (client_data, row_keys, counts, rows, rest_at_clients,
                       aug_rows, aug_rest_at_clients, inputs_at_clients))
    new_server, new_weights, client_work = tff.federated_map(
        server_update, (server, weights, round_state,
                        aggregate_rows(upload), central_delta, central_steps))
    client_work, work = tff.federated_map(
        finish, (round_state, client_work, aggregate_metrics(metrics),
                 tff.federated_mean(costs)))
    new_state = tff.federated_zip(collections.OrderedDict(
        global_model_weights=new_weights, client_work=client_work,
        server=new_server))
    measurements = tff.federated_zip(collections.OrderedDict(
        client_work=work,
        central=tff.federated_zip(collections.OrderedDict(loss=central_loss)),
    ))
    return tff.learning.templates.LearningProcessOutput(new_state, measurements)

  get_model_weights, set_model_weights = common.model_weights_accessors(
      state_type.member, weights_type)
  get_hparams, set_hparams = common.client_work_hparams(state_type.member)
  return tff.learning.templates.LearningProcess(
      init_fn, next_fn, get_model_weights, set_model_weights,
      get_hparams_fn=get_hparams, set_hparams_fn=set_hparams)
