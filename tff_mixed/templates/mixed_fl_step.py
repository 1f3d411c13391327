"""The mixed-FL server step, shared by the dense and the selected-rows processes.

Seed 004 (Augenstein et al., *Mixed Federated Learning*), Algorithms 1-2 and
App. A.2. Plain TensorFlow functions, called inside the processes'
`tff.tensorflow.computation`s:

* `build_central_update`: the server's J steps on the central loss;
* `merge`: x_f = ServerOpt(x, mean client update), then (PT, 2-way GT)
  x(t+1) = MergeOpt(x, -(Delta_c + x_f - x)) or (1-way GT) x(t+1) = x_f;
* `transfer_gradients`: 2-way GT's g_c and g_f for the next round, inferred
  from the round's central change and summed client updates (App. A.2).
"""

from collections.abc import Callable
from typing import Any

import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed.templates import step_loop

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

  @tf.function
  def central_update(optimizer, hparams, initial_weights, batches, aug):
    tf.nest.map_structure(lambda v, t: v.assign(t), weights, initial_weights)
    trainable = tuple(tf.nest.flatten(weights.trainable))
    specs = tuple(tf.TensorSpec(v.shape, v.dtype) for v in trainable)
    state = optimizer.set_hparams(optimizer.initialize(specs), hparams)
    steps = step_loop.take_steps(
        model, trainable, optimizer, state, batches, loss_fn=loss_fn,
        loss_weight=loss_weight, augmenting_gradient=aug)
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
