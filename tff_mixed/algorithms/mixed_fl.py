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
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed import checks
from tff_mixed import keys
from tff_mixed import schedules
from tff_mixed.algorithms import k_step
from tff_mixed.templates import client_extensions
from tff_mixed.templates import client_groups as client_groups_lib
from tff_mixed.templates import common
from tff_mixed.templates import composers
from tff_mixed.templates import mixed_fl_step

PARALLEL_TRAINING = mixed_fl_step.PARALLEL_TRAINING
ONE_WAY_GRADIENT_TRANSFER = mixed_fl_step.ONE_WAY_GRADIENT_TRANSFER
TWO_WAY_GRADIENT_TRANSFER = mixed_fl_step.TWO_WAY_GRADIENT_TRANSFER
MIXINGS = mixed_fl_step.MIXINGS


@common.names_autograph
def build_mixed_fl(
    model_fn: common.ModelFn,
    client_optimizer_fn: common.OptimizerFn,
    server_optimizer_fn: Optional[common.OptimizerFn] = None,
    *,
    central_data_fn: Optional[Callable[[], tf.data.Dataset]],
    mixing: str,
    num_local_steps: schedules.ScheduleOrSteps,
    central_optimizer_fn: Optional[common.OptimizerFn] = None,
    merge_optimizer_fn: Optional[common.OptimizerFn] = None,
    federated_weight: float = 0.5,
    central_weight: float = 0.5,
    num_central_steps: Optional[int] = None,
    client_learning_rate: Optional[schedules.ScheduleOrValue] = None,
    central_loss_fn: Optional[mixed_fl_step.CentralLossFn] = None,
    central_seed: int = 0,
    central_shuffle_buffer: int = 0,
    client_weighting: Optional[tff.learning.ClientWeighting] = None,
    gradient_dissimilarity: bool = False,
    model_aggregator: Optional[common.Aggregator] = None,
    metrics_aggregator: Optional[Callable[..., tff.Computation]] = None,
    client_groups: Optional[client_groups_lib.ClientGroups] = None,
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
    the state. Alg. 1 writes g_c <- -Delta_c / (eta J) - g_f with the client
    rate eta; we divide by the central rate eta_c, which makes g_c exactly
    the mean central gradient of the J steps (each step moved by
    eta_c (g_c + g_f)). The two agree at App. C.2's default eta_c = eta
    eta_s with eta_s = 1; with eta_c != eta, Alg. 1's g_c is that mean scaled
    by eta_c / eta plus (eta_c / eta - 1) g_f.
  * one_way_gradient_transfer: g_c = w_c grad f_c(x; one central batch) is
    broadcast and added at every client step; x(t+1) = ServerOpt(x, -mean_p(Delta_i)).

  At K = J = 1 (App. A.3) Parallel Training and 1-way GT take the same step;
  2-way GT does not: each side adds the other side's gradient inferred at
  x_{t-1}, so the merged step is by g(x_t) + g(x_{t-1}) (g = g_f + g_c), not
  by g(x_t). App. A.3's debugging equivalence holds for PT == 1-way GT only.

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
    client_optimizer_fn: Client optimizer; plain SGD (`build_sgdm` without
      momentum) for 2-way GT, whose inferred federated gradient (App. A.2)
      assumes SGD steps (anything else is refused).
    server_optimizer_fn: Default SGD, learning rate 1.
    central_data_fn: No-arg callable returning a `tf.data.Dataset` of central
      batches, or None for a data-free `central_loss_fn` (called with
      `batch=None`). TFF traces it into its own graph, so it must build the
      dataset when called (`lambda: ds` of a dataset built outside is
      refused).
    mixing: One of `MIXINGS`.
    num_local_steps: K: an int >= 1 or a `tff_mixed.schedules.Schedule`.
    central_optimizer_fn: Default SGD with lr = client lr x server lr (the
      first round's client lr when `client_learning_rate` is given). Not for
      1-way GT, which takes no central step (refused).
    merge_optimizer_fn: Default SGD, learning rate 1.
    federated_weight: w_f >= 0.
    central_weight: w_c >= 0 (w_f + w_c > 0).
    num_central_steps: J, an int >= 1; default: each round's K.
    client_learning_rate: Optional number or schedule overriding the client
      optimizer's learning rate each round.
    central_loss_fn: `(model, batch) -> scalar`; default the model's loss.
    central_seed: Seed of the central data shuffle.
    central_shuffle_buffer: Shuffle buffer for the central data (0: none).
    client_weighting: As in `build_fed_avg` (None: `NUM_EXAMPLES`, or
      `UNIFORM` with `tff_mixed.aggregators.gaussian_fixed`).
    gradient_dissimilarity: Measure seed 004 Eq. 7's G~_t^2 and B~_t^2 each
      round from the cohort's and the central data's gradients at x(t): each
      client's first-step gradient (no extra computation, but one more
      model-sized upload per client, counted in the bytes) and the central
      first-step gradient. Needs w_f > 0 and w_c > 0.
    model_aggregator: Optional `tff.aggregators` factory for the clients'
      mean update (e.g. `tff.learning.dp_aggregator` for DP Parallel
      Training or 1-way GT). Not with 2-way GT, whose App. A.2 inference
      sums the raw client updates outside it.
    metrics_aggregator: Optional, as in `tff.learning`.
    client_groups: Fast mode, as in `tff_mixed.algorithms.build_fed_avg`
      (`next` takes client groups); the same model (App. A.2's sums and the
      dissimilarity's means are sums over clients too).

  Returns:
    A `tff.learning.templates.LearningProcess`.

  Raises:
    ValueError, TypeError: For a bad `mixing`, weights, step counts,
      optimizers, a `central_data_fn` that is not a function building a
      dataset, or central data the model cannot consume.
  """
  mixed_fl_step.check_arguments(mixing, federated_weight, central_weight)
  if isinstance(central_shuffle_buffer, bool) or not isinstance(
      central_shuffle_buffer, (int, np.integer)) or central_shuffle_buffer < 0:
    raise ValueError('central_shuffle_buffer must be an int >= 0 (0: no '
                     f'shuffle), got {central_shuffle_buffer!r}.')
  if (model_aggregator is not None
      and mixing == mixed_fl_step.TWO_WAY_GRADIENT_TRANSFER):
    raise ValueError(
        'model_aggregator cannot be used with two_way_gradient_transfer: its '
        'inferred federated gradient (App. A.2) sums the raw client updates '
        'outside the aggregator.')
  if gradient_dissimilarity and min(federated_weight, central_weight) == 0:
    raise ValueError('gradient_dissimilarity needs federated_weight > 0 and '
                     'central_weight > 0.')
  num_local_steps = schedules.as_schedule(
      num_local_steps, 'num_local_steps', integer=True)
  if num_central_steps is not None:
    num_central_steps = checks.check_num_steps(
        num_central_steps, name='num_central_steps')
  if central_loss_fn is None:
    if central_data_fn is None:
      raise ValueError('central_data_fn is None: pass a data-free central_loss_fn.')
    central_loss_fn = mixed_fl_step.model_loss
  central_spec = None
  if central_data_fn is not None:  # Before any tracing, as TFF will call it.
    central_spec = checks.dataset_fn_element_spec(
        central_data_fn, 'central_data_fn')
  optimizers = mixed_fl_step.resolve_optimizers(
      mixing, client_optimizer_fn=client_optimizer_fn,
      server_optimizer_fn=server_optimizer_fn,
      central_optimizer_fn=central_optimizer_fn,
      merge_optimizer_fn=merge_optimizer_fn,
      client_learning_rate=client_learning_rate)
  two_way = mixing == TWO_WAY_GRADIENT_TRANSFER

  # An empty central dataset would silently take no central step.
  if (central_data_fn is not None
      and int(central_data_fn().cardinality()) == 0):
    raise ValueError('central_data_fn() returned an empty dataset; the '
                     'central loss would take no step.')

  initial_weights_fn = common.initial_model_weights_computation(model_fn)
  weights_type = initial_weights_fn.type_signature.result
  trainable_type = weights_type.trainable
  if central_spec is not None and central_loss_fn is mixed_fl_step.model_loss:
    with tf.Graph().as_default():
      input_type = tff.types.tensorflow_to_type(model_fn().input_spec)
    if not input_type.is_assignable_from(
        tff.types.tensorflow_to_type(central_spec)):
      raise ValueError(
          f'central data element spec {central_spec} does not match the '
          f'model input spec {input_type}.'
      )

  extensions = []
  if mixing != PARALLEL_TRAINING:
    extensions.append(client_extensions.AugmentingGradient())
  if two_way:
    extensions.append(client_extensions.UpdateSum())
  if gradient_dissimilarity:
    extensions.append(client_extensions.FirstGradientMean())
  parts = k_step.k_step_parts(
      model_fn, optimizers.client, trainable_type,
      model_aggregator=model_aggregator, client_weighting=client_weighting,
      client_groups=client_groups, num_local_steps=num_local_steps,
      client_learning_rate=client_learning_rate,
      metrics_aggregator=metrics_aggregator, extensions=extensions,
      loss_weight=float(federated_weight))
  client_work = parts.client_work
  distributor = tff.learning.templates.build_broadcast_process(weights_type)
  specs = tuple(tf.TensorSpec(t.shape, t.dtype) for t in trainable_type)

  @tff.tensorflow.computation
  def server_init():
    return mixed_fl_step.initial_server_state(optimizers, specs)

  server_type = server_init.type_signature.result
  client_work_type = client_work.initialize.type_signature.result.member

  central_computation = mixed_fl_step.build_central_computation(
      model_fn, mixing, optimizers, central_loss_fn=central_loss_fn,
      central_data_fn=central_data_fn, central_weight=central_weight,
      num_central_steps=num_central_steps, central_seed=central_seed,
      central_shuffle_buffer=central_shuffle_buffer,
      server_type=server_type, weights_type=weights_type,
      client_work_type=client_work_type)

  @tff.tensorflow.computation
  def server_update(server, weights, mean_update, central_delta,
                    round_state, next_state, uploads, central_steps_taken):
    """(server state, x(t+1), client work state): merge, then 2-way GT.

    `round_state` is the client work's state the clients trained with (the
    round's learning rate and g_c), `next_state` the one it returned,
    `uploads` the client work's for the server (steps, update sum).
    """
    x = tf.nest.flatten(weights.trainable)
    client_steps = tf.cast(uploads[keys.SGD_STEPS], tf.float32)
    gradient_transfer = {}
    if two_way:  # Every client holds every weight.
      gradient_transfer = dict(
          update_sum=tf.nest.flatten(uploads[keys.UPDATE_SUM]),
          client_learning_rate=tf.cast(round_state[
              keys.OPTIMIZER_HPARAMS][
                  keys.LEARNING_RATE], tf.float32),
          client_steps=client_steps,
          augmented_steps=[client_steps] * len(x),
          central_gradient=tf.nest.flatten(
              round_state[client_extensions.AUGMENTING_GRADIENT]))
    new_server, new_x, new_central_gradient = mixed_fl_step.server_update(
        mixing, optimizers, server=server, x=x,
        mean_update=tf.nest.flatten(mean_update),
        central_delta=tf.nest.flatten(central_delta),
        central_steps=central_steps_taken, **gradient_transfer)
    new_client_work = collections.OrderedDict(next_state)
    if two_way:
      new_client_work[client_extensions.AUGMENTING_GRADIENT] = (
          new_central_gradient)
    new_weights = tff.learning.models.ModelWeights(
        trainable=list(new_x), non_trainable=weights.non_trainable)
    return new_server, new_weights, new_client_work

  @tff.tensorflow.computation
  def dissimilarity(uploads, central_gradient):
    """G~^2 and B~^2 (seed 004 Eq. 7) from the two gradient vectors."""
    federated_gradient = uploads[keys.FIRST_GRADIENT_MEAN]
    squared_norm = lambda g: tf.add_n(
        [tf.reduce_sum(tf.square(t)) for t in tf.nest.flatten(g)])
    total = squared_norm([f + c for f, c in zip(
        tf.nest.flatten(federated_gradient), tf.nest.flatten(central_gradient))])
    weighted = (squared_norm(federated_gradient) / federated_weight
                + squared_norm(central_gradient) / central_weight)
    return collections.OrderedDict((
        (keys.G_SQUARED, weighted - total),
        (keys.B_SQUARED, tf.math.divide_no_nan(weighted, total))))

  def prepare(server, weights, client_work_state):
    return mixed_fl_step.prepare(
        mixing, central_computation, server, weights, client_work_state)

  def update(*, server_state, weights, client_work_state, work, uploads,
             aggregated, context):
    central_delta, central_loss, central_gradient, central_steps_taken = (
        context)
    new_server, new_weights, new_client_work = tff.federated_map(
        server_update,
        (server_state, weights, aggregated.result, central_delta,
         client_work_state, work.state, uploads, central_steps_taken))
    metrics = collections.OrderedDict(
        ((keys.CENTRAL, tff.federated_zip(collections.OrderedDict(
            ((keys.LOSS, central_loss),)))),))
    if gradient_dissimilarity:
      metrics[keys.GRADIENT_DISSIMILARITY] = tff.federated_map(
          dissimilarity, (uploads, central_gradient))
    return new_server, new_weights, new_client_work, metrics

  return composers.compose_with_server_step(
      initial_weights_fn, distributor, client_work, parts.aggregator,
      composers.ServerStep(update, initialize=server_init, prepare=prepare,
                           hparams=mixed_fl_step.server_hparams(optimizers)))
