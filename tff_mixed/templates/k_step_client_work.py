"""The one K-step client work every algorithm in tff_mixed is built from.

Each client takes exactly K optimizer steps, K chosen by the server each round
(a constant or a `tff_mixed.schedules` schedule), on batches drawn in order
from its dataset, cycling the dataset when it holds fewer than K batches (seed
000, Algorithm 2). A client learning-rate schedule can override the client
optimizer's learning rate each round (seed 000's decaying-rate baseline). A
client with no data takes no step and reports weight 0; a client whose update
is not finite reports a zero update with weight 0, so a round never produces
NaN.

Two layers, as in `tff.learning`: `step_loop.build_k_step_update` is a plain
`tf.function` testable without TFF; `build_k_step_client_work` wraps it once
in a `tff.tensorflow.computation` and once in a `tff.federated_computation`.
"""

import collections
from collections.abc import Callable
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed import schedules
from tff_mixed.templates import common
from tff_mixed.templates import step_loop
from tff_mixed.metrics import communication

ModelFn = Callable[[], tff.learning.models.VariableModel]
Optimizer = tff.learning.optimizers.Optimizer

# Keys of the client work's server state.
OPTIMIZER_HPARAMS = 'optimizer_hparams'
NUM_LOCAL_STEPS = 'num_local_steps'
AUGMENTING_GRADIENT = 'augmenting_gradient'
ROUND_NUM = 'round_num'
SCHEDULES = 'schedules'
LEARNING_RATE = common.LEARNING_RATE
SGD_STEPS = 'sgd_steps'
FIRST_STEP_LOSS = 'first_step_loss'
CLIENT_LEARNING_RATE = 'client_learning_rate'
CLIENT_FLOPS = 'client_flops_per_client'
FIRST_GRADIENT = 'first_gradient'
FIRST_GRADIENT_MEAN = 'first_gradient_mean'
OPTIMIZER_STATE = 'optimizer_state'
FULL_GRADIENT_MEAN = 'full_gradient_mean'


def build_k_step_client_work(
    model_fn: ModelFn,
    optimizer: Optimizer,
    *,
    num_local_steps: schedules.ScheduleOrValue,
    learning_rate: Optional[schedules.ScheduleOrValue] = None,
    client_weighting: tff.learning.ClientWeighting = tff.learning.ClientWeighting.NUM_EXAMPLES,
    metrics_aggregator: Optional[Callable[..., tff.Computation]] = None,
    augmenting_gradient: bool = False,
    loss_weight: float = 1.0,
    report_first_gradient: bool = False,
    flops_per_step: Optional[Callable[[tf.Tensor], tf.Tensor]] = None,
    broadcast_optimizer_state: bool = False,
    average_optimizer_state: bool = False,
    report_full_gradient: bool = False,
    full_gradient_flops: Optional[Callable[[tf.Tensor], tf.Tensor]] = None,
) -> tff.learning.templates.ClientWorkProcess:
  """Builds the K-step `ClientWorkProcess`.

  State (at SERVER), an `OrderedDict`:
    optimizer_hparams: the client optimizer's hyper-parameters; with a
      `learning_rate` schedule its learning rate is this round's value.
    num_local_steps: this round's K (int32).
    round_num: rounds completed (int32).
    schedules: `OrderedDict(num_local_steps=..., learning_rate=...)`, the
      schedules' states (a constant K has a one-value state too).
    augmenting_gradient: only with `augmenting_gradient=True`; zeros shaped
      like the trainable weights until the caller writes Gradient Transfer's
      augmenting gradient there (with `set_hparams` or its own computation).
    optimizer_state: only with `broadcast_optimizer_state=True`: the client
      optimizer's state (from `optimizer.initialize` of the trainable
      weights), which every client starts from: seed 003's global optimizer
      statistics. With `average_optimizer_state=True` the client work
      replaces it after each round by the mean of the clients' final states
      (MFL); otherwise the caller updates it (FedGBO, Mimelite).
  Clients receive `optimizer_hparams` (or instead the optimizer state with
  those hyper-parameters set), `num_local_steps` and the augmenting
  gradient, not the schedules' states. After the round the server advances
  the schedules with the round's `first_step_loss` and writes the next K and
  learning rate, so resuming from a checkpointed state continues a schedule
  exactly. `set_hparams` replaces the whole state; a K or learning rate set
  by hand stays when it is constant and lasts one round when it follows a
  schedule.

  Signatures:
    initialize: `( -> S@SERVER)`
    next: `(<S@SERVER, W@CLIENTS, {B*}@CLIENTS> ->
           <state=S@SERVER, result=ClientResult@CLIENTS, measurements=M@SERVER>)`

  Measurements: `train` (the model's metrics summed then finalized),
  `num_local_steps` (this round's K), `client_learning_rate` (this round's,
  if the optimizer has a learning rate), `sgd_steps` (steps taken, summed
  over the cohort), `first_step_loss` (the mean over clients that trained of
  the loss of their first batch at the round's model, NaN if none did; seed
  001's loss estimate, no extra computation), `bytes_downloaded_per_client`
  and `bytes_uploaded_per_client` (from the types of what is broadcast to and
  uploaded by a client).

  Args:
    model_fn: No-arg callable returning a `tff.learning.models.VariableModel`.
    optimizer: The client `tff.learning.optimizers.Optimizer`.
    num_local_steps: K: an int >= 1 or a `tff_mixed.schedules.Schedule`
      (its values become `max(ceil(v), 1)` steps).
    learning_rate: None (keep the optimizer's), a number or a schedule for the
      client optimizer's `learning_rate` hyper-parameter.
    client_weighting: `NUM_EXAMPLES` (examples processed) or `UNIFORM`.
    metrics_aggregator: As in `tff.learning`; default `sum_then_finalize`.
    augmenting_gradient: Add the state's augmenting gradient to every step.
    loss_weight: Scales the client loss gradient (mixed FL's w_f).
    report_first_gradient: Also measure `first_gradient_mean`, the unweighted
      cohort mean of each client's first-step gradient at the round's model
      (seed 004 Eq. 7). No extra computation; one model-sized upload more per
      client, which `bytes_uploaded_per_client` includes.
    flops_per_step: Optional `batch size -> FLOPs` of one step (TF
      arithmetic); adds the measurement `client_flops_per_client`, the mean
      over the cohort of steps x FLOPs at the client's mean batch size.
    broadcast_optimizer_state: Keep the client optimizer's state in this
      process's state and start every client from it.
    average_optimizer_state: With `broadcast_optimizer_state`, clients also
      upload their final optimizer state without its hyper-parameters (an
      `OrderedDict` state of float tensors, as `tff.learning`'s optimizers
      and `tff_mixed.optimizers` have), and the state becomes their mean
      with the update weights (kept when no client trained).
    report_full_gradient: Clients also compute the mean loss gradient over
      their whole dataset at the round's model, before training, and upload
      it; adds the measurement `full_gradient_mean`, its mean with the
      update weights (Mimelite).
    full_gradient_flops: Optional `examples -> FLOPs` of that pass, added to
      `client_flops_per_client` (needs `flops_per_step`).

  Raises:
    TypeError, ValueError: For a bad `optimizer`, `num_local_steps`,
      `learning_rate` or `client_weighting`.
  """
  if not isinstance(optimizer, Optimizer):
    raise TypeError(
        'optimizer must be a tff.learning.optimizers.Optimizer, got '
        f'{type(optimizer).__name__}.'
    )
  k_schedule = schedules.as_schedule(
      num_local_steps, 'num_local_steps', integer=True)
  if average_optimizer_state and not broadcast_optimizer_state:
    raise ValueError(
        'average_optimizer_state=True needs broadcast_optimizer_state=True.')
  if full_gradient_flops is not None and (
      not report_full_gradient or flops_per_step is None):
    raise ValueError(
        'full_gradient_flops needs report_full_gradient=True and '
        'flops_per_step.')
  if metrics_aggregator is None:
    metrics_aggregator = tff.learning.metrics.sum_then_finalize

  with tf.Graph().as_default():
    model = model_fn()
    finalizers = collections.OrderedDict(model.metric_finalizers())
    for name in (SGD_STEPS, FIRST_STEP_LOSS, CLIENT_FLOPS):
      if name in finalizers:
        raise ValueError(f'The model has a metric named {name!r}; rename it.')
    # These ride in the metrics' one federated sum: in TFF's C++ runtime
    # every separate federated_sum costs a pass over the cohort.
    finalizers[SGD_STEPS] = tf.function(lambda steps: steps[0])
    finalizers[FIRST_STEP_LOSS] = tf.function(
        lambda loss_and_count: loss_and_count[0] / loss_and_count[1])
    if flops_per_step is not None:
      finalizers[CLIENT_FLOPS] = tf.function(
          lambda sum_and_count: tf.math.divide_no_nan(*sum_and_count))

    weights_type = tff.learning.models.weights_type_from_model(model)
    data_type = tff.SequenceType(tff.types.tensorflow_to_type(model.input_spec))
  hparams = optimizer.get_hparams(
      optimizer.initialize(tf.TensorSpec((), tf.float32))
  )
  schedule_map = collections.OrderedDict([(NUM_LOCAL_STEPS, k_schedule)])
  if learning_rate is not None:
    if LEARNING_RATE not in hparams:
      raise ValueError(
          f'learning_rate was given, but the client optimizer has no '
          f'{LEARNING_RATE!r} hyper-parameter.')
    schedule_map[LEARNING_RATE] = schedules.as_schedule(
        learning_rate, 'learning_rate')
  has_learning_rate = LEARNING_RATE in hparams

  def with_scheduled_values(state, initial=False):
    """`state` with K and the learning rate its schedules give.

    A constant sets its value only initially, so that a value set by hand
    with `set_hparams` stays.
    """
    state = collections.OrderedDict(state)
    values = collections.OrderedDict(
        (key, schedule.value(state[SCHEDULES][key]))
        for key, schedule in schedule_map.items()
        if initial or not isinstance(schedule, schedules.Constant))
    if NUM_LOCAL_STEPS in values:
      state[NUM_LOCAL_STEPS] = schedules.num_steps(values[NUM_LOCAL_STEPS])
    if LEARNING_RATE in values:
      scheduled = collections.OrderedDict(state[OPTIMIZER_HPARAMS])
      dtype = getattr(scheduled[LEARNING_RATE], 'dtype', tf.float32)
      scheduled[LEARNING_RATE] = tf.cast(values[LEARNING_RATE], dtype)
      state[OPTIMIZER_HPARAMS] = scheduled
    return state

  initial_state = collections.OrderedDict([
      (OPTIMIZER_HPARAMS, hparams),
      (NUM_LOCAL_STEPS, np.int32(1)),
      (ROUND_NUM, np.int32(0)),
      (SCHEDULES, collections.OrderedDict(
          (key, schedule.initialize())
          for key, schedule in schedule_map.items())),
  ])
  if augmenting_gradient:
    initial_state[AUGMENTING_GRADIENT] = [
        np.zeros(t.shape, t.dtype) for t in weights_type.trainable
    ]
  trainable_specs = tuple(
      tf.TensorSpec(t.shape, t.dtype) for t in weights_type.trainable)

  @tff.tensorflow.computation
  def initial_state_fn():
    state = with_scheduled_values(initial_state, initial=True)
    if broadcast_optimizer_state:
      state[OPTIMIZER_STATE] = optimizer.initialize(trainable_specs)
    return state

  @tff.federated_computation
  def init_fn():
    return tff.federated_eval(initial_state_fn, tff.SERVER)

  state_type = init_fn.type_signature.result.member
  client_keys = [OPTIMIZER_HPARAMS, NUM_LOCAL_STEPS]
  if broadcast_optimizer_state:
    client_keys[0] = OPTIMIZER_STATE
  if augmenting_gradient:
    client_keys.append(AUGMENTING_GRADIENT)
  hparam_keys = set(hparams)

  def statistics(optimizer_state):
    return collections.OrderedDict(
        (k, v) for k, v in optimizer_state.items() if k not in hparam_keys)

  @tff.tensorflow.computation(state_type)
  def client_inputs(state):
    inputs = collections.OrderedDict((key, state[key]) for key in client_keys)
    if broadcast_optimizer_state:  # The hyper-parameters ride in the state.
      inputs[OPTIMIZER_STATE] = optimizer.set_hparams(
          state[OPTIMIZER_STATE], state[OPTIMIZER_HPARAMS])
    return inputs

  client_inputs_type = client_inputs.type_signature.result

  @tff.tensorflow.computation(client_inputs_type, weights_type, data_type)
  def client_update_computation(inputs, weights, data):
    client_update = step_loop.build_k_step_update(
        model_fn, client_weighting=client_weighting, loss_weight=loss_weight,
        full_gradient=report_full_gradient,
    )
    if broadcast_optimizer_state:
      initial_optimizer_state = inputs[OPTIMIZER_STATE]
      client_hparams = optimizer.get_hparams(initial_optimizer_state)
    else:
      initial_optimizer_state = None
      client_hparams = inputs[OPTIMIZER_HPARAMS]
    output = client_update(
        optimizer, client_hparams, inputs[NUM_LOCAL_STEPS], weights,
        data, inputs[AUGMENTING_GRADIENT] if augmenting_gradient else None,
        initial_optimizer_state,
    )
    result = output.result
    trained = tf.cast(output.sgd_steps > 0, tf.float32) * tf.cast(
        result.update_weight > 0, tf.float32)
    metrics = collections.OrderedDict(output.metrics)
    metrics[SGD_STEPS] = [output.sgd_steps]
    metrics[FIRST_STEP_LOSS] = [output.first_loss * trained, trained]
    if flops_per_step is not None:  # At the client's mean batch size.
      steps = tf.cast(output.sgd_steps, tf.float32)
      batch = tf.math.divide_no_nan(
          tf.cast(output.num_examples, tf.float32), steps)
      flops = steps * tf.cast(flops_per_step(batch), tf.float32)
      if full_gradient_flops is not None:
        flops += tf.cast(full_gradient_flops(
            tf.cast(output.full_gradient_examples, tf.float32)), tf.float32)
      metrics[CLIENT_FLOPS] = [flops, 1.0]
    # Extra uploads, in this order: the first-step gradient and its count,
    # the weighted final optimizer statistics, the full-batch gradient.
    extras = []
    if report_first_gradient:
      counted = tf.cast(result.update_weight > 0, tf.float32)
      extras += [output.first_gradient, counted]
    weight = result.update_weight
    if average_optimizer_state:
      extras.append(tf.nest.map_structure(
          lambda t: weight * t, statistics(output.optimizer_state)))
    if report_full_gradient:
      extras.append([weight * g for g in output.full_gradient])
    return (result, metrics, *extras)

  result_type = client_update_computation.type_signature.result
  aggregate_metrics = metrics_aggregator(finalizers, result_type[1])
  bytes_down = communication.type_size_bytes(
      weights_type
  ) + communication.type_size_bytes(client_inputs_type)
  bytes_up = communication.type_size_bytes(result_type)

  def server_update(state, metrics, first_gradient_sum, weight_sum=None,
                    statistics_sum=None, full_gradient_sum=None):
    """(next state, measurements): advances the schedules."""
    metrics = collections.OrderedDict(metrics)
    sgd_steps = metrics.pop(SGD_STEPS)
    first_step_loss = metrics.pop(FIRST_STEP_LOSS)
    client_flops = metrics.pop(CLIENT_FLOPS, None)
    measurements = collections.OrderedDict()
    if first_gradient_sum is not None:
      gradient_sum, clients = first_gradient_sum
      measurements[FIRST_GRADIENT_MEAN] = [
          tf.math.divide_no_nan(g, clients) for g in gradient_sum]
    measurements['train'] = metrics
    measurements[NUM_LOCAL_STEPS] = state[NUM_LOCAL_STEPS]
    if has_learning_rate:
      measurements[CLIENT_LEARNING_RATE] = tf.cast(
          state[OPTIMIZER_HPARAMS][LEARNING_RATE], tf.float32)
    measurements[SGD_STEPS] = sgd_steps
    measurements[FIRST_STEP_LOSS] = first_step_loss
    measurements['bytes_downloaded_per_client'] = np.int64(bytes_down)
    measurements['bytes_uploaded_per_client'] = np.int64(bytes_up)
    if client_flops is not None:
      measurements[CLIENT_FLOPS] = client_flops
    if full_gradient_sum is not None:
      measurements[FULL_GRADIENT_MEAN] = [
          tf.math.divide_no_nan(g, weight_sum) for g in full_gradient_sum]

    new_state = collections.OrderedDict(state)
    if statistics_sum is not None:
      optimizer_state = collections.OrderedDict(state[OPTIMIZER_STATE])
      for key, total in statistics_sum.items():
        optimizer_state[key] = tf.nest.map_structure(
            lambda t, old: tf.where(weight_sum > 0, t / weight_sum, old),
            total, optimizer_state[key])
      new_state[OPTIMIZER_STATE] = optimizer_state
    new_state[SCHEDULES] = collections.OrderedDict(
        (key, schedule.next(state[SCHEDULES][key], state[ROUND_NUM],
                            first_step_loss))
        for key, schedule in schedule_map.items())
    new_state[ROUND_NUM] = state[ROUND_NUM] + 1
    return with_scheduled_values(new_state), measurements

  @tff.tensorflow.computation
  def pair(gradient, counted):
    return gradient, counted

  def weight_of(result):
    return result.update_weight

  @tff.federated_computation(
      tff.FederatedType(state_type, tff.SERVER),
      tff.FederatedType(weights_type, tff.CLIENTS),
      tff.FederatedType(data_type, tff.CLIENTS),
  )
  def next_fn(state, weights, data):
    inputs_at_clients = tff.federated_broadcast(
        tff.federated_map(client_inputs, state))
    outputs = tff.federated_map(
        client_update_computation, (inputs_at_clients, weights, data)
    )
    client_result, client_metrics = outputs[0], outputs[1]
    extras = [outputs[i] for i in range(2, len(result_type))]
    server_inputs = collections.OrderedDict(
        state=state, metrics=aggregate_metrics(client_metrics))
    if report_first_gradient:
      server_inputs['first_gradient_sum'] = tff.federated_sum(
          tff.federated_map(pair, (extras.pop(0), extras.pop(0))))
    if average_optimizer_state or report_full_gradient:
      server_inputs['weight_sum'] = tff.federated_sum(tff.federated_map(
          tff.tensorflow.computation(weight_of), client_result))
    if average_optimizer_state:
      server_inputs['statistics_sum'] = tff.federated_sum(extras.pop(0))
    if report_full_gradient:
      server_inputs['full_gradient_sum'] = tff.federated_sum(extras.pop(0))

    @tff.tensorflow.computation
    def update(inputs):
      kwargs = collections.OrderedDict(
          (key, inputs[key]) for key in server_inputs)
      kwargs.setdefault('first_gradient_sum', None)
      return server_update(**kwargs)

    new_state, measurements = tff.federated_map(
        update, tff.federated_zip(server_inputs))
    return tff.templates.MeasuredProcessOutput(
        new_state, client_result, measurements
    )

  @tff.tensorflow.computation(state_type)
  def get_hparams_fn(state):
    return state

  @tff.tensorflow.computation(state_type, state_type)
  def set_hparams_fn(state, hparams):
    del state
    return hparams

  return tff.learning.templates.ClientWorkProcess(
      init_fn, next_fn, get_hparams_fn=get_hparams_fn,
      set_hparams_fn=set_hparams_fn,
  )
