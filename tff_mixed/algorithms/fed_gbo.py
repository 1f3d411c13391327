"""FedGBO and the client-adaptive baselines it is compared with: Mimelite, MFL.

Seed 003 (Mills et al., *Accelerating Federated Learning with a Global Biased
Optimiser*): §2, Algorithm 1 (FedGBO), Table 1 (the optimizers' Update U,
Tracking T and Inverse I steps, `tff_mixed.optimizers`), Table 2 (what each
algorithm moves), §4 (Mimelite and MFL as compared there). AdaptiveFedOpt is
`tff_mixed.algorithms.build_adaptive_fed_opt`.

All three are the K-step client work of `tff_mixed.templates` with an
optimizer whose state (the global statistics s) the server keeps and
broadcasts:

  FedGBO    clients: K steps of U at fixed s_t; upload the model.
            server: x_{t+1} = mean_i y_i;  g~ = I(s_t, x_t - x_{t+1}, K, eta);
                    s_{t+1} = T(s_t, g~).
  Mimelite  clients: the full-batch gradient grad f_i(x_t), then K steps of U
            at fixed s_t; upload the model and that gradient.
            server: x_{t+1} = mean_i y_i;  s_{t+1} = T(s_t, mean_i grad f_i(x_t)).
  MFL       clients: K steps of the optimizer with moving statistics from
            s_t; upload the model and the final statistics.
            server: x_{t+1} = mean_i y_i;  s_{t+1} = mean_i s_i.

Means are uniform over the clients that trained, as in the paper (with
`client_weighting=NUM_EXAMPLES` they weight by examples processed, the full
gradients and statistics with the same weights).
"""

import collections
from collections.abc import Callable
from typing import Optional

import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed import aggregators
from tff_mixed import checks
from tff_mixed import keys
from tff_mixed import optimizers
from tff_mixed import schedules
from tff_mixed.algorithms import k_step
from tff_mixed.metrics import adaptive_fl_cost
from tff_mixed.templates import client_extensions
from tff_mixed.templates import client_groups as client_groups_lib
from tff_mixed.templates import common
from tff_mixed.templates import composers

FED_GBO = adaptive_fl_cost.FED_GBO
MIMELITE = adaptive_fl_cost.MIMELITE
MFL = adaptive_fl_cost.MFL

UNIFORM = tff.learning.ClientWeighting.UNIFORM
# What a client uploads besides its update, which DP on the update misses.
_UNPRIVATISED = {MIMELITE: 'its full-batch gradient',
                 MFL: 'its optimizer statistics'}


def _build_process(
    algorithm: str,
    model_fn: common.ModelFn,
    client_optimizer_fn: common.OptimizerFn,
    server_optimizer_fn: Optional[common.OptimizerFn],
    *,
    num_local_steps: schedules.ScheduleOrSteps,
    client_learning_rate: Optional[schedules.ScheduleOrValue],
    client_weighting: tff.learning.ClientWeighting,
    model_aggregator: Optional[common.Aggregator],
    metrics_aggregator: Optional[Callable[..., tff.Computation]],
    flops_per_example: Optional[float],
    client_groups: Optional[client_groups_lib.ClientGroups],
) -> tff.learning.templates.LearningProcess:
  """The shared builder of FedGBO, Mimelite and MFL (see the module doc)."""
  client_optimizer = common.resolve_optimizer(
      client_optimizer_fn, 'client_optimizer_fn')
  if not isinstance(client_optimizer, optimizers.StatisticsOptimizer):
    raise TypeError(
        f'client_optimizer_fn must be a tff_mixed.optimizers optimizer '
        f'(build_sgdm, build_rmsprop, build_adam): {algorithm} needs its '
        f'Update, Tracking and Inverse steps; got '
        f'{type(client_optimizer).__name__}.')
  if client_learning_rate is None and not client_optimizer.learning_rate > 0:
    raise ValueError(
        f"client_optimizer_fn's learning_rate must be > 0, got "
        f'{client_optimizer.learning_rate}.')
  adaptive = client_optimizer.adaptive
  # FedGBO's and Mimelite's clients step at fixed s (U); MFL's track it.
  client_optimizer = client_optimizer.with_frozen_statistics(algorithm != MFL)
  server_optimizer = common.resolve_optional_optimizer(
      server_optimizer_fn, 'server_optimizer_fn', default_learning_rate=1.0)
  if flops_per_example is not None:
    checks.check_number(flops_per_example, 'flops_per_example',
                        allow_zero=True)

  initial_weights_fn = common.initial_model_weights_computation(model_fn)
  weights_type = initial_weights_fn.type_signature.result
  flops_per_step = full_gradient_flops = None
  if flops_per_example is not None:
    ops = adaptive_fl_cost.ops_per_parameter(algorithm, adaptive)
    num_parameters = common.num_trainable_parameters(weights_type)
    flops_per_step = lambda batch: adaptive_fl_cost.step_flops(
        batch, flops_per_example=flops_per_example,
        num_parameters=num_parameters, ops=ops)
    if algorithm == MIMELITE:
      full_gradient_flops = lambda examples: examples * flops_per_example

  statistics_update = {
      FED_GBO: client_extensions.SERVER_STEP,
      MFL: client_extensions.AVERAGE,
      MIMELITE: client_extensions.TRACK_FULL_GRADIENT}[algorithm]
  if algorithm != FED_GBO and isinstance(
      model_aggregator, aggregators.GaussianFixedClipFactory):
    raise ValueError(
        f'model_aggregator gaussian_fixed cannot make {algorithm} private: '
        f'its clients upload {_UNPRIVATISED[algorithm]} beside the update, '
        'which gaussian_fixed neither clips nor noises (FedGBO, whose '
        'statistics follow the noised mean update, can take it).')
  parts = k_step.k_step_parts(
      model_fn, client_optimizer, weights_type.trainable,
      model_aggregator=model_aggregator, client_weighting=client_weighting,
      client_groups=client_groups, num_local_steps=num_local_steps,
      client_learning_rate=client_learning_rate,
      metrics_aggregator=metrics_aggregator,
      extensions=[client_extensions.GlobalOptimizerState(
          statistics_update, adaptive, full_gradient_flops)],
      flops_per_step=flops_per_step)
  distributor = tff.learning.templates.build_broadcast_process(weights_type)
  specs = tuple(tf.TensorSpec(t.shape, t.dtype) for t in weights_type.trainable)
  server_update = _build_server_update(
      algorithm, adaptive, server_optimizer)

  @tff.tensorflow.computation
  def server_init():
    return server_optimizer.initialize(specs)

  def update(*, server_state, weights, client_work_state, work, uploads,
             aggregated, context):
    del context
    new_server, new_weights, new_client_work = tff.federated_map(
        server_update,
        (server_state, weights, aggregated.result, client_work_state,
         work.state, uploads))
    return new_server, new_weights, new_client_work, collections.OrderedDict()

  return composers.compose_with_server_step(
      initial_weights_fn, distributor, parts.client_work, parts.aggregator,
      composers.ServerStep(update, initialize=server_init))


def _build_server_update(algorithm, adaptive, server_optimizer):
  """x_{t+1} = ServerOpt(x_t, mean update); FedGBO also recovers and tracks
  the round's mean gradient."""
  extensions = client_extensions

  @tff.tensorflow.computation
  def server_update(server_state, weights, mean_update, round_state,
                    next_state, uploads):
    """(server state, x_{t+1}, the client work's next state with s_{t+1}).

    `round_state` is the client work's state the clients trained with: its
    K, learning rate and s are the round's; `uploads` the client work's for
    the server (the steps taken).
    """
    x = tuple(tf.nest.flatten(weights.trainable))
    delta = tf.nest.flatten(mean_update)
    server_state, new_x = server_optimizer.next(server_state, x, tuple(delta))
    new_client_work = collections.OrderedDict(next_state)
    if algorithm == FED_GBO:  # MFL and Mimelite update s in the client work.
      state = collections.OrderedDict(next_state[extensions.OPTIMIZER_STATE])
      stats = optimizers.statistics_of(state)
      gradient = adaptive.inverse(
          stats, delta, round_state[keys.NUM_LOCAL_STEPS],
          round_state[keys.OPTIMIZER_HPARAMS][
              keys.LEARNING_RATE])
      tracked = adaptive.track(stats, gradient)
      trained = uploads[keys.SGD_STEPS] > 0
      for key in stats:  # No client trained: no gradient to track.
        state[key] = tuple(tf.where(trained, new, old)
                           for new, old in zip(tracked[key], stats[key]))
      new_client_work[extensions.OPTIMIZER_STATE] = state
    new_weights = tff.learning.models.ModelWeights(
        trainable=list(new_x), non_trainable=weights.non_trainable)
    return server_state, new_weights, new_client_work

  return server_update


def build_fed_gbo(
    model_fn: common.ModelFn,
    client_optimizer_fn: common.OptimizerFn,
    server_optimizer_fn: Optional[common.OptimizerFn] = None,
    *,
    num_local_steps: schedules.ScheduleOrSteps,
    client_learning_rate: Optional[schedules.ScheduleOrValue] = None,
    client_weighting: tff.learning.ClientWeighting = UNIFORM,
    model_aggregator: Optional[common.Aggregator] = None,
    metrics_aggregator: Optional[Callable[..., tff.Computation]] = None,
    flops_per_example: Optional[float] = None,
    client_groups: Optional[client_groups_lib.ClientGroups] = None,
) -> tff.learning.templates.LearningProcess:
  """Builds FedGBO (seed 003, §2, Algorithm 1).

  Round t, cohort S_t: every client starts from x_t and takes K steps
  y <- y + U(s_t, g, eta) with the global statistics s_t fixed; the server
  sets x_{t+1} = x_t - Delta (Delta = mean_i (x_t - y_i^K); with another
  server optimizer, ServerOpt(x_t, Delta)), recovers the round's mean client
  gradient g~ = I(s_t, Delta, K, eta) and tracks it: s_{t+1} = T(s_t, g~).
  Download x and s, upload x. K and eta may follow schedules: I uses the
  round's values. With sgdm at beta = 0, or rmsprop at beta = 1 and
  epsilon = 0, FedGBO is FedAvg with server learning rate 1.
  Signatures (S: state):
    initialize: `( -> S@SERVER)`
    next: `(<S@SERVER, {B*}@CLIENTS> -> <state=S@SERVER, metrics=M@SERVER>)`
  The statistics s live in the state at `client_work['optimizer_state']`
  (`OrderedDict(learning_rate, m and/or v)`).

  Args:
    model_fn: No-arg callable returning a `tff.learning.models.VariableModel`.
    client_optimizer_fn: A `tff_mixed.optimizers` optimizer (or a no-arg
      callable returning one): `build_sgdm`, `build_rmsprop`, `build_adam`
      or `build(name, learning_rate, ...)`, whose learning rate is eta
      (> 0) and whose hyper-parameters are the statistics' (seed 003 Table
      1). The builder applies its statistics as the algorithm defines.
    server_optimizer_fn: Applied to the mean update; default SGD with
      learning rate 1, which is the paper's x_{t+1} = mean_i y_i.
    num_local_steps: K: an int >= 1 or a `tff_mixed.schedules.Schedule`.
    client_learning_rate: Optional number or schedule overriding eta each
      round.
    client_weighting: `UNIFORM` (the paper's mean over clients; default) or
      `NUM_EXAMPLES`.
    model_aggregator: Optional `tff.aggregators` factory for the mean
      update (e.g. `tff_mixed.aggregators.gaussian_fixed`, whose clients
      clip their update, with `UNIFORM` weighting); default a weighted mean
      that returns 0 when every weight is 0. `gaussian_fixed` is for
      FedGBO only: Mimelite's full gradients and MFL's statistics are
      uploaded beside the update, not through it, so they are refused.
    metrics_aggregator: Optional, as in `tff.learning`.
    flops_per_example: Optional forward plus backward FLOPs of one example;
      adds `client_work/client_flops_per_client`, seed 003 Eq. 22 at each
      client's mean batch size.
    client_groups: Fast mode, as in `build_fed_avg` (`next` takes client
      groups); the same model (the statistics' updates are sums too).

  Measurements (`client_work/`): those of the K-step client work, among
  them `bytes_downloaded_per_client` and `bytes_uploaded_per_client`
  (seed 003 Table 2, from the types of what moves).

  Raises:
    TypeError, ValueError: For arguments of the wrong type or value.
  """
  return _build_process(
      FED_GBO, model_fn, client_optimizer_fn, server_optimizer_fn,
      num_local_steps=num_local_steps,
      client_learning_rate=client_learning_rate,
      client_weighting=client_weighting, model_aggregator=model_aggregator,
      metrics_aggregator=metrics_aggregator,
      flops_per_example=flops_per_example, client_groups=client_groups)


def build_mimelite(
    model_fn: common.ModelFn,
    client_optimizer_fn: common.OptimizerFn,
    server_optimizer_fn: Optional[common.OptimizerFn] = None,
    *,
    num_local_steps: schedules.ScheduleOrSteps,
    client_learning_rate: Optional[schedules.ScheduleOrValue] = None,
    client_weighting: tff.learning.ClientWeighting = UNIFORM,
    model_aggregator: Optional[common.Aggregator] = None,
    metrics_aggregator: Optional[Callable[..., tff.Computation]] = None,
    flops_per_example: Optional[float] = None,
    client_groups: Optional[client_groups_lib.ClientGroups] = None,
) -> tff.learning.templates.LearningProcess:
  """Builds Mimelite as seed 003 (§4) runs it.

  Round t: every client computes its full-batch gradient grad f_i(x_t) (one
  pass over its data, the mean over examples), then takes K steps
  y <- y + U(s_t, g, eta) with s_t fixed (FedGBO's client step); the
  server sets x_{t+1} = x_t - mean_i (x_t - y_i^K) and
  s_{t+1} = T(s_t, mean_i grad f_i(x_t)). Download x and s, upload x and
  the gradient.

  TFF's `tff.learning.algorithms.build_weighted_mime_lite` is the same
  scheme with a `tff.learning` optimizer, and differs from the paper's:
  its clients make one pass over their data instead of K steps, and it
  applies the frozen state through `optimizer.next`, which updates every
  statistic with the current gradient before stepping (for RMSProp and
  Adam, v too; seed 003's U keeps v fixed), with `tff.learning`'s momentum
  (m <- b m + g) and Adam's bias correction and zero-initialised v. This
  builder keeps seed 003's U and T and exactly K steps.

  Arguments, signatures and measurements as `build_fed_gbo`'s.
  """
  return _build_process(
      MIMELITE, model_fn, client_optimizer_fn, server_optimizer_fn,
      num_local_steps=num_local_steps,
      client_learning_rate=client_learning_rate,
      client_weighting=client_weighting, model_aggregator=model_aggregator,
      metrics_aggregator=metrics_aggregator,
      flops_per_example=flops_per_example, client_groups=client_groups)


def build_mfl(
    model_fn: common.ModelFn,
    client_optimizer_fn: common.OptimizerFn,
    server_optimizer_fn: Optional[common.OptimizerFn] = None,
    *,
    num_local_steps: schedules.ScheduleOrSteps,
    client_learning_rate: Optional[schedules.ScheduleOrValue] = None,
    client_weighting: tff.learning.ClientWeighting = UNIFORM,
    model_aggregator: Optional[common.Aggregator] = None,
    metrics_aggregator: Optional[Callable[..., tff.Computation]] = None,
    flops_per_example: Optional[float] = None,
    client_groups: Optional[client_groups_lib.ClientGroups] = None,
) -> tff.learning.templates.LearningProcess:
  """Builds MFL (Liu et al.; seed 003's baseline, §4).

  Round t: every client starts from x_t and the global statistics s_t and
  runs the optimizer with moving statistics for K steps (s <- T(s, g), then
  the optimizer's step at the new s: -eta m for sgdm, -eta g / (sqrt(v) +
  eps) for rmsprop, -eta m / (sqrt(v) + eps) for adam); the server sets
  x_{t+1} = x_t - mean_i (x_t - y_i^K) and s_{t+1} = mean_i s_i^K.
  Download and upload x and s.

  Arguments, signatures and measurements as `build_fed_gbo`'s.
  """
  return _build_process(
      MFL, model_fn, client_optimizer_fn, server_optimizer_fn,
      num_local_steps=num_local_steps,
      client_learning_rate=client_learning_rate,
      client_weighting=client_weighting, model_aggregator=model_aggregator,
      metrics_aggregator=metrics_aggregator,
      flops_per_example=flops_per_example, client_groups=client_groups)
