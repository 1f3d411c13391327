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
from typing import Optional, Union

import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed import optimizers
from tff_mixed import schedules
from tff_mixed.metrics import adaptive_fl_cost
from tff_mixed.templates import client_extensions
from tff_mixed.templates import common
from tff_mixed.templates import composers
from tff_mixed.templates import k_step_client_work
from tff_mixed.templates import scheduled_client_work

FED_GBO = adaptive_fl_cost.FED_GBO
MIMELITE = adaptive_fl_cost.MIMELITE
MFL = adaptive_fl_cost.MFL

OptimizerArg = Union[str, optimizers.AdaptiveOptimizer]


def _check_learning_rate(learning_rate) -> None:
  if isinstance(learning_rate, schedules.Schedule):
    return
  if isinstance(learning_rate, bool) or not isinstance(
      learning_rate, (int, float)):
    raise TypeError('learning_rate must be a number or a '
                    f'tff_mixed.schedules.Schedule, got {learning_rate!r}.')
  if not learning_rate > 0:
    raise ValueError(f'learning_rate must be > 0, got {learning_rate}.')


def _build_process(
    algorithm: str,
    model_fn: common.ModelFn,
    *,
    optimizer: OptimizerArg,
    learning_rate: schedules.ScheduleOrValue,
    num_local_steps: schedules.ScheduleOrValue,
    hparams: dict,
    client_weighting: tff.learning.ClientWeighting,
    model_aggregator: Optional[common.Aggregator],
    metrics_aggregator: Optional[Callable[..., tff.Computation]],
    flops_per_example: Optional[float],
) -> tff.learning.templates.LearningProcess:
  """The shared builder of FedGBO, Mimelite and MFL (see the module doc)."""
  adaptive = optimizers.get(optimizer, **hparams)
  _check_learning_rate(learning_rate)
  scheduled = isinstance(learning_rate, schedules.Schedule)
  # A scheduled rate is written into the state by the client work.
  client_optimizer = optimizers.build_tff_optimizer(
      adaptive, 0.0 if scheduled else learning_rate,
      frozen_statistics=algorithm != MFL)
  if flops_per_example is not None and not flops_per_example >= 0:
    raise ValueError(
        f'flops_per_example must be >= 0, got {flops_per_example}.')

  initial_weights_fn = common.initial_model_weights_computation(model_fn)
  weights_type = initial_weights_fn.type_signature.result
  trainable_type = weights_type.trainable
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
  client_work = scheduled_client_work.with_schedules(
      k_step_client_work.build_k_step_client_work(
          model_fn, client_optimizer, client_weighting=client_weighting,
          metrics_aggregator=metrics_aggregator,
          flops_per_step=flops_per_step,
          extensions=[client_extensions.GlobalOptimizerState(
              statistics_update, adaptive, full_gradient_flops)]),
      num_local_steps=num_local_steps,
      learning_rate=learning_rate if scheduled else None)
  distributor = tff.learning.templates.build_broadcast_process(weights_type)
  aggregator = common.build_model_aggregator(model_aggregator, trainable_type)
  server_update = _build_server_update(algorithm, adaptive)

  def update(*, server_state, weights, client_work_state, work, aggregated,
             context):
    del server_state, context
    new_weights, new_client_work = tff.federated_map(
        server_update,
        (weights, aggregated.result, client_work_state, work.state,
         work.measurements))
    return None, new_weights, new_client_work, collections.OrderedDict()

  return composers.compose_with_server_step(
      initial_weights_fn, distributor, client_work, aggregator,
      composers.ServerStep(update))


def _build_server_update(algorithm: str,
                         adaptive: optimizers.AdaptiveOptimizer):
  """x_{t+1} = x_t - mean update; FedGBO also recovers and tracks g~."""
  extensions = client_extensions

  @tff.tensorflow.computation
  def server_update(weights, mean_update, round_state, next_state,
                    measurements):
    """(x_{t+1}, the client work's next state with s_{t+1}).

    `round_state` is the client work's state the clients trained with: its
    K, learning rate and s are the round's.
    """
    x = tf.nest.flatten(weights.trainable)
    delta = tf.nest.flatten(mean_update)
    new_x = [xi - d for xi, d in zip(x, delta)]
    new_client_work = collections.OrderedDict(next_state)
    if algorithm == FED_GBO:  # MFL and Mimelite update s in the client work.
      state = collections.OrderedDict(next_state[extensions.OPTIMIZER_STATE])
      stats = optimizers.statistics_of(state)
      gradient = adaptive.inverse(
          stats, delta, round_state[k_step_client_work.NUM_LOCAL_STEPS],
          round_state[k_step_client_work.OPTIMIZER_HPARAMS][
              k_step_client_work.LEARNING_RATE])
      tracked = adaptive.track(stats, gradient)
      trained = measurements[k_step_client_work.SGD_STEPS] > 0
      for key in stats:  # No client trained: no gradient to track.
        state[key] = tuple(tf.where(trained, new, old)
                           for new, old in zip(tracked[key], stats[key]))
      new_client_work[extensions.OPTIMIZER_STATE] = state
    new_weights = tff.learning.models.ModelWeights(
        trainable=new_x, non_trainable=weights.non_trainable)
    return new_weights, new_client_work

  return server_update


_ARGS_DOC = """
  Signatures (W: model weights, S: state):
    initialize: `( -> S@SERVER)`
    next: `(<S@SERVER, {B*}@CLIENTS> -> <state=S@SERVER, metrics=M@SERVER>)`
  The statistics s live in the state at
  `client_work['optimizer_state']` (`OrderedDict(learning_rate, m and/or v)`).

  Args:
    model_fn: No-arg callable returning a `tff.learning.models.VariableModel`.
    optimizer: 'sgdm', 'rmsprop', 'adam' or a
      `tff_mixed.optimizers.AdaptiveOptimizer`.
    learning_rate: eta, the clients' step size: a number > 0 or a
      `tff_mixed.schedules.Schedule`.
    num_local_steps: K: an int >= 1 or a schedule.
    beta: Decay of 'sgdm' and 'rmsprop' (default 0.9).
    beta_1, beta_2: Decays of 'adam' (defaults 0.9 and 0.99).
    epsilon: Of 'rmsprop' and 'adam' (default 1e-3).
    client_weighting: `UNIFORM` (the paper's mean over clients; default) or
      `NUM_EXAMPLES`.
    model_aggregator: Optional `tff.aggregators` factory for the client
      models' mean; default a weighted mean that returns 0 when every weight
      is 0.
    metrics_aggregator: Optional, as in `tff.learning`.
    flops_per_example: Optional forward plus backward FLOPs of one example;
      adds `client_work/client_flops_per_client`, seed 003 Eq. 22 at each
      client's mean batch size.

  Measurements (`client_work/`): those of the K-step client work, among
  them `bytes_downloaded_per_client` and `bytes_uploaded_per_client`
  (seed 003 Table 2, from the types of what moves).

  Raises:
    TypeError, ValueError: For arguments of the wrong type or value (an
      unknown optimizer or a hyper-parameter it does not have).
"""


def _builder(algorithm: str, summary: str):
  def build(
      model_fn: common.ModelFn,
      *,
      optimizer: OptimizerArg = 'sgdm',
      learning_rate: schedules.ScheduleOrValue,
      num_local_steps: schedules.ScheduleOrValue,
      beta: Optional[float] = None,
      beta_1: Optional[float] = None,
      beta_2: Optional[float] = None,
      epsilon: Optional[float] = None,
      client_weighting: tff.learning.ClientWeighting = (
          tff.learning.ClientWeighting.UNIFORM),
      model_aggregator: Optional[common.Aggregator] = None,
      metrics_aggregator: Optional[Callable[..., tff.Computation]] = None,
      flops_per_example: Optional[float] = None,
  ) -> tff.learning.templates.LearningProcess:
    return _build_process(
        algorithm, model_fn, optimizer=optimizer,
        learning_rate=learning_rate, num_local_steps=num_local_steps,
        hparams=dict(beta=beta, beta_1=beta_1, beta_2=beta_2,
                     epsilon=epsilon),
        client_weighting=client_weighting, model_aggregator=model_aggregator,
        metrics_aggregator=metrics_aggregator,
        flops_per_example=flops_per_example)

  build.__name__ = build.__qualname__ = f'build_{algorithm}'
  build.__doc__ = summary + '\n' + _ARGS_DOC
  return build


build_fed_gbo = _builder(FED_GBO, """Builds FedGBO (seed 003, Algorithm 1).

  Round t, cohort S_t: every client starts from x_t and takes K steps
  y <- y + U(s_t, g, eta) with the global statistics s_t fixed; the server
  sets x_{t+1} = mean_i y_i^K, recovers the round's mean client gradient
  g~ = I(s_t, x_t - x_{t+1}, K, eta) and tracks it: s_{t+1} = T(s_t, g~).
  Download x and s, upload x. K and eta may follow schedules: I uses the
  round's values. With sgdm at beta = 0, or rmsprop at beta = 1 and
  epsilon = 0, FedGBO is FedAvg with server learning rate 1.
""")

build_mimelite = _builder(MIMELITE, """Builds Mimelite as seed 003 runs it.

  Round t: every client computes its full-batch gradient grad f_i(x_t) (one
  pass over its data, the mean over examples), then takes K steps
  y <- y + U(s_t, g, eta) with s_t fixed (FedGBO's client step); the
  server sets x_{t+1} = mean_i y_i^K and s_{t+1} = T(s_t, mean_i grad f_i(x_t)).
  Download x and s, upload x and the gradient.

  TFF's `tff.learning.algorithms.build_weighted_mime_lite` is the same
  scheme with a `tff.learning` optimizer, and differs from the paper's:
  its clients make one pass over their data instead of K steps, and it
  applies the frozen state through `optimizer.next`, which updates every
  statistic with the current gradient before stepping (for RMSProp and
  Adam, v too; seed 003's U keeps v fixed), with `tff.learning`'s momentum
  (m <- b m + g) and Adam's bias correction and zero-initialised v. This
  builder keeps seed 003's U and T and exactly K steps.
""")

build_mfl = _builder(MFL, """Builds MFL (Liu et al.; seed 003's baseline).

  Round t: every client starts from x_t and the global statistics s_t and
  runs the optimizer with moving statistics for K steps (s <- T(s, g), then
  the optimizer's step at the new s: -eta m for sgdm, -eta g / (sqrt(v) +
  eps) for rmsprop, -eta m / (sqrt(v) + eps) for adam); the server sets
  x_{t+1} = mean_i y_i^K and s_{t+1} = mean_i s_i^K. Download and upload x
  and s.
""")
