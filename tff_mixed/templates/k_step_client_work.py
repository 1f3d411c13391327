"""The K-step client work every algorithm in tff_mixed is built from.

Each client takes exactly K optimizer steps (seed 000, Algorithm 2: batches
drawn in order from its dataset, cycled when it holds fewer than K) with
`step_loop.build_k_step_update`. A client with no data takes no step and
reports weight 0; a client whose update is not finite reports a zero update
with weight 0, so a round never produces NaN.

What algorithms add to it is composed, not switched on by options:

* `tff_mixed.templates.client_extensions`: a part of the state that clients
  receive or the server updates, and named extra uploads (Gradient
  Transfer's augmenting gradient, the first-step gradient of seed 004 Eq. 7,
  seed 003's global optimizer statistics);
* `tff_mixed.templates.scheduled_client_work.with_schedules`: K and the
  learning rate following `tff_mixed.schedules`, the way TFF's
  `fed_avg_with_optimizer_schedule` moves a client learning rate.

Two layers, as in `tff.learning`: the `tf.function` of `step_loop` is
testable without TFF; `build_k_step_client_work` wraps it once in a
`tff.tensorflow.computation` and once in a `tff.federated_computation`.
"""

import collections
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed import checks
from tff_mixed import group_data
from tff_mixed.metrics import communication
from tff_mixed.templates import client_extensions
from tff_mixed.templates import client_groups as groups
from tff_mixed import keys
from tff_mixed.templates import common
from tff_mixed.templates import composers
from tff_mixed.templates import step_loop
from tff_mixed.templates import work_metrics

ModelFn = common.ModelFn
Optimizer = common.Optimizer


class ClientStart(NamedTuple):
  """What every client of a round starts from: the optimizer's `hparams`,
  and (None unless an extension gives them) an `augmenting_gradient`, a
  starting `optimizer_state` and a `step_gradient`
  (`client_extensions.ClientExtension`)."""
  hparams: Any
  augmenting_gradient: Any = None
  optimizer_state: Any = None
  step_gradient: Any = None


@common.names_autograph
def build_k_step_client_work(
    model_fn: ModelFn,
    optimizer: Optimizer,
    *,
    num_local_steps: int = 1,
    client_weighting: tff.learning.ClientWeighting = tff.learning.ClientWeighting.NUM_EXAMPLES,
    metrics_aggregator: Optional[Callable[..., tff.Computation]] = None,
    loss_weight: float = 1.0,
    flops_per_step: Optional[Callable[[tf.Tensor], tf.Tensor]] = None,
    extensions: Sequence[client_extensions.ClientExtension] = (),
    client_groups: Optional[groups.ClientGroups] = None,
) -> tff.learning.templates.ClientWorkProcess:
  """Builds the K-step `ClientWorkProcess`.

  State (at SERVER), an `OrderedDict`: `optimizer_hparams` (the client
  optimizer's hyper-parameters) and `num_local_steps` (K, int32), both sent
  to every client, plus the keys of `extensions`. `get_hparams` and
  `set_hparams` read and replace the whole state.

  Signatures:
    initialize: `( -> S@SERVER)`
    next: `(<S@SERVER, W@keys.CLIENTS, {B*}@keys.CLIENTS> ->
           <state=S@SERVER, result=ClientResult@keys.CLIENTS, measurements=M@SERVER>)`
    next_with_uploads: `next`'s, returning also `uploads=U@SERVER`
      (`composers.UploadingClientWork`).

  Measurements: `train` (the model's metrics summed then finalized),
  `num_local_steps` (this round's K), `client_learning_rate` (if the
  optimizer has a learning rate), `sgd_steps` (steps taken, summed over the
  cohort, less those of clients whose update was dropped as not finite), `first_step_loss` (the mean over clients that trained of the loss
  of their first batch at the round's model, NaN if none did; seed 001's
  loss estimate, no extra computation), `clients/participating`,
  `clients/empty` and `clients/dropped_non_finite` (counts over the cohort:
  updates in the mean, clients without data, updates dropped as not
  finite), `bytes_downloaded_per_client` and
  `bytes_uploaded_per_client` (from the types of what is broadcast to and
  uploaded by a client; the update as an extension's aggregator encodes
  it, `client_extensions.ClientExtension.update_bytes`),
  `client_flops_per_client` (with `flops_per_step`).

  Uploads (what the server step receives, not measurements): `sgd_steps`
  (as measured), then what the extensions' `server_update` gives (e.g.
  `update_sum`, `first_gradient_mean`).

  Args:
    model_fn: No-arg callable returning a `tff.learning.models.VariableModel`.
    optimizer: The client `tff.learning.optimizers.Optimizer`.
    num_local_steps: K, an int >= 1 (`with_schedules` sets it and makes it
      follow a schedule).
    client_weighting: `NUM_EXAMPLES` (examples processed) or `UNIFORM`.
    metrics_aggregator: As in `tff.learning`; default `sum_then_finalize`.
    loss_weight: Scales the client loss gradient (mixed FL's w_f).
    flops_per_step: Optional `batch size -> FLOPs` of one step (TF
      arithmetic); adds the measurement `client_flops_per_client`, the mean
      over the cohort of steps x FLOPs at the client's mean batch size.
    extensions: `client_extensions.ClientExtension`s, in order.
    client_groups: None, or a `client_groups.ClientGroups`: each keys.CLIENTS
      value is then a group of simulated clients
      (`tff_mixed.templates.client_groups`), trained in one TF call as its
      `mode` says; its result is their weighted mean update with their
      weight sum, its metrics and uploads their sums. The data type is then
      `group_data.group_type(input_spec)`.

  Raises:
    TypeError, ValueError: For a bad `optimizer`, `num_local_steps` or
      `client_weighting`, or a model metric named like a measurement.
  """
  if not isinstance(optimizer, Optimizer):
    raise TypeError(
        'optimizer must be a tff.learning.optimizers.Optimizer, got '
        f'{type(optimizer).__name__}.'
    )
  num_local_steps = checks.check_num_steps(num_local_steps)
  client_groups = groups.checked(client_groups)
  if metrics_aggregator is None:
    metrics_aggregator = tff.learning.metrics.sum_then_finalize
  extensions = tuple(extensions)
  full_gradient = any(e.needs_full_gradient for e in extensions)
  first_gradient = any(e.needs_first_gradient for e in extensions)

  with tf.Graph().as_default():
    model = model_fn()
    finalizers = work_metrics.work_finalizers(
        model, flops=flops_per_step is not None)
    weights_type = tff.learning.models.weights_type_from_model(model)
    input_spec = model.input_spec
    if client_groups:
      data_type = group_data.group_type(input_spec)
    else:
      data_type = tff.SequenceType(tff.types.tensorflow_to_type(input_spec))
  hparams = common.hparams_of(optimizer)
  trainable_specs = tuple(
      tf.TensorSpec(t.shape, t.dtype) for t in weights_type.trainable)

  @tff.tensorflow.computation
  def initial_state_fn():
    state = collections.OrderedDict([
        (keys.OPTIMIZER_HPARAMS, hparams),
        (keys.NUM_LOCAL_STEPS, tf.constant(num_local_steps, tf.int32)),
    ])
    for extension in extensions:
      state.update(extension.initial_state(optimizer, trainable_specs))
    return state

  @tff.federated_computation
  def init_fn():
    return tff.federated_eval(initial_state_fn, tff.SERVER)

  state_type = init_fn.type_signature.result.member

  @tff.tensorflow.computation(state_type)
  def client_inputs(state):
    inputs = collections.OrderedDict(
        (key, state[key]) for key in (keys.OPTIMIZER_HPARAMS, keys.NUM_LOCAL_STEPS))
    for extension in extensions:
      inputs = extension.client_inputs(optimizer, state, inputs)
    return inputs

  client_inputs_type = client_inputs.type_signature.result

  def client_start(inputs) -> ClientStart:
    """What the round's clients start from (`ClientStart`)."""
    start, augment, step_gradient = None, None, None
    for extension in extensions:
      start = _first(start, extension.initial_optimizer_state(
          optimizer, inputs))
      augment = _first(augment, extension.augmenting_gradient(inputs))
      step_gradient = _first(step_gradient, extension.step_gradient(inputs))
    client_hparams = (inputs[keys.OPTIMIZER_HPARAMS] if start is None
                      else optimizer.get_hparams(start))
    return ClientStart(client_hparams, augment, start, step_gradient)

  def client_finish(inputs, output):
    """One client's `(ClientResult, metrics, uploads)` from its output."""
    update = output.result.update
    for extension in extensions:
      update = extension.transform_update(update)
    result = tff.learning.templates.ClientResult(
        update=update, update_weight=output.result.update_weight)
    extra_flops = [e.client_flops(output) for e in extensions]
    metrics = work_metrics.work_metrics(
        output, flops_per_step,
        extra_flops=[f for f in extra_flops if f is not None])
    # Only extensions that upload something appear, keyed by their index.
    uploads = collections.OrderedDict()
    for i, extension in enumerate(extensions):
      upload = extension.uploads(inputs, output)
      if upload:
        uploads[str(i)] = upload
    return result, metrics, uploads

  def build_client_update():
    return step_loop.build_k_step_update(
        model_fn, client_weighting=client_weighting, loss_weight=loss_weight,
        full_gradient=full_gradient, first_gradient=first_gradient)

  if client_groups:
    train = groups.build_group_training(
        model_fn, client_groups, optimizer, client_start, client_finish,
        build_client_update, input_spec, client_weighting=client_weighting,
        loss_weight=loss_weight, full_gradient=full_gradient,
        first_gradient=first_gradient)
  else:

    def train(inputs, weights, data):
      start = client_start(inputs)
      output = build_client_update()(
          optimizer, start.hparams, inputs[keys.NUM_LOCAL_STEPS], weights, data,
          start.augmenting_gradient, start.optimizer_state,
          start.step_gradient)
      return client_finish(inputs, output)

  client_update_computation = tff.tensorflow.computation(
      train, client_inputs_type, weights_type, data_type)

  result_type = client_update_computation.type_signature.result
  aggregate_metrics = metrics_aggregator(finalizers, result_type[1])
  bytes_down = communication.type_size_bytes(
      weights_type
  ) + communication.type_size_bytes(client_inputs_type)
  uploading = [name for name, _ in tff.structure.iter_elements(result_type[2])]
  encoded = [b for b in (e.update_bytes(result_type[0].update)
                         for e in extensions) if b is not None]
  bytes_up = (encoded[-1] if encoded else communication.type_size_bytes(
      result_type[0].update)) + communication.type_size_bytes(
          result_type[0].update_weight) + communication.type_size_bytes(
              result_type[1])
  bytes_up += sum(communication.type_size_bytes(t) for name, t in
                  tff.structure.iter_elements(result_type[2])
                  if extensions[int(name)].counted_in_bytes)

  def server_update(state, metrics, sums, weight_sum):
    """(next state, measurements, what the server step receives)."""
    measurements = work_metrics.work_measurements(
        metrics, state, collections.OrderedDict(
            ((keys.BYTES_DOWNLOADED, np.int64(bytes_down)),
             (keys.BYTES_UPLOADED, np.int64(bytes_up)))))
    server_uploads = collections.OrderedDict(
        ((keys.SGD_STEPS, measurements[keys.SGD_STEPS]),))
    state = collections.OrderedDict(state)
    for i, extension in enumerate(extensions):
      extension_sums = sums[str(i)] if str(i) in uploading else None
      state, extra = extension.server_update(state, extension_sums, weight_sum)
      server_uploads.update(extra)
    return state, measurements, server_uploads

  server_update_with_sums = tff.tensorflow.computation(server_update)
  server_update_alone = tff.tensorflow.computation(
      lambda state, metrics: server_update(state, metrics, None, None))

  @tff.tensorflow.computation
  def weight_of(result):
    return result.update_weight

  @tff.federated_computation(
      tff.FederatedType(state_type, tff.SERVER),
      tff.FederatedType(weights_type, tff.CLIENTS),
      tff.FederatedType(data_type, tff.CLIENTS),
  )
  def next_with_uploads_fn(state, weights, data):
    inputs_at_clients = tff.federated_broadcast(
        tff.federated_map(client_inputs, state))
    client_result, client_metrics, uploads = tff.federated_map(
        client_update_computation, (inputs_at_clients, weights, data))
    metrics = aggregate_metrics(client_metrics)
    if uploading:
      weight_sum = tff.federated_sum(
          tff.federated_map(weight_of, client_result))
      new_state, measurements, server_uploads = tff.federated_map(
          server_update_with_sums,
          (state, metrics, tff.federated_sum(uploads), weight_sum))
    else:
      new_state, measurements, server_uploads = tff.federated_map(
          server_update_alone, (state, metrics))
    return collections.OrderedDict(
        state=new_state, result=client_result, measurements=measurements,
        **{composers.UPLOADS: server_uploads})

  get_hparams_fn, set_hparams_fn = common.whole_state_hparams(state_type)

  return composers.UploadingClientWork(
      init_fn, next_with_uploads_fn, get_hparams_fn=get_hparams_fn,
      set_hparams_fn=set_hparams_fn,
  )


def _first(current: Any, candidate: Any) -> Any:
  """`candidate` unless an earlier extension already gave a value."""
  if current is not None and candidate is not None:
    raise ValueError('Two client extensions give the same client value.')
  return candidate if current is None else current


# Names that moved, and where to (CHANGELOG.md).
_MOVED = {
    **{name: ('tff_mixed.templates.work_metrics', '2026-11-26') for name in (
        'work_finalizers', 'pop_client_counts', 'work_measurements',
        'work_metrics')},
    'ClientExtension': ('tff_mixed.templates.client_extensions', '2026-11-28'),
}


def __getattr__(name):
  if name in _MOVED:
    module, date = _MOVED[name]
    raise AttributeError(
        f'tff_mixed.templates.k_step_client_work.{name} moved to '
        f'{module}.{name} (CHANGELOG.md, {date}).')
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
