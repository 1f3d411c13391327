"""Mixed FL: federated training plus a server-side centralised loss.

Seed 004 (Augenstein et al., *Mixed Federated Learning: Joint Decentralized
and Centralized Learning*): Algorithm 1 (Parallel Training, 2-way Gradient
Transfer), Algorithm 2 (1-way Gradient Transfer), App. A.2 (the federated
gradient inferred from what clients already upload), App. C.2 (defaults).

The objective is f = w_f f_f + w_c f_c: client gradients are of
`federated_weight` x the client loss, central gradients of `central_weight` x
the central loss.
"""

import collections
from collections.abc import Callable
from typing import Any, Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed import schedules
from tff_mixed.algorithms import fed_avg
from tff_mixed.templates import k_step_client_work

PARALLEL_TRAINING = 'parallel_training'
ONE_WAY_GRADIENT_TRANSFER = 'one_way_gradient_transfer'
TWO_WAY_GRADIENT_TRANSFER = 'two_way_gradient_transfer'
MIXINGS = (PARALLEL_TRAINING, ONE_WAY_GRADIENT_TRANSFER, TWO_WAY_GRADIENT_TRANSFER)

CentralLossFn = Callable[[tff.learning.models.VariableModel, Any], tf.Tensor]


def model_loss(model: tff.learning.models.VariableModel, batch) -> tf.Tensor:
  """The default central loss: the model's own loss on a central batch."""
  return model.forward_pass(batch, training=True).loss


def build_central_update(
    model_fn, central_loss_fn: CentralLossFn, *, loss_weight: float
):
  """`central_update(opt, hparams, x, batches, aug) -> (delta, loss, grad0)`.

  Takes one optimizer step per element of `batches` on
  `loss_weight * grad central_loss_fn(model, batch) + aug`; `delta` is
  `x_c - x` (the paper's Delta_c), `loss` the mean central loss over the
  steps and `grad0` the first step's `loss_weight * grad` at x. A plain
  `tf.function`.
  """
  model = model_fn()
  weights = tff.learning.models.ModelWeights.from_model(model)

  @tf.function
  def central_update(optimizer, hparams, initial_weights, batches, aug):
    tf.nest.map_structure(lambda v, t: v.assign(t), weights, initial_weights)
    trainable = tuple(tf.nest.flatten(weights.trainable))
    specs = tuple(tf.TensorSpec(v.shape, v.dtype) for v in trainable)
    state = optimizer.set_hparams(optimizer.initialize(specs), hparams)

    def step(loop_state, batch):
      loss_sum, steps, state, first = loop_state
      with tf.GradientTape() as tape:
        loss = central_loss_fn(model, batch)
      gradients = tuple(
          loss_weight * g for g in
          k_step_client_work.dense_gradients(tape, loss, trainable))
      is_first = tf.equal(steps, 0)  # Not ==: identity in TFF's graph mode.
      first = tuple(tf.where(is_first, g, f) for g, f in zip(gradients, first))
      gradients = tuple(
          g + a for g, a in zip(gradients, tf.nest.flatten(aug))
      )
      state, updated = optimizer.next(state, trainable, gradients)
      for variable, value in zip(trainable, updated):
        variable.assign(value)
      return loss_sum + tf.cast(loss, tf.float32), steps + 1, state, first

    loss_sum, steps, _, first = batches.reduce(
        (tf.constant(0.0), tf.constant(0, tf.int32), state,
         tuple(tf.zeros_like(v) for v in trainable)),
        step,
    )
    delta = tf.nest.map_structure(
        tf.subtract, weights.trainable, initial_weights.trainable
    )
    mean_loss = tf.math.divide_no_nan(loss_sum, tf.cast(steps, tf.float32))
    return delta, mean_loss, list(first)

  return central_update


def build_mixed_fl_process(
    model_fn,
    central_data_fn: Optional[Callable[[], tf.data.Dataset]],
    *,
    mixing: str,
    client_optimizer_fn: fed_avg.OptimizerFn,
    server_optimizer_fn: Optional[fed_avg.OptimizerFn] = None,
    central_optimizer_fn: Optional[fed_avg.OptimizerFn] = None,
    merge_optimizer_fn: Optional[fed_avg.OptimizerFn] = None,
    federated_weight: float = 0.5,
    central_weight: float = 0.5,
    num_local_steps: schedules.ScheduleOrValue,
    num_central_steps: Optional[int] = None,
    client_learning_rate: Optional[schedules.ScheduleOrValue] = None,
    central_loss_fn: Optional[CentralLossFn] = None,
    central_seed: int = 0,
    central_shuffle_buffer: int = 0,
    client_weighting: tff.learning.ClientWeighting = tff.learning.ClientWeighting.NUM_EXAMPLES,
    gradient_dissimilarity: bool = False,
) -> tff.learning.templates.LearningProcess:
  """Builds Parallel Training, 1-way or 2-way Gradient Transfer.

  Round t from x = x(t) (Delta_i = x_i - x is client i's change, p_i its
  examples, eta / eta_c the client / central learning rates):

  * parallel_training: x_c takes J CentralOpt steps on w_c grad f_c from x,
    Delta_c = x_c - x; clients take K steps on w_f grad f_i;
    x_f = ServerOpt(x, -mean_p(Delta_i)), Delta_f = x_f - x;
    x(t+1) = MergeOpt(x, -(Delta_c + Delta_f)).
  * two_way_gradient_transfer: as parallel_training, but every central step
    adds g_f and every client step adds g_c; afterwards
    g_c <- -Delta_c / (eta_c J) - g_f and
    g_f <- -sum_i Delta_i / (eta_t sum_i K_i) - g_c (old g_c; App. A.2: inferred
    from the uploaded deltas, no extra upload). Both start at 0 and live in
    the state.
  * one_way_gradient_transfer: g_c = w_c grad f_c(x; one central batch) is
    broadcast and added at every client step; x(t+1) = ServerOpt(x, -mean_p(Delta_i)).

  K (and J, when it follows K) and the client learning rate eta_t can follow
  `tff_mixed.schedules`; the central optimizer keeps its own learning rate.
  The central batches of a round are the next J of `central_data_fn()`
  (shuffled once with `central_seed` if `central_shuffle_buffer` > 0)
  repeated forever, counted in the state, so a run reproduces and a resumed
  run continues exactly. The central data is read inside the server's
  TensorFlow computation, which keeps `next(state, client_data@CLIENTS)` and so
  a `tff.learning.templates.LearningProcess` that TFF's program logic accepts;
  the cost is that skipping to a round's batches reads all earlier ones.

  Signatures:
    initialize: `( -> S@SERVER)`
    next: `(<S@SERVER, {B*}@CLIENTS> -> <state=S@SERVER, metrics=M@SERVER>)`

  Args:
    model_fn: No-arg callable returning a `tff.learning.models.VariableModel`.
    central_data_fn: No-arg callable returning a `tf.data.Dataset` of central
      batches, or None for a data-free `central_loss_fn` (called with
      `batch=None`).
    mixing: One of `MIXINGS`.
    client_optimizer_fn: Client optimizer (Gradient Transfer infers gradients
      from deltas exactly only for SGD).
    server_optimizer_fn: Default SGD, learning rate 1.
    central_optimizer_fn: Default SGD with lr = client lr x server lr (the
      first round's client lr when `client_learning_rate` is given).
    merge_optimizer_fn: Default SGD, learning rate 1.
    federated_weight: w_f >= 0.
    central_weight: w_c >= 0 (w_f + w_c > 0).
    num_local_steps: K: an int >= 1 or a `tff_mixed.schedules.Schedule`.
    num_central_steps: J, an int >= 1; default: each round's K.
    client_learning_rate: Optional number or schedule overriding the client
      optimizer's learning rate each round.
    central_loss_fn: `(model, batch) -> scalar`; default the model's loss.
    central_seed: Seed of the central data shuffle.
    central_shuffle_buffer: Shuffle buffer for the central data (0: none).
    client_weighting: As in `build_fed_avg`.
    gradient_dissimilarity: Measure seed 004 Eq. 7's G~_t^2 and B~_t^2 each
      round from the cohort's and the central data's gradients at x(t): each
      client's first-step gradient (no extra computation, but one more
      model-sized upload per client, counted in the bytes) and the central
      first-step gradient. Needs w_f > 0 and w_c > 0.

  Returns:
    A `tff.learning.templates.LearningProcess`.

  Raises:
    ValueError, TypeError: For a bad `mixing`, weights, step counts,
      optimizers, or central data the model cannot consume.
  """
  if mixing not in MIXINGS:
    raise ValueError(f'mixing must be one of {MIXINGS}, got {mixing!r}.')
  for name, value in (('federated_weight', federated_weight),
                      ('central_weight', central_weight)):
    if not isinstance(value, (int, float)) or value < 0:
      raise ValueError(f'{name} must be a number >= 0, got {value!r}.')
  if federated_weight + central_weight == 0:
    raise ValueError('federated_weight and central_weight are both 0.')
  if gradient_dissimilarity and min(federated_weight, central_weight) == 0:
    raise ValueError('gradient_dissimilarity needs federated_weight > 0 and '
                     'central_weight > 0.')
  num_local_steps = schedules.as_schedule(
      num_local_steps, 'num_local_steps', integer=True)
  if num_central_steps is not None:
    num_central_steps = k_step_client_work.check_num_steps(
        num_central_steps, name='num_central_steps')
  if central_loss_fn is None:
    if central_data_fn is None:
      raise ValueError('central_data_fn is None: pass a data-free central_loss_fn.')
    central_loss_fn = model_loss
  client_optimizer = fed_avg.resolve_optimizer(client_optimizer_fn, 'client_optimizer_fn')
  sgd = tff.learning.optimizers.build_sgdm
  server_optimizer = (
      sgd(learning_rate=1.0) if server_optimizer_fn is None
      else fed_avg.resolve_optimizer(server_optimizer_fn, 'server_optimizer_fn'))
  if central_optimizer_fn is None:
    if client_learning_rate is None:
      client_lr = k_step_client_work.learning_rate_of(
          client_optimizer, 'client_optimizer_fn')
    else:  # The first round's rate; the central rate does not follow it.
      client_lr = float(schedules.as_schedule(
          client_learning_rate, 'client_learning_rate').initialize()[
              schedules.VALUE])
    central_optimizer = sgd(
        learning_rate=client_lr * k_step_client_work.learning_rate_of(
            server_optimizer, 'server_optimizer_fn'))
  else:
    central_optimizer = fed_avg.resolve_optimizer(central_optimizer_fn, 'central_optimizer_fn')
  merge_optimizer = (
      sgd(learning_rate=1.0) if merge_optimizer_fn is None
      else fed_avg.resolve_optimizer(merge_optimizer_fn, 'merge_optimizer_fn'))
  two_way = mixing == TWO_WAY_GRADIENT_TRANSFER
  one_way = mixing == ONE_WAY_GRADIENT_TRANSFER
  if two_way:
    k_step_client_work.learning_rate_of(client_optimizer, 'client_optimizer_fn')
    central_lr = k_step_client_work.learning_rate_of(central_optimizer, 'central_optimizer_fn')

  initial_weights_fn = fed_avg.initial_model_weights_computation(model_fn)
  weights_type = initial_weights_fn.type_signature.result
  trainable_type = weights_type.trainable
  if central_data_fn is not None and central_loss_fn is model_loss:
    with tf.Graph().as_default():
      input_type = tff.types.tensorflow_to_type(model_fn().input_spec)
      element_spec = central_data_fn().element_spec
    if not input_type.is_assignable_from(tff.types.tensorflow_to_type(element_spec)):
      raise ValueError(
          f'central data element spec {element_spec} does not match the '
          f'model input spec {input_type}.'
      )

  client_work = k_step_client_work.build_k_step_client_work(
      model_fn, client_optimizer, num_local_steps=num_local_steps,
      learning_rate=client_learning_rate,
      client_weighting=client_weighting,
      augmenting_gradient=mixing != PARALLEL_TRAINING,
      loss_weight=float(federated_weight),
      report_first_gradient=gradient_dissimilarity,
  )
  distributor = tff.learning.templates.build_broadcast_process(weights_type)
  aggregator = fed_avg.build_model_aggregator(None, trainable_type)
  specs = tuple(tf.TensorSpec(t.shape, t.dtype) for t in trainable_type)
  zeros = [np.zeros(t.shape, t.dtype) for t in trainable_type]
  # 1-way GT: the central gradient at x is minus one SGD(lr 1) step's delta.
  central_step_optimizer = sgd(learning_rate=1.0) if one_way else central_optimizer

  def central_steps(client_work_state):
    """J for the round: 1 (1-way GT), the fixed J, or the round's K."""
    if one_way:
      return tf.constant(1, tf.int64)
    if num_central_steps is not None:
      return tf.constant(num_central_steps, tf.int64)
    return tf.cast(
        client_work_state[k_step_client_work.NUM_LOCAL_STEPS], tf.int64)

  def central_batches(start, steps):
    if central_data_fn is None:
      return tf.data.Dataset.range(steps).map(lambda _: 0)
    data = central_data_fn()
    if central_shuffle_buffer > 0:
      data = data.shuffle(
          central_shuffle_buffer, seed=central_seed,
          reshuffle_each_iteration=True)
    return data.repeat().skip(start).take(steps)

  loss_fn = central_loss_fn
  if central_data_fn is None:
    loss_fn = lambda model, unused_batch: central_loss_fn(model, None)

  @tff.tensorflow.computation
  def server_init():
    return collections.OrderedDict(
        server_optimizer=server_optimizer.initialize(specs),
        merge_optimizer=merge_optimizer.initialize(specs),
        central_optimizer_hparams=central_step_optimizer.get_hparams(
            central_step_optimizer.initialize(specs)),
        federated_gradient=zeros,
        central_batches_used=tf.constant(0, tf.int64),
    )

  @tff.federated_computation
  def init_fn():
    return tff.federated_zip(collections.OrderedDict(
        global_model_weights=tff.federated_eval(initial_weights_fn, tff.SERVER),
        distributor=distributor.initialize(),
        client_work=client_work.initialize(),
        aggregator=aggregator.initialize(),
        server=tff.federated_eval(server_init, tff.SERVER),
    ))

  state_type = init_fn.type_signature.result
  server_type = state_type.member.server
  client_work_type = state_type.member.client_work

  @tff.tensorflow.computation(server_type, weights_type, client_work_type)
  def central_computation(server, weights, client_work_state):
    update = build_central_update(
        model_fn, loss_fn, loss_weight=float(central_weight))
    aug = server['federated_gradient'] if two_way else zeros
    steps = central_steps(client_work_state)
    delta, loss, first_gradient = update(
        central_step_optimizer, server['central_optimizer_hparams'], weights,
        central_batches(server['central_batches_used'], steps), aug)
    return delta, loss, first_gradient, steps

  @tff.tensorflow.computation
  def with_augmenting_gradient(client_work_state, gradient):
    client_work_state = collections.OrderedDict(client_work_state)
    client_work_state[k_step_client_work.AUGMENTING_GRADIENT] = gradient
    return client_work_state

  @tff.tensorflow.computation
  def server_update(server, weights, mean_update, central_delta,
                    client_work_state, update_sum, work_measurements,
                    central_steps_taken):
    x = tuple(tf.nest.flatten(weights.trainable))
    server_state, x_f = server_optimizer.next(
        server['server_optimizer'], x, tuple(tf.nest.flatten(mean_update)))
    merge_state = server['merge_optimizer']
    new_server = collections.OrderedDict(server)
    new_client_work = collections.OrderedDict(client_work_state)
    if one_way:
      new_x = x_f
    else:
      change = [dc + (xf - xi) for dc, xf, xi in
                zip(tf.nest.flatten(central_delta), x_f, x)]
      merge_state, new_x = merge_optimizer.next(
          merge_state, x, tuple(-d for d in change))
    if two_way:
      g_f = tf.nest.flatten(server['federated_gradient'])
      g_c = tf.nest.flatten(
          client_work_state[k_step_client_work.AUGMENTING_GRADIENT])
      # The learning rate the clients used this round (it may follow a
      # schedule) times the steps they took.
      steps = work_measurements[k_step_client_work.CLIENT_LEARNING_RATE] * (
          tf.cast(work_measurements[k_step_client_work.SGD_STEPS], tf.float32))
      central = central_lr * tf.cast(central_steps_taken, tf.float32)
      new_client_work[k_step_client_work.AUGMENTING_GRADIENT] = [
          -dc / central - gf
          for dc, gf in zip(tf.nest.flatten(central_delta), g_f)]
      new_server['federated_gradient'] = [
          tf.math.divide_no_nan(u, steps) - gc
          for u, gc in zip(tf.nest.flatten(update_sum), g_c)]
    new_server['server_optimizer'] = server_state
    new_server['merge_optimizer'] = merge_state
    new_server['central_batches_used'] = (
        server['central_batches_used'] + central_steps_taken)
    new_weights = tff.learning.models.ModelWeights(
        trainable=list(new_x), non_trainable=weights.non_trainable)
    return new_server, new_weights, new_client_work

  @tff.tensorflow.computation
  def negate(delta):
    return tf.nest.map_structure(tf.negative, delta)

  @tff.tensorflow.computation
  def split_measurements(measurements, central_gradient):
    """Turns the gradient vectors into G~^2 and B~^2 (seed 004 Eq. 7)."""
    measurements = collections.OrderedDict(measurements)
    federated_gradient = measurements.pop(k_step_client_work.FIRST_GRADIENT_MEAN)
    squared_norm = lambda g: tf.add_n(
        [tf.reduce_sum(tf.square(t)) for t in tf.nest.flatten(g)])
    total = squared_norm([f + c for f, c in zip(
        tf.nest.flatten(federated_gradient), tf.nest.flatten(central_gradient))])
    weighted = (squared_norm(federated_gradient) / federated_weight
                + squared_norm(central_gradient) / central_weight)
    return measurements, collections.OrderedDict(
        G_squared=weighted - total,
        B_squared=tf.math.divide_no_nan(weighted, total),
    )

  data_type = client_work.next.type_signature.parameter[2]

  @tff.federated_computation(state_type, data_type)
  def next_fn(state, client_data):
    server = state.server
    weights = state.global_model_weights
    central_delta, central_loss, central_gradient, central_steps_taken = (
        tff.federated_map(
            central_computation, (server, weights, state.client_work)))
    client_work_state = state.client_work
    if one_way:
      # The broadcast gradient is w_c grad f_c(x) = -(one SGD(1) step).
      client_work_state = tff.federated_map(
          with_augmenting_gradient,
          (client_work_state, tff.federated_map(negate, central_delta)))
    distributed = distributor.next(state.distributor, weights)
    work = client_work.next(client_work_state, distributed.result, client_data)
    aggregated = aggregator.next(
        state.aggregator, work.result.update, work.result.update_weight)
    update_sum = (tff.federated_sum(work.result.update) if two_way
                  else aggregated.result)
    new_server, new_weights, new_client_work = tff.federated_map(
        server_update,
        (server, weights, aggregated.result, central_delta,
         work.state, update_sum, work.measurements, central_steps_taken))
    new_state = tff.federated_zip(collections.OrderedDict(
        global_model_weights=new_weights,
        distributor=distributed.state,
        client_work=new_client_work,
        aggregator=aggregated.state,
        server=new_server,
    ))
    metrics = collections.OrderedDict(
        distributor=distributed.measurements,
        client_work=work.measurements,
        aggregator=aggregated.measurements,
        central=tff.federated_zip(collections.OrderedDict(loss=central_loss)),
    )
    if gradient_dissimilarity:
      metrics['client_work'], metrics['gradient_dissimilarity'] = (
          tff.federated_map(
              split_measurements, (work.measurements, central_gradient)))
    metrics = tff.federated_zip(metrics)
    return tff.learning.templates.LearningProcessOutput(new_state, metrics)

  get_model_weights, set_model_weights = fed_avg.model_weights_accessors(
      state_type.member, weights_type)

  return tff.learning.templates.LearningProcess(
      init_fn, next_fn, get_model_weights, set_model_weights)
