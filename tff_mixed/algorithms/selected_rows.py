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

With every row selected this is exactly `build_mixed_fl_process` with a
data-free central loss (a test pins that). With fewer rows it differs in one
place, as in the paper: Gradient Transfer adds g~_c only to the rows a client
holds, so rows no sampled client touches change only through the server's
central step (PT, 2-way GT) or not at all this round (1-way GT). For the
same reason 2-way GT's inferred federated gradient of a row subtracts g~_c
only for the steps of the clients that held it, and is 0 for a row nobody
held (`mixed_fl_step.transfer_gradients`); the server step itself is the one
`build_mixed_fl_process` runs.

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

from tff_mixed.templates import common
from tff_mixed.templates import mixed_fl_step
from tff_mixed.templates import step_loop

PARALLEL_TRAINING = mixed_fl_step.PARALLEL_TRAINING
ONE_WAY_GRADIENT_TRANSFER = mixed_fl_step.ONE_WAY_GRADIENT_TRANSFER
TWO_WAY_GRADIENT_TRANSFER = mixed_fl_step.TWO_WAY_GRADIENT_TRANSFER
_FLOAT_BYTES = 4
_KEY_BYTES = 4
_COSTS = ('rows_per_client', 'embedding_bytes_per_client',
          'bytes_downloaded_per_client', 'bytes_uploaded_per_client',
          'client_flops_per_client')


class RowDownload:
  """The sparse download: each client's row ids, then only those rows.

  `keys, counts, rows = download(table@SERVER, data@CLIENTS)` inside a
  federated computation: `keys` (int32[max_rows]) are the sorted ids of the
  rows the client's next K batches read, padded by repeating the first;
  `counts` how many are real; `rows` the selected rows (a sequence of
  `max_rows` rows) moved by `tff.federated_select`.
  `download.select(keys, other_table)` selects the same rows of another
  table-shaped server value (Gradient Transfer's g~_c).
  """

  def __init__(self, data_type, row_ids_fn, *, num_local_steps: int,
               table_type: tff.TensorType, max_rows_per_client: int):
    num_rows = int(table_type.shape[0])
    k, max_rows = num_local_steps, max_rows_per_client

    def used_ids(ids):
      """(indices, updates) marking the non-negative ids as used."""
      ids = tf.reshape(tf.cast(ids, tf.int64), [-1])
      ids = tf.boolean_mask(ids, ids >= 0)
      return ids[:, tf.newaxis], tf.ones_like(ids, tf.bool)

    @tff.tensorflow.computation(data_type)
    def client_keys(data):
      used = data.repeat().take(k).reduce(
          tf.zeros([num_rows], tf.bool),
          lambda used, batch: tf.tensor_scatter_nd_update(
              used, *used_ids(row_ids_fn(batch))))
      ids = tf.cast(tf.reshape(tf.where(used), [-1]), tf.int32)
      count = tf.size(ids)
      with tf.control_dependencies([tf.debugging.assert_less_equal(
          count, max_rows,
          message=f'A client reads more table rows than max_rows_per_client='
          f'{max_rows}; raise it.')]):
        pad = tf.fill([max_rows - count], tf.concat([ids, [0]], 0)[0])
      return tf.reshape(tf.concat([ids, pad], 0), [max_rows]), count

    @tff.tensorflow.computation(table_type, np.int32)
    def select_row(table, key):
      return tf.gather(table, key)

    self._client_keys, self._select_row = client_keys, select_row
    self._max_key = np.int32(num_rows - 1)

  def select(self, keys, server_table):
    max_key = tff.federated_value(self._max_key, tff.SERVER)
    return tff.federated_select(keys, max_key, server_table, self._select_row)

  def __call__(self, server_table, client_data):
    keys, counts = tff.federated_map(self._client_keys, client_data)
    return keys, counts, self.select(keys, server_table)


def build_selected_rows_process(
    model_fn: Callable[[], tff.learning.models.VariableModel],
    row_ids_fn: Callable[[object], tf.Tensor],
    central_loss_fn: Callable[[tff.learning.models.VariableModel, None],
                              tf.Tensor],
    *,
    mixing: str,
    client_learning_rate: float,
    num_local_steps: int,
    max_rows_per_client: int,
    table_index: int = 0,
    server_learning_rate: float = 1.0,
    central_learning_rate: Optional[float] = None,
    merge_learning_rate: float = 1.0,
    federated_weight: float = 0.5,
    central_weight: float = 0.5,
    num_central_steps: Optional[int] = None,
    flops_per_step: Optional[Callable[[tf.Tensor], tf.Tensor]] = None,
) -> tff.learning.templates.LearningProcess:
  """Builds mixed FL with per-client row selection of one embedding table.

  Clients and server use SGD (as in seed 004's experiments); x(t+1) follows
  `build_mixed_fl_process` for the same `mixing`.

  Signatures:
    initialize: `( -> S@SERVER)`
    next: `(<S@SERVER, {B*}@CLIENTS> -> <state=S@SERVER, metrics=M@SERVER>)`

  Args:
    model_fn: No-arg callable returning a `VariableModel` whose trainable
      variable `table_index` is the [N, d] table the data indexes.
    row_ids_fn: `batch -> int tensor` of the table rows the batch reads
      (any shape; negative ids are padding and ignored).
    central_loss_fn: The data-free central loss, `(model, None) -> scalar`.
    mixing: 'parallel_training', 'one_way_gradient_transfer' or
      'two_way_gradient_transfer'.
    client_learning_rate: eta, the clients' SGD learning rate.
    num_local_steps: K, SGD steps every client takes (its batches cycled).
    max_rows_per_client: The fixed number of keys TFF selects per client
      (pads with repeats of a held row). A client whose K batches read more
      rows fails the round with an error naming this argument.
    table_index: Which trainable variable is the table.
    server_learning_rate: eta_s, SGD on the mean client update.
    central_learning_rate: eta_c (default client x server learning rate).
    merge_learning_rate: eta_m (PT, 2-way GT).
    federated_weight: w_f, scales the client loss gradient.
    central_weight: w_c, scales the central loss gradient.
    num_central_steps: J (default K; 1-way GT always takes 1).
    flops_per_step: Optional `batch size -> FLOPs` of one client step
      (TF arithmetic), for the `client_flops_per_client` measurement.

  Raises:
    TypeError, ValueError: Naming the argument that is wrong.
  """
  if mixing not in mixed_fl_step.MIXINGS:
    raise ValueError(f'mixing must be one of {mixed_fl_step.MIXINGS}, got {mixing!r}.')
  one_way = mixing == ONE_WAY_GRADIENT_TRANSFER
  two_way = mixing == TWO_WAY_GRADIENT_TRANSFER
  gradient_transfer = one_way or two_way
  eta = common.check_number(client_learning_rate, 'client_learning_rate')
  eta_s = common.check_number(server_learning_rate, 'server_learning_rate')
  eta_m = common.check_number(merge_learning_rate, 'merge_learning_rate')
  eta_c = (eta * eta_s if central_learning_rate is None
           else common.check_number(central_learning_rate, 'central_learning_rate'))
  w_f = common.check_number(federated_weight, 'federated_weight')
  w_c = common.check_number(central_weight, 'central_weight')
  k = common.check_num_steps(num_local_steps)
  max_rows = common.check_num_steps(
      max_rows_per_client, 'max_rows_per_client')
  j = 1 if one_way else (
      k if num_central_steps is None
      else common.check_num_steps(
          num_central_steps, 'num_central_steps'))
  if one_way:
    eta_c = 1.0  # One step of SGD(1): -delta is w_c grad f_c(x) exactly.

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
    weights_type = tff.learning.models.weights_type_from_model(model)
    data_type = tff.SequenceType(tff.types.tensorflow_to_type(model.input_spec))
    finalizers = model.metric_finalizers()
  if max_rows > num_rows:
    raise ValueError(
        f'max_rows_per_client={max_rows} exceeds the table\'s {num_rows} rows.')
  others = [i for i in range(len(shapes)) if i != table_index]
  other_shapes = [shapes[i] for i in others]
  other_floats = sum(int(np.prod(s)) for s in other_shapes)
  row_type = tff.TensorType(np.float32, [dim])
  sgd = tff.learning.optimizers.build_sgdm(learning_rate=eta)
  sgd_hparams = sgd.get_hparams(sgd.initialize(tf.TensorSpec((), tf.float32)))
  central_sgd = tff.learning.optimizers.build_sgdm(learning_rate=eta_c)
  central_hparams = central_sgd.get_hparams(
      central_sgd.initialize(tf.TensorSpec((), tf.float32)))
  zeros = [np.zeros(s, d) for s, d in zip(shapes, dtypes)]
  specs = tuple(tf.TensorSpec(s, d) for s, d in zip(shapes, dtypes))
  server_sgd = tff.learning.optimizers.build_sgdm(learning_rate=eta_s)
  merge_sgd = tff.learning.optimizers.build_sgdm(learning_rate=eta_m)

  def split(tensors):
    return tensors[table_index], [tensors[i] for i in others]

  def join(table, rest):
    tensors = list(rest)
    tensors.insert(table_index, table)
    return tensors

  # ---------------------------------------------------------------- server
  @tff.tensorflow.computation
  def server_init():
    model = model_fn()
    return collections.OrderedDict(
        weights=tff.learning.models.ModelWeights.from_model(model),
        federated_gradient=[tf.constant(z) for z in zeros],
        augmenting_gradient=[tf.constant(z) for z in zeros],
    )

  @tff.federated_computation
  def init_fn():
    return tff.federated_eval(server_init, tff.SERVER)

  state_type = init_fn.type_signature.result
  server_state_type = state_type.member

  @tff.tensorflow.computation(server_state_type)
  def central_computation(state):
    update = mixed_fl_step.build_central_update(
        model_fn, lambda m, unused_batch: central_loss_fn(m, None),
        loss_weight=w_c)
    aug = state['federated_gradient'] if two_way else zeros
    batches = tf.data.Dataset.range(j).map(lambda _: 0)
    delta, loss, _ = update(central_sgd, central_hparams, state['weights'],
                            batches, aug)
    return delta, loss

  @tff.tensorflow.computation(server_state_type)
  def broadcast_parts(state):
    """The table, the other weights, and (GT) g~_c split the same way."""
    table, rest = split(list(state['weights'].trainable))
    aug_table, aug_rest = split(list(state['augmenting_gradient']))
    return table, rest, aug_table, aug_rest

  @tff.tensorflow.computation
  def one_way_gradient(state, central_delta):
    state = collections.OrderedDict(state)
    state['augmenting_gradient'] = [-d for d in central_delta]
    return state

  # ---------------------------------------------------------------- client
  download = RowDownload(data_type, row_ids_fn, num_local_steps=k,
                         table_type=tff.TensorType(dtypes[table_index],
                                                   [num_rows, dim]),
                         max_rows_per_client=max_rows)
  client_update = step_loop.build_k_step_update  # Built per trace.

  def scatter_rows(keys, count, rows):
    valid = keys[:count, tf.newaxis]
    return tf.scatter_nd(valid, rows[:count], [num_rows, dim])

  rows_type = tff.SequenceType(row_type)
  other_types = [tff.TensorType(d, s) for d, s in
                 zip([dtypes[i] for i in others], other_shapes)]

  @tff.tensorflow.computation(
      data_type, tff.TensorType(np.int32, [max_rows]), np.int32, rows_type,
      other_types, rows_type, other_types)
  def client_train(data, keys, count, rows, rest, aug_rows, aug_rest):
    rows = rows.batch(max_rows).get_single_element()
    table = scatter_rows(keys, count, rows)
    initial = tff.learning.models.ModelWeights(
        trainable=join(table, rest), non_trainable=[])
    aug = None
    if gradient_transfer:
      aug = join(scatter_rows(keys, count, aug_rows.batch(
          max_rows).get_single_element()), aug_rest)
    update_fn = client_update(
        model_fn, client_weighting=tff.learning.ClientWeighting.NUM_EXAMPLES,
        loss_weight=w_f)
    out = update_fn(sgd, sgd_hparams, tf.constant(k), initial, data, aug)
    table_update, rest_update = split(list(out.result.update))
    valid = tf.cast(tf.range(max_rows) < count, tf.float32)[:, tf.newaxis]
    row_update = tf.gather(table_update, keys) * valid
    weight = out.result.update_weight
    upload = collections.OrderedDict(
        keys=keys,
        weighted_rows=weight * row_update,
        weighted_rest=[weight * u for u in rest_update],
        weight=weight,
    )
    if two_way:  # For g_f: the unweighted sums, and who held which row.
      upload['rows'] = row_update
      upload['rest'] = rest_update
      upload['steps'] = tf.cast(out.sgd_steps, tf.float32)
      upload['count'] = count
    n = tf.cast(count, tf.float32)
    row_bytes = n * dim * _FLOAT_BYTES
    rest_bytes = float(other_floats * _FLOAT_BYTES)
    copies = 2.0 if gradient_transfer else 1.0
    steps = tf.cast(out.sgd_steps, tf.float32)
    flops = tf.constant(0.0)
    if flops_per_step is not None:  # At the client's mean batch size.
      batch = tf.math.divide_no_nan(weight, steps)
      flops = steps * tf.cast(flops_per_step(batch), tf.float32)
    costs = collections.OrderedDict(
        rows_per_client=n,
        embedding_bytes_per_client=(copies + 1.0) * row_bytes,
        bytes_downloaded_per_client=copies * (row_bytes + rest_bytes),
        bytes_uploaded_per_client=row_bytes + rest_bytes + n * _KEY_BYTES,
        client_flops_per_client=flops,
    )
    return upload, out.metrics, costs, out.sgd_steps

  # ----------------------------------------------------------- aggregation
  upload_type = client_train.type_signature.result[0]

  @tff.tensorflow.computation
  def zero_sum():
    total = collections.OrderedDict(
        rows=tf.zeros([num_rows, dim]),
        rest=[tf.zeros(s) for s in other_shapes],
        weight=tf.constant(0.0))
    if two_way:
      total['unweighted_rows'] = tf.zeros([num_rows, dim])
      total['unweighted_rest'] = [tf.zeros(s) for s in other_shapes]
      total['row_steps'] = tf.zeros([num_rows, 1])
      total['steps'] = tf.constant(0.0)
    return total

  sum_type = zero_sum.type_signature.result

  @tff.tensorflow.computation(sum_type, upload_type)
  def accumulate(total, upload):
    keys = upload['keys'][:, tf.newaxis]  # Padding rows carry zeros.
    new = collections.OrderedDict(
        rows=tf.tensor_scatter_nd_add(total['rows'], keys,
                                      upload['weighted_rows']),
        rest=[t + u for t, u in zip(total['rest'], upload['weighted_rest'])],
        weight=total['weight'] + upload['weight'])
    if two_way:
      new['unweighted_rows'] = tf.tensor_scatter_nd_add(
          total['unweighted_rows'], keys, upload['rows'])
      new['unweighted_rest'] = [
          t + u for t, u in zip(total['unweighted_rest'], upload['rest'])]
      # Steps of the clients holding each row (padding keys count nothing).
      held = tf.cast(tf.range(max_rows) < upload['count'], tf.float32)
      new['row_steps'] = tf.tensor_scatter_nd_add(
          total['row_steps'], keys, (upload['steps'] * held)[:, tf.newaxis])
      new['steps'] = total['steps'] + upload['steps']
    return new

  @tff.tensorflow.computation(sum_type, sum_type)
  def merge(a, b):
    return tf.nest.map_structure(tf.add, a, b)

  @tff.tensorflow.computation(sum_type)
  def report(total):
    return total

  # ---------------------------------------------------------------- update
  @tff.tensorflow.computation
  def server_update(state, total, central_delta):
    x = list(state['weights'].trainable)
    mean = [tf.math.divide_no_nan(t, total['weight'])
            for t in join(total['rows'], total['rest'])]
    _, _, new_x = mixed_fl_step.merge(
        mixing, server_sgd, server_sgd.initialize(specs), merge_sgd,
        merge_sgd.initialize(specs), x, mean, central_delta)
    new_state = collections.OrderedDict(state)
    if two_way:
      steps = total['steps']
      (new_state['augmenting_gradient'],
       new_state['federated_gradient']) = mixed_fl_step.transfer_gradients(
           central_delta=central_delta, central_step_size=eta_c * j,
           update_sum=join(total['unweighted_rows'],
                           total['unweighted_rest']),
           client_learning_rate=eta, client_steps=steps,
           augmented_steps=join(total['row_steps'], [steps] * len(others)),
           federated_gradient=state['federated_gradient'],
           central_gradient=state['augmenting_gradient'])
    new_state['weights'] = tff.learning.models.ModelWeights(
        trainable=new_x, non_trainable=state['weights'].non_trainable)
    return new_state

  metrics_aggregation = tff.learning.metrics.sum_then_finalize(
      finalizers, client_train.type_signature.result[1])

  @tff.federated_computation(state_type, tff.FederatedType(data_type,
                                                           tff.CLIENTS))
  def next_fn(state, client_data):
    central_delta, central_loss = tff.federated_map(central_computation, state)
    if one_way:
      state = tff.federated_map(one_way_gradient, (state, central_delta))
    table, rest, aug_table, aug_rest = tff.federated_map(
        broadcast_parts, state)
    keys, counts, rows = download(table, client_data)
    rest_at_clients = tff.federated_broadcast(rest)
    if gradient_transfer:
      aug_rows = download.select(keys, aug_table)
      aug_rest_at_clients = tff.federated_broadcast(aug_rest)
    else:  # Nothing to send: the clients' zeros are made locally.
      aug_rows, aug_rest_at_clients = rows, rest_at_clients
    upload, metrics, costs, sgd_steps = tff.federated_map(
        client_train, (client_data, keys, counts, rows, rest_at_clients,
                       aug_rows, aug_rest_at_clients))
    total = tff.federated_aggregate(upload, zero_sum(), accumulate, merge,
                                    report)
    steps_sum = tff.federated_sum(sgd_steps)
    new_state = tff.federated_map(
        server_update, (state, total, central_delta))
    mean_costs = tff.federated_mean(costs)
    work = collections.OrderedDict(
        train=metrics_aggregation(metrics),
        sgd_steps=steps_sum,
        num_local_steps=tff.federated_value(np.int32(k), tff.SERVER),
    )
    for name in _COSTS:
      work[name] = mean_costs[name]
    measurements = tff.federated_zip(collections.OrderedDict(
        client_work=tff.federated_zip(work),
        central=tff.federated_zip(collections.OrderedDict(loss=central_loss)),
    ))
    return tff.learning.templates.LearningProcessOutput(new_state, measurements)

  get_model_weights, set_model_weights = common.model_weights_accessors(
      server_state_type, weights_type, key='weights')

  return tff.learning.templates.LearningProcess(
      init_fn, next_fn, get_model_weights, set_model_weights)

