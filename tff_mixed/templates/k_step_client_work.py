"""The one K-step client work every algorithm in tff_mixed is built from.

Each client takes exactly K optimizer steps, K chosen by the server each round,
on batches drawn in order from its dataset, cycling the dataset when it holds
fewer than K batches (seed 000, Algorithm 2). A client with no data takes no
step and reports weight 0; a client whose update is not finite reports a zero
update with weight 0, so a round never produces NaN.

Two layers, as in `tff.learning`: `build_k_step_update` is a plain
`tf.function` testable without TFF; `build_k_step_client_work` wraps it once
in a `tff.tensorflow.computation` and once in a `tff.federated_computation`.
"""

import collections
from collections.abc import Callable
from typing import Any, Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed.metrics import communication

ModelFn = Callable[[], tff.learning.models.VariableModel]
Optimizer = tff.learning.optimizers.Optimizer

# Keys of the client work's server state.
OPTIMIZER_HPARAMS = 'optimizer_hparams'
NUM_LOCAL_STEPS = 'num_local_steps'
AUGMENTING_GRADIENT = 'augmenting_gradient'
SGD_STEPS = 'sgd_steps'
FIRST_GRADIENT = 'first_gradient'
FIRST_GRADIENT_MEAN = 'first_gradient_mean'


def _all_finite(structure) -> tf.Tensor:
  return tf.reduce_all(
      [tf.reduce_all(tf.math.is_finite(t)) for t in tf.nest.flatten(structure)]
  )


def build_k_step_update(
    model_fn: ModelFn,
    *,
    client_weighting: tff.learning.ClientWeighting,
    loss_weight: float = 1.0,
) -> Callable[..., Any]:
  """Returns `client_update(optimizer, hparams, K, weights, data, aug=None)`.

  Each step applies `loss_weight * grad(loss) + aug` (`aug`, the augmenting
  gradient of Gradient Transfer, has the structure of the trainable weights).
  The returned `tf.function` returns `(ClientResult, unfinalized_metrics,
  sgd_steps, first_gradient)`; `first_gradient` is the first step's
  `loss_weight * grad(loss)` at the initial weights (zeros if no step). The update is `initial_trainable - final_trainable`, the weight
  the number of examples processed (or 1 for `UNIFORM`), 0 for a client that
  took no step or whose update is not finite.

  Args:
    model_fn: No-arg callable returning a `tff.learning.models.VariableModel`.
    client_weighting: A `tff.learning.ClientWeighting`.
    loss_weight: Scales the client loss (mixed FL's federated weight w_f).
  """
  if client_weighting not in (
      tff.learning.ClientWeighting.NUM_EXAMPLES,
      tff.learning.ClientWeighting.UNIFORM,
  ):
    raise ValueError(
        'client_weighting must be tff.learning.ClientWeighting.NUM_EXAMPLES '
        f'or UNIFORM, got {client_weighting!r}.'
    )
  model = model_fn()
  weights = tff.learning.models.ModelWeights.from_model(model)

  @tf.function
  def client_update(
      optimizer, hparams, num_local_steps, initial_weights, data,
      augmenting_gradient=None,
  ):
    tf.nest.map_structure(lambda v, t: v.assign(t), weights, initial_weights)
    trainable = tuple(tf.nest.flatten(weights.trainable))
    specs = tuple(tf.TensorSpec(v.shape, v.dtype) for v in trainable)
    optimizer_state = optimizer.set_hparams(optimizer.initialize(specs), hparams)

    def step(loop_state, batch):
      num_examples, sgd_steps, optimizer_state, first_gradient = loop_state
      with tf.GradientTape() as tape:
        output = model.forward_pass(batch, training=True)
      gradients = tape.gradient(output.loss, trainable)
      if loss_weight != 1.0:
        gradients = tuple(loss_weight * g for g in gradients)
      # tf.equal, not ==: in TFF's graph mode == on tensors is identity.
      is_first = tf.equal(sgd_steps, 0)
      first_gradient = tuple(
          tf.where(is_first, g, f) for g, f in zip(gradients, first_gradient)
      )
      if augmenting_gradient is not None:
        gradients = tuple(
            g + a
            for g, a in zip(gradients, tf.nest.flatten(augmenting_gradient))
        )
      optimizer_state, updated = optimizer.next(
          optimizer_state, trainable, gradients
      )
      for variable, value in zip(trainable, updated):
        variable.assign(value)
      if output.num_examples is None:
        batch_size = tf.shape(output.predictions, out_type=tf.int64)[0]
      else:
        batch_size = tf.cast(output.num_examples, tf.int64)
      return (num_examples + batch_size, sgd_steps + 1, optimizer_state,
              first_gradient)

    # repeat() of an empty dataset is empty, so an empty client ends at once.
    batches = data.repeat().take(tf.cast(num_local_steps, tf.int64))
    num_examples, sgd_steps, _, first_gradient = batches.reduce(
        (tf.constant(0, tf.int64), tf.constant(0, tf.int32), optimizer_state,
         tuple(tf.zeros_like(v) for v in trainable)),
        step,
    )
    update = tf.nest.map_structure(
        tf.subtract, initial_weights.trainable, weights.trainable
    )
    usable = tf.logical_and(_all_finite(update), sgd_steps > 0)
    update = tf.nest.map_structure(
        lambda u: tf.where(usable, u, tf.zeros_like(u)), update
    )
    if client_weighting == tff.learning.ClientWeighting.NUM_EXAMPLES:
      weight = tf.cast(num_examples, tf.float32)
    else:
      weight = tf.constant(1.0, tf.float32)
    weight = tf.where(usable, weight, 0.0)
    first_gradient = [
        tf.where(usable, g, tf.zeros_like(g)) for g in first_gradient]
    # The metrics of a client whose update is dropped are dropped too.
    if not usable:
      model.reset_metrics()
    return (
        tff.learning.templates.ClientResult(update=update, update_weight=weight),
        model.report_local_unfinalized_metrics(),
        sgd_steps,
        first_gradient,
    )

  return client_update


def check_num_steps(value, name: str = 'num_local_steps') -> int:
  """Returns `value` as an int, or raises naming `name` unless it is >= 1."""
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
    raise TypeError(f'{name} must be an int, got {type(value).__name__}.')
  if value < 1:
    raise ValueError(f'{name} must be >= 1, got {value}.')
  return int(value)


def build_k_step_client_work(
    model_fn: ModelFn,
    optimizer: Optimizer,
    *,
    num_local_steps: int,
    client_weighting: tff.learning.ClientWeighting = tff.learning.ClientWeighting.NUM_EXAMPLES,
    metrics_aggregator: Optional[Callable[..., tff.Computation]] = None,
    augmenting_gradient: bool = False,
    loss_weight: float = 1.0,
    report_first_gradient: bool = False,
) -> tff.learning.templates.ClientWorkProcess:
  """Builds the K-step `ClientWorkProcess`.

  State (at SERVER): `OrderedDict(optimizer_hparams=..., num_local_steps=K)`,
  plus `augmenting_gradient` (zeros shaped like the trainable weights) when
  `augmenting_gradient=True`. All of it is broadcast to the clients every
  round and can be changed between rounds with `set_hparams`; Gradient
  Transfer writes the round's augmenting gradient there.

  Signatures:
    initialize: `( -> S@SERVER)`
    next: `(<S@SERVER, W@CLIENTS, {B*}@CLIENTS> ->
           <state=S@SERVER, result=ClientResult@CLIENTS, measurements=M@SERVER>)`

  Measurements: `train` (the model's metrics summed then finalized),
  `num_local_steps` (this round's K), `sgd_steps` (steps taken, summed over the
  cohort), `bytes_downloaded_per_client` and `bytes_uploaded_per_client` (from
  the types of the broadcast weights and state and of the uploaded values).

  Args:
    model_fn: No-arg callable returning a `tff.learning.models.VariableModel`.
    optimizer: The client `tff.learning.optimizers.Optimizer`.
    num_local_steps: K, an int >= 1.
    client_weighting: `NUM_EXAMPLES` (examples processed) or `UNIFORM`.
    metrics_aggregator: As in `tff.learning`; default `sum_then_finalize`.
    augmenting_gradient: Add the state's augmenting gradient to every step.
    loss_weight: Scales the client loss gradient (mixed FL's w_f).
    report_first_gradient: Also measure `first_gradient_mean`, the unweighted
      cohort mean of each client's first-step gradient at the round's model
      (seed 004 Eq. 7). No extra computation; one model-sized upload more per
      client, which `bytes_uploaded_per_client` includes.

  Raises:
    TypeError, ValueError: For a bad `optimizer`, `num_local_steps` or
      `client_weighting`.
  """
  if not isinstance(optimizer, Optimizer):
    raise TypeError(
        'optimizer must be a tff.learning.optimizers.Optimizer, got '
        f'{type(optimizer).__name__}.'
    )
  num_local_steps = check_num_steps(num_local_steps)
  if metrics_aggregator is None:
    metrics_aggregator = tff.learning.metrics.sum_then_finalize

  with tf.Graph().as_default():
    model = model_fn()
    finalizers = collections.OrderedDict(model.metric_finalizers())
    if SGD_STEPS in finalizers:
      raise ValueError(f'The model has a metric named {SGD_STEPS!r}; rename it.')
    # The step count rides in the metrics' one federated sum: in TFF's C++
    # runtime every separate federated_sum costs a pass over the cohort.
    finalizers[SGD_STEPS] = tf.function(lambda steps: steps[0])

    weights_type = tff.learning.models.weights_type_from_model(model)
    data_type = tff.SequenceType(tff.types.tensorflow_to_type(model.input_spec))
  hparams = optimizer.get_hparams(
      optimizer.initialize(tf.TensorSpec((), tf.float32))
  )
  initial_state = collections.OrderedDict([
      (OPTIMIZER_HPARAMS, hparams),
      (NUM_LOCAL_STEPS, np.int32(num_local_steps)),
  ])
  if augmenting_gradient:
    initial_state[AUGMENTING_GRADIENT] = [
        np.zeros(t.shape, t.dtype) for t in weights_type.trainable
    ]

  @tff.federated_computation
  def init_fn():
    return tff.federated_value(initial_state, tff.SERVER)

  state_type = init_fn.type_signature.result.member

  @tff.tensorflow.computation(state_type, weights_type, data_type)
  def client_update_computation(state, weights, data):
    client_update = build_k_step_update(
        model_fn, client_weighting=client_weighting, loss_weight=loss_weight
    )
    result, metrics, sgd_steps, first_gradient = client_update(
        optimizer, state[OPTIMIZER_HPARAMS], state[NUM_LOCAL_STEPS], weights,
        data, state[AUGMENTING_GRADIENT] if augmenting_gradient else None,
    )
    metrics = collections.OrderedDict(metrics)
    metrics[SGD_STEPS] = [sgd_steps]
    if report_first_gradient:
      counted = tf.cast(result.update_weight > 0, tf.float32)
      return result, metrics, first_gradient, counted
    return result, metrics

  result_type = client_update_computation.type_signature.result
  aggregate_metrics = metrics_aggregator(finalizers, result_type[1])
  bytes_down = communication.type_size_bytes(
      weights_type
  ) + communication.type_size_bytes(state_type)
  bytes_up = communication.type_size_bytes(result_type)

  def round_measurements(state, metrics, first_gradient_sum):
    metrics = collections.OrderedDict(metrics)
    sgd_steps = metrics.pop(SGD_STEPS)
    extra = collections.OrderedDict()
    if first_gradient_sum is not None:
      gradient_sum, clients = first_gradient_sum
      extra[FIRST_GRADIENT_MEAN] = [
          tf.math.divide_no_nan(g, clients) for g in gradient_sum]
    return collections.OrderedDict(
        **extra,
        train=metrics,
        num_local_steps=state[NUM_LOCAL_STEPS],
        sgd_steps=sgd_steps,
        bytes_downloaded_per_client=np.int64(bytes_down),
        bytes_uploaded_per_client=np.int64(bytes_up),
    )

  @tff.tensorflow.computation
  def pair(gradient, counted):
    return gradient, counted

  @tff.federated_computation(
      tff.FederatedType(state_type, tff.SERVER),
      tff.FederatedType(weights_type, tff.CLIENTS),
      tff.FederatedType(data_type, tff.CLIENTS),
  )
  def next_fn(state, weights, data):
    state_at_clients = tff.federated_broadcast(state)
    outputs = tff.federated_map(
        client_update_computation, (state_at_clients, weights, data)
    )
    client_result, client_metrics = outputs[0], outputs[1]
    if report_first_gradient:
      gradient_sum = tff.federated_sum(
          tff.federated_map(pair, (outputs[2], outputs[3])))
      measurements = tff.federated_map(
          tff.tensorflow.computation(round_measurements),
          (state, aggregate_metrics(client_metrics), gradient_sum))
    else:
      measurements = tff.federated_map(
          tff.tensorflow.computation(
              lambda state, metrics: round_measurements(state, metrics, None)),
          (state, aggregate_metrics(client_metrics)))
    return tff.templates.MeasuredProcessOutput(
        state, client_result, measurements
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
