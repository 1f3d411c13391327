"""The mixed-FL server step, shared by the dense and the selected-rows processes.

Seed 004 (Augenstein et al., *Mixed Federated Learning*), Algorithms 1-2 and
App. A.2. Plain TensorFlow functions, called inside the processes'
`tff.tensorflow.computation`s:

* `build_central_update`: the server's J steps on the central loss;
* `merge`: x_f = ServerOpt(x, mean client update), then (PT, 2-way GT)
  x(t+1) = MergeOpt(x, -(Delta_c + x_f - x)) or (1-way GT) x(t+1) = x_f;
* `transfer_gradients`: 2-way GT's g_c and g_f for the next round, inferred
  from the round's central change and summed client updates (App. A.2);
* `resolve_optimizers`, `initial_server_state` and `server_update`: the
  arguments' checks and defaults, the server's part of the state and the
  whole step after aggregation, which both processes call.
"""

import collections

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed import checks
from tff_mixed import keys
from tff_mixed import schedules
from tff_mixed.templates import client_extensions
from tff_mixed.templates import common
from tff_mixed.templates import step_loop

PARALLEL_TRAINING = 'parallel_training'
ONE_WAY_GRADIENT_TRANSFER = 'one_way_gradient_transfer'
TWO_WAY_GRADIENT_TRANSFER = 'two_way_gradient_transfer'
MIXINGS = (PARALLEL_TRAINING, ONE_WAY_GRADIENT_TRANSFER, TWO_WAY_GRADIENT_TRANSFER)

# Why 2-way GT refuses other client optimizers (`check_two_way_client_optimizer`).
TWO_WAY_NEEDS_SGD = (
    "2-way Gradient Transfer infers the federated gradient from the clients' "
    'updates as if every client step were an SGD step of the client learning '
    'rate (seed 004 Alg. 1, App. A.2)')

CentralLossFn = Callable[[tff.learning.models.VariableModel, Any], tf.Tensor]


def model_loss(model: tff.learning.models.VariableModel, batch) -> tf.Tensor:
  """The default central loss: the model's own loss on a central batch."""
  return model.forward_pass(batch, training=True).loss


def build_central_update(
    model_fn, central_loss_fn: CentralLossFn, *, loss_weight: float
):
  """`central_update(opt, hparams, x, batches, aug) -> (delta, loss, grad0)`.

  The step loop (`step_loop.take_steps`) from the model weights x, one
  optimizer step per element of `batches` on
  `loss_weight * grad central_loss_fn(model, batch) + aug`; `delta` is
  `x_c - x` (the paper's Delta_c), `loss` the mean central loss over the
  steps and `grad0` the first step's `loss_weight * grad` at x, a list. A
  plain `tf.function`.
  """
  model = model_fn()
  weights = tff.learning.models.ModelWeights.from_model(model)
  loss_fn = lambda m, batch: (central_loss_fn(m, batch),
                              tf.constant(1, tf.int64))

  @tf.function(autograph=False)
  def central_update(optimizer, hparams, initial_weights, batches, aug):
    tf.nest.map_structure(lambda v, t: v.assign(t), weights, initial_weights)
    trainable = tuple(tf.nest.flatten(weights.trainable))
    specs = tuple(tf.TensorSpec(v.shape, v.dtype) for v in trainable)
    state = optimizer.set_hparams(optimizer.initialize(specs), hparams)
    steps = step_loop.take_steps(
        model, trainable, optimizer, state, batches, loss_fn=loss_fn,
        loss_weight=loss_weight, augmenting_gradient=aug, first_gradient=True)
    delta = tf.nest.map_structure(
        tf.subtract, weights.trainable, initial_weights.trainable)
    mean_loss = tf.math.divide_no_nan(
        steps.loss_sum, tf.cast(steps.num_steps, tf.float32))
    return delta, mean_loss, list(steps.first_gradient)

  return central_update


def merge(mixing, server_optimizer, server_state, merge_optimizer, merge_state,
          x, mean_update, central_delta):
  """Returns `(server_state, merge_state, x(t+1))` (lists of tensors).

  `x`, `mean_update` (the clients' mean of x - x_i) and `central_delta`
  (x_c - x) are flat lists of the trainable tensors.
  """
  server_state, x_f = server_optimizer.next(
      server_state, tuple(x), tuple(mean_update))
  if mixing == ONE_WAY_GRADIENT_TRANSFER:
    return server_state, merge_state, list(x_f)
  change = [dc + (xf - xi) for dc, xf, xi in zip(central_delta, x_f, x)]
  merge_state, new_x = merge_optimizer.next(
      merge_state, tuple(x), tuple(-d for d in change))
  return server_state, merge_state, list(new_x)


def transfer_gradients(*, central_delta, central_step_size, update_sum,
                       client_learning_rate, client_steps, augmented_steps,
                       federated_gradient, central_gradient):
  """2-way GT's next `(g_c, g_f)` from what the round produced (App. A.2).

  The central model took J steps of eta_c (w_c grad f_c + g_f), so
      g_c <- -Delta_c / (eta_c J) - g_f.
  Client i took K_i steps of eta (w_f grad f_i + g_c), adding g_c only to the
  parameters it holds (all of them, except for the selected-rows process's
  table rows), so for a parameter p held by clients whose steps add up to
  S_p of the round's sum_i K_i,
      g_f[p] <- (sum_i (x - x_i)[p] - eta S_p g_c[p]) / (eta sum_i K_i),
  the mean over all client steps of w_f grad f_i[p]: with every parameter
  held (S_p = sum_i K_i) that is sum_i Delta_i / (eta sum_i K_i) - g_c, and
  a parameter nobody held gets 0. A round in which no client stepped gives
  g_f = 0.

  Args:
    central_delta: x_c - x, a flat list of tensors.
    central_step_size: eta_c J (a scalar).
    update_sum: sum_i (x - x_i) over the cohort, unweighted.
    client_learning_rate: eta, the rate the clients used this round.
    client_steps: sum_i K_i (float scalar).
    augmented_steps: S_p per tensor of `update_sum`: each broadcastable
      against its tensor (a scalar, or [rows, 1] for table rows).
    federated_gradient: The g_f the central steps added.
    central_gradient: The g_c the client steps added.

  Returns:
    `(g_c, g_f)`, flat lists of tensors.
  """
  new_central = [-dc / central_step_size - gf
                 for dc, gf in zip(central_delta, federated_gradient)]
  new_federated = [
      tf.math.divide_no_nan(u, client_learning_rate * client_steps)
      - tf.math.divide_no_nan(s, client_steps) * gc
      for u, s, gc in zip(update_sum, augmented_steps, central_gradient)]
  return new_central, new_federated


class Optimizers(NamedTuple):
  """The optimizers of a mixed-FL process (see `resolve_optimizers`)."""
  client: common.Optimizer
  server: common.Optimizer
  central: common.Optimizer
  merge: common.Optimizer
  central_step: common.Optimizer  # What the central update steps with.


def check_arguments(mixing: str, federated_weight, central_weight) -> None:
  """Raises naming the argument unless `mixing` and w_f, w_c are valid."""
  if mixing not in MIXINGS:
    raise ValueError(f'mixing must be one of {MIXINGS}, got {mixing!r}.')
  for name, value in (('federated_weight', federated_weight),
                      ('central_weight', central_weight)):
    checks.check_number(value, name, allow_zero=True)
  if federated_weight + central_weight == 0:
    raise ValueError('federated_weight and central_weight are both 0.')


def check_two_way_client_optimizer(client: common.Optimizer) -> None:
  """Raises naming `client_optimizer_fn` unless it is plain SGD.

  2-way GT infers g_f from the clients' summed updates as
  sum_i Delta_i / (eta sum_i K_i) - g_c (`transfer_gradients`), which holds
  only if every client step moved the model by -eta times its gradient:
  momentum or an adaptive optimizer would make g_f a different quantity.
  """
  common.check_plain_sgd(client, 'client_optimizer_fn', TWO_WAY_NEEDS_SGD)


def resolve_optimizers(mixing, *, client_optimizer_fn, server_optimizer_fn,
                       central_optimizer_fn, merge_optimizer_fn,
                       client_learning_rate) -> Optimizers:
  """The optimizers with seed 004 App. C.2's defaults.

  Server and merge: SGD at 1; central: SGD at client x server learning
  rate (the first round's client rate when `client_learning_rate` is given;
  the central rate does not follow it). 1-way GT's central update is one
  SGD(1) step, whose delta is minus the central gradient, so it refuses a
  `central_optimizer_fn` rather than ignore it. 2-way GT needs plain SGD on
  the clients (`check_two_way_client_optimizer`) and a learning rate on the
  central optimizer.
  """
  if mixing == ONE_WAY_GRADIENT_TRANSFER and central_optimizer_fn is not None:
    raise ValueError(
        'one_way_gradient_transfer takes no central_optimizer_fn: its central '
        'side only computes g_c = w_c grad f_c, which every client step adds '
        '(seed 004 Alg. 1); it takes no central step.')
  client = common.resolve_optimizer(client_optimizer_fn, 'client_optimizer_fn')
  server = common.resolve_optional_optimizer(
      server_optimizer_fn, 'server_optimizer_fn', default_learning_rate=1.0)
  merge = common.resolve_optional_optimizer(
      merge_optimizer_fn, 'merge_optimizer_fn', default_learning_rate=1.0)
  if central_optimizer_fn is None:
    if client_learning_rate is None:
      client_lr = common.learning_rate_of(client, 'client_optimizer_fn')
    else:
      client_lr = float(schedules.as_schedule(
          client_learning_rate, 'client_learning_rate').initialize()[
              schedules.VALUE])
    central = tff.learning.optimizers.build_sgdm(
        learning_rate=client_lr * common.learning_rate_of(
            server, 'server_optimizer_fn'))
  else:
    central = common.resolve_optimizer(
        central_optimizer_fn, 'central_optimizer_fn')
  if mixing == TWO_WAY_GRADIENT_TRANSFER:
    check_two_way_client_optimizer(client)
    # 2-way GT scales the central gradient by eta_c (read from the state
    # each round): the central optimizer must have one.
    common.learning_rate_of(central, 'central_optimizer_fn')
  central_step = (tff.learning.optimizers.build_sgdm(learning_rate=1.0)
                  if mixing == ONE_WAY_GRADIENT_TRANSFER else central)
  return Optimizers(client, server, central, merge, central_step)


def initial_server_state(optimizers: Optimizers, specs):
  """The server's part of the state (inside a TensorFlow computation)."""
  return collections.OrderedDict(
      ((keys.SERVER_OPTIMIZER, optimizers.server.initialize(specs)),
       (keys.MERGE_OPTIMIZER, optimizers.merge.initialize(specs)),
       (keys.CENTRAL_OPTIMIZER_HPARAMS, optimizers.central_step.get_hparams(
           optimizers.central_step.initialize(specs))),
       (keys.FEDERATED_GRADIENT, [np.zeros(s.shape, s.dtype.as_numpy_dtype)
                                  for s in specs]),
       (keys.CENTRAL_BATCHES_USED, tf.constant(0, tf.int64))))


def server_hparams(optimizers: Optimizers):
  """`(get, set)` of the server step's hyper-parameters (`ServerStep.hparams`):
  the server, merge and central optimizers' (their learning rates: eta,
  eta_m and eta_c), readable and settable between rounds like the client's."""

  def get(server):
    return collections.OrderedDict((
        (keys.SERVER_OPTIMIZER,
         optimizers.server.get_hparams(server[keys.SERVER_OPTIMIZER])),
        (keys.MERGE_OPTIMIZER,
         optimizers.merge.get_hparams(server[keys.MERGE_OPTIMIZER])),
        (keys.CENTRAL_OPTIMIZER_HPARAMS,
         server[keys.CENTRAL_OPTIMIZER_HPARAMS])))

  def set_(server, hparams):
    server = collections.OrderedDict(server)
    server[keys.SERVER_OPTIMIZER] = optimizers.server.set_hparams(
        server[keys.SERVER_OPTIMIZER], hparams[keys.SERVER_OPTIMIZER])
    server[keys.MERGE_OPTIMIZER] = optimizers.merge.set_hparams(
        server[keys.MERGE_OPTIMIZER], hparams[keys.MERGE_OPTIMIZER])
    server[keys.CENTRAL_OPTIMIZER_HPARAMS] = hparams[
        keys.CENTRAL_OPTIMIZER_HPARAMS]
    return server

  return get, set_


def server_update(mixing, optimizers: Optimizers, *, server, x, mean_update,
                  central_delta, central_steps, update_sum=None,
                  client_learning_rate=None, client_steps=None,
                  augmented_steps=None, central_gradient=None):
  """The step after aggregation: `(server, x(t+1), g_c or None)`.

  `merge`, then for 2-way GT `transfer_gradients` (its arguments as there;
  `central_steps` is J); the server state advances its optimizers, g_f and
  the central batches read. Lists of tensors throughout.
  """
  server_state, merge_state, new_x = merge(
      mixing, optimizers.server, server[keys.SERVER_OPTIMIZER],
      optimizers.merge, server[keys.MERGE_OPTIMIZER], x, mean_update,
      central_delta)
  new_server = collections.OrderedDict(server)
  new_server[keys.SERVER_OPTIMIZER] = server_state
  new_server[keys.MERGE_OPTIMIZER] = merge_state
  new_server[keys.CENTRAL_BATCHES_USED] = (
      server[keys.CENTRAL_BATCHES_USED] + tf.cast(central_steps, tf.int64))
  new_central_gradient = None
  if mixing == TWO_WAY_GRADIENT_TRANSFER:
    new_central_gradient, new_server[keys.FEDERATED_GRADIENT] = (
        transfer_gradients(
            central_delta=central_delta,
            # eta_c as the round's state holds it (`server_hparams` may
            # have set it since the build).
            central_step_size=tf.cast(
                server[keys.CENTRAL_OPTIMIZER_HPARAMS][keys.LEARNING_RATE],
                tf.float32) * tf.cast(central_steps, tf.float32),
            update_sum=update_sum, client_learning_rate=client_learning_rate,
            client_steps=client_steps, augmented_steps=augmented_steps,
            federated_gradient=tf.nest.flatten(
                server[keys.FEDERATED_GRADIENT]),
            central_gradient=central_gradient))
  return new_server, new_x, new_central_gradient


def build_central_computation(
    model_fn, mixing: str, optimizers: Optimizers, *, central_loss_fn,
    central_data_fn, central_weight: float, num_central_steps, central_seed,
    central_shuffle_buffer, server_type, weights_type, client_work_type
) -> tff.Computation:
  """`(server, x, client work state) -> (Delta_c, loss, grad0, J)`.

  The round's central update: J steps (1 for 1-way GT, `num_central_steps`,
  or the round's K from the client work's state) on the next J batches of
  `central_data_fn()` (shuffled once with `central_seed` if
  `central_shuffle_buffer` > 0, repeated forever, counted in the server
  state, so a run reproduces and resumes exactly), or J data-free steps of
  `central_loss_fn(model, None)` when `central_data_fn` is None. 2-way GT
  adds g_f to every step.
  """
  two_way = mixing == TWO_WAY_GRADIENT_TRANSFER
  zeros = [np.zeros(t.shape, t.dtype) for t in weights_type.trainable]
  loss_fn = central_loss_fn
  if central_data_fn is None:
    loss_fn = lambda model, unused_batch: central_loss_fn(model, None)

  def central_steps(client_work_state):
    if mixing == ONE_WAY_GRADIENT_TRANSFER:
      return tf.constant(1, tf.int64)
    if num_central_steps is not None:
      return tf.constant(num_central_steps, tf.int64)
    return tf.cast(
        client_work_state[keys.NUM_LOCAL_STEPS], tf.int64)

  def central_batches(start, steps):
    if central_data_fn is None:
      return tf.data.Dataset.range(steps).map(lambda _: 0)
    data = central_data_fn()
    if central_shuffle_buffer > 0:
      data = data.shuffle(
          central_shuffle_buffer, seed=central_seed,
          reshuffle_each_iteration=True)
    return data.repeat().skip(start).take(steps)

  @tff.tensorflow.computation(server_type, weights_type, client_work_type)
  def central_computation(server, weights, client_work_state):
    update = build_central_update(
        model_fn, loss_fn, loss_weight=float(central_weight))
    aug = server[keys.FEDERATED_GRADIENT] if two_way else zeros
    steps = central_steps(client_work_state)
    delta, loss, first_gradient = update(
        optimizers.central_step, server[keys.CENTRAL_OPTIMIZER_HPARAMS],
        weights, central_batches(server[keys.CENTRAL_BATCHES_USED], steps),
        aug)
    return delta, loss, first_gradient, steps

  return central_computation


@tff.tensorflow.computation
def _with_negated_gradient(client_work_state, central_delta):
  client_work_state = collections.OrderedDict(client_work_state)
  client_work_state[client_extensions.AUGMENTING_GRADIENT] = [
      -d for d in central_delta]
  return client_work_state


def prepare(mixing, central_computation, server, weights, client_work_state):
  """Before the clients train (federated values at the server).

  Returns `(client work state, central)`: `central` is the round's
  `central_computation` output; for 1-way GT the client work's augmenting
  gradient becomes the broadcast central gradient w_c grad f_c(x), minus
  one SGD(1) step's delta.
  """
  central = tff.federated_map(
      central_computation, (server, weights, client_work_state))
  if mixing == ONE_WAY_GRADIENT_TRANSFER:
    client_work_state = tff.federated_map(
        _with_negated_gradient, (client_work_state, central[0]))
  return client_work_state, central
