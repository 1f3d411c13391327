"""FedAvg / FedSGD with a server optimizer and exactly K local steps.

Seed 000 (*Faster Federated Learning with Decaying Number of Local SGD Steps*),
§2.1, Algorithms 1-2 (FedSGD) and Appendix B, Algorithm 3 (FedAdam); the
server-optimizer view is Reddi et al.'s *Adaptive Federated Optimization*.
"""

from collections.abc import Callable
from typing import Optional, Union

import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed import optimizers
from tff_mixed import schedules
from tff_mixed.algorithms import k_step
from tff_mixed.metrics import adaptive_fl_cost
from tff_mixed.templates import client_extensions
from tff_mixed.templates import client_groups as client_groups_lib
from tff_mixed.templates import common
from tff_mixed.templates import scheduled_finalizer

def build_fed_avg(
    model_fn: common.ModelFn,
    client_optimizer_fn: common.OptimizerFn,
    server_optimizer_fn: Optional[common.OptimizerFn] = None,
    *,
    num_local_steps: schedules.ScheduleOrSteps,
    client_learning_rate: Optional[schedules.ScheduleOrValue] = None,
    server_learning_rate: Optional[schedules.ScheduleOrValue] = None,
    client_weighting: Optional[tff.learning.ClientWeighting] = None,
    model_distributor: Optional[tff.learning.templates.DistributionProcess] = None,
    model_aggregator: Optional[common.Aggregator] = None,
    metrics_aggregator: Optional[Callable[..., tff.Computation]] = None,
    flops_per_step: Optional[Callable[[tf.Tensor], tf.Tensor]] = None,
    flops_per_example: Optional[float] = None,
    client_groups: Optional[client_groups_lib.ClientGroups] = None,
) -> tff.learning.templates.LearningProcess:
  """Builds FedAvg / FedSGD in which every client takes exactly K steps.

  Round t, cohort I_t, client i with dataset D_i:

    x_i^0 = x_t;  x_i^{k+1} = ClientOpt(x_i^k, grad f(x_i^k; b_k)), k < K_t,
      b_k the k-th batch of D_i, cycling D_i when it has fewer than K batches
    Delta_i = x_t - x_i^K,  p_i = examples processed (or 1, or 0 if D_i = {})
    Delta = sum_i p_i Delta_i / sum_i p_i      (model_aggregator)
    x_{t+1} = ServerOpt_{eta_t}(x_t, Delta)    (Delta is the pseudo-gradient)

  With server SGD at learning rate 1 this is FedAvg; with another rate eta it
  is FedSGD of seed 000; with Adam it is FedAdam (see `build_fed_adam`).
  K_t, the client learning rate gamma_t and the server learning rate eta_t
  can follow `tff_mixed.schedules` (seed 000's decaying K, its
  decaying-gamma baseline, and the server decay eta_t = eta_0 d^t all its
  experiments use, App. B Table 5; `schedules.theorem2_learning_rate`
  couples eta_t to K_t as Theorem 2, Eq. 11).

  Signatures (W: model weights, S: state):
    initialize: `( -> S@SERVER)`
    next: `(<S@SERVER, {B*}@CLIENTS> -> <state=S@SERVER, metrics=M@SERVER>)`

  Args:
    model_fn: No-arg callable returning a `tff.learning.models.VariableModel`;
      it must build a fresh model on every call.
    client_optimizer_fn: A `tff.learning.optimizers.Optimizer` or a no-arg
      callable returning one (e.g. `build_sgdm(learning_rate=0.1)`).
    server_optimizer_fn: Likewise; default SGD with learning rate 1 (FedAvg).
    num_local_steps: K, the number of client steps per round: an int >= 1 or
      a `tff_mixed.schedules.Schedule` (e.g. `exponential_decay(10, 0.995)`).
    client_learning_rate: Optional number or schedule overriding the client
      optimizer's `learning_rate` hyper-parameter each round.
    server_learning_rate: Optional number or schedule (of the round) for the
      server optimizer's `learning_rate` hyper-parameter; a schedule's state
      is kept in the server state (`templates.scheduled_finalizer`).
    client_weighting: `tff.learning.ClientWeighting.NUM_EXAMPLES` (p_i =
      examples processed in the K steps), `UNIFORM` (p_i = 1) or
      `tff_mixed.templates.DATASET_SIZE` (p_i = |D_i|, seed 000 Alg. 1 line
      7; reads each client's dataset once more to count it). None (default):
      `NUM_EXAMPLES`, or `UNIFORM` with `tff_mixed.aggregators.gaussian_fixed`,
      whose mean is unweighted (it refuses the other weightings).
    model_distributor: Optional `DistributionProcess`; default broadcast.
    model_aggregator: Optional `tff.aggregators` factory, weighted or
      unweighted (e.g. `tff.learning.dp_aggregator` gives DP-FedAvg); default
      a weighted mean that returns 0 when every weight is 0.
      `tff_mixed.aggregators.gaussian_fixed` gives DP-FedAvg with fixed
      clipping that fast mode runs too (clients clip, weighting uniform).
    metrics_aggregator: Optional, as in `tff.learning`.
    flops_per_step: Optional `batch size -> FLOPs` of one client step; adds
      `client_work/client_flops_per_client` (see `build_k_step_client_work`).
    flops_per_example: Optional forward plus backward FLOPs of one example,
      instead of `flops_per_step`: steps cost seed 003 Eq. 22's
      `B * flops_per_example + 2 |x|` (an SGD client).
    client_groups: Fast mode: None (the default) for one dataset per client,
      or a `tff_mixed.templates.client_groups.ClientGroups`: each round's
      clients travel as a few client groups, each trained in one TF call,
      its clients all at once where the model is a
      `tff_mixed.models.KerasModelFn` that allows it (`mode='vectorised'`),
      else one after another; the same model as one dataset per client, to
      float rounding. `next` then takes client groups
      (`group_data.group_datasets(datasets, N)` / `group_arrays`, or
      `Task.cohort_groups`; the driver splits each cohort into
      `ClientGroups.count`) and stays the TFF computation composed here, as
      in faithful mode. Needs a weighted-mean `model_aggregator` (the
      default) or `tff_mixed.aggregators.gaussian_fixed`.
  Returns:
    A `tff.learning.templates.LearningProcess`.

  Raises:
    TypeError, ValueError: For arguments of the wrong type or value.
  """
  return _build_fed_avg(
      model_fn, client_optimizer_fn, server_optimizer_fn,
      num_local_steps=num_local_steps,
      client_learning_rate=client_learning_rate,
      server_learning_rate=server_learning_rate,
      client_weighting=client_weighting, model_distributor=model_distributor,
      model_aggregator=model_aggregator,
      metrics_aggregator=metrics_aggregator, flops_per_step=flops_per_step,
      flops_per_example=flops_per_example, client_groups=client_groups)


def _build_fed_avg(model_fn, client_optimizer_fn, server_optimizer_fn, *,
                   num_local_steps, client_learning_rate, server_learning_rate,
                   client_weighting, model_distributor, model_aggregator,
                   metrics_aggregator, flops_per_step, flops_per_example,
                   client_groups, extensions=()):
  """`build_fed_avg` whose client work also takes `extensions`."""
  client_optimizer = common.resolve_optimizer(client_optimizer_fn, 'client_optimizer_fn')
  if server_optimizer_fn is None:
    server_optimizer = tff.learning.optimizers.build_sgdm(learning_rate=1.0)
  else:
    server_optimizer = common.resolve_optimizer(server_optimizer_fn, 'server_optimizer_fn')

  initial_weights_fn = common.initial_model_weights_computation(model_fn)
  weights_type = initial_weights_fn.type_signature.result
  if flops_per_example is not None:
    if flops_per_step is not None:
      raise ValueError('Give flops_per_step or flops_per_example, not both.')
    if not flops_per_example >= 0:
      raise ValueError(
          f'flops_per_example must be >= 0, got {flops_per_example}.')
    num_parameters = common.num_trainable_parameters(weights_type)
    flops_per_step = lambda batch: adaptive_fl_cost.step_flops(
        batch, flops_per_example=flops_per_example,
        num_parameters=num_parameters,
        ops=adaptive_fl_cost.SGD_OPS_PER_PARAMETER)
  if model_distributor is None:
    model_distributor = tff.learning.templates.build_broadcast_process(
        weights_type
    )
  parts = k_step.k_step_parts(
      model_fn, client_optimizer, weights_type.trainable,
      model_aggregator=model_aggregator, client_weighting=client_weighting,
      client_groups=client_groups, num_local_steps=num_local_steps,
      client_learning_rate=client_learning_rate,
      metrics_aggregator=metrics_aggregator, extensions=extensions,
      flops_per_step=flops_per_step)
  finalizer = build_server_finalizer(server_optimizer, weights_type,
                                     server_learning_rate)
  return tff.learning.templates.compose_learning_process(
      initial_weights_fn, model_distributor, parts.client_work,
      parts.aggregator, finalizer)


def build_fed_prox(
    model_fn: common.ModelFn,
    client_optimizer_fn: common.OptimizerFn,
    server_optimizer_fn: Optional[common.OptimizerFn] = None,
    *,
    proximal_strength: float,
    num_local_steps: schedules.ScheduleOrSteps,
    **kwargs,
) -> tff.learning.templates.LearningProcess:
  """Builds FedProx: `build_fed_avg` whose clients minimise a proximal loss.

  Li et al., *Federated Optimization in Heterogeneous Networks* (MLSys
  2020), Alg. 2, with exactly K client steps: client i takes K optimizer
  steps on

    h_i(x) = f_i(x) + (mu / 2) ||x - x_t||^2,  so each step's gradient is
    grad f_i(x; b_k) + mu (x - x_t),

  x_t the round's model; the rest is `build_fed_avg`'s round (weighted
  mean of the updates, server optimizer). mu = 0 is FedAvg. TFF's
  `tff.learning.algorithms.build_weighted_fed_prox` (0.87) adds
  mu (x_t - x) instead, pushing clients away from x_t
  (`client_extensions.ProximalTerm`); this builder follows the paper.

  Signatures: as `build_fed_avg`.

  Args:
    model_fn, client_optimizer_fn, server_optimizer_fn, num_local_steps: As
      in `build_fed_avg`.
    proximal_strength: mu, a number >= 0.
    **kwargs: `build_fed_avg`'s other keyword arguments (schedules, client
      weighting, aggregators, fast mode, FLOPs).

  Raises:
    ValueError: For a `proximal_strength` that is not a number >= 0, and as
      `build_fed_avg`.
  """
  if isinstance(proximal_strength, bool) or not isinstance(
      proximal_strength, (int, float)) or not proximal_strength >= 0:
    raise ValueError('proximal_strength must be a number >= 0, got '
                     f'{proximal_strength!r}.')
  defaults = dict(client_learning_rate=None, server_learning_rate=None,
                  client_weighting=None, model_distributor=None,
                  model_aggregator=None, metrics_aggregator=None,
                  flops_per_step=None, flops_per_example=None,
                  client_groups=None)
  unknown = set(kwargs) - set(defaults)
  if unknown:
    raise TypeError('build_fed_prox got unexpected keyword arguments '
                    f'{sorted(unknown)}.')
  return _build_fed_avg(
      model_fn, client_optimizer_fn, server_optimizer_fn,
      num_local_steps=num_local_steps, **{**defaults, **kwargs},
      extensions=[client_extensions.ProximalTerm(proximal_strength)])


def build_server_finalizer(server_optimizer, weights_type, learning_rate):
  """TFF's apply-optimizer finalizer; with `learning_rate` (a number or a
  schedule of the round), the optimizer's rate set from it every round."""
  if learning_rate is None:
    return tff.learning.templates.build_apply_optimizer_finalizer(
        server_optimizer, weights_type)
  return scheduled_finalizer.build_scheduled_finalizer(
      server_optimizer, weights_type,
      schedules.as_schedule(learning_rate, 'server_learning_rate'))


TFF_ADAM, SEED000_ADAM = 'tff', 'seed000'
ADAM_VARIANTS = (TFF_ADAM, SEED000_ADAM)
ADAM_DEFAULTS = {TFF_ADAM: (0.99, 1e-3), SEED000_ADAM: (0.999, 1e-8)}
# FedAdam's server learning rate unless one is given (seed 000 App. B
# Table 5, Stack Overflow).
FED_ADAM_LEARNING_RATE = 0.3


def build_fed_adam(
    model_fn: common.ModelFn,
    client_optimizer_fn: common.OptimizerFn,
    *,
    num_local_steps: schedules.ScheduleOrSteps,
    server_learning_rate: schedules.ScheduleOrValue = FED_ADAM_LEARNING_RATE,
    beta_1: float = 0.9,
    beta_2: Optional[float] = None,
    epsilon: Optional[float] = None,
    adam: str = TFF_ADAM,
    **kwargs,
) -> tff.learning.templates.LearningProcess:
  """FedAdam: `build_fed_avg` with Adam as the server optimizer.

  The server treats the averaged update Delta as a gradient:
    m_t = b1 m_{t-1} + (1 - b1) Delta,  v_t = b2 v_{t-1} + (1 - b2) Delta^2,
    eta_t = lr sqrt(1 - b2^t) / (1 - b1^t),
    x_{t+1} = x_t - eta_t m_t / (sqrt(v_t) + eps)    (adam='tff')
    x_{t+1} = x_t - eta_t m_t / sqrt(v_t + eps)      (adam='seed000')

  `adam='tff'` (default) is `tff.learning.optimizers.build_adam` with
  b2 = 0.99, eps = 1e-3 (Reddi et al.'s FedAdam) and Delta the
  example-weighted mean. `adam='seed000'` is seed 000's App. B Algorithm 3
  (`tff_mixed.optimizers.build_seed000_adam`): eps inside the square root,
  b2 = 0.999, eps = 1e-8, and the uniform mean over clients (line 8, unless
  `client_weighting` is given). Server lr 0.3 is seed 000's (App. B
  Table 5, Stack Overflow); it may be a schedule of the round. Pass
  `server_optimizer_fn=build_yogi(...)` or `build_adagrad(...)` to
  `build_fed_avg` for FedYogi / FedAdagrad.

  Args:
    model_fn, client_optimizer_fn, num_local_steps: As in `build_fed_avg`
      (K: an int >= 1 or a `tff_mixed.schedules.Schedule`).
    server_learning_rate: A number or a schedule of the round.
    beta_1, beta_2, epsilon: Adam's; None: the variant's default.
    adam: 'tff' or 'seed000'.
    **kwargs: `build_fed_avg`'s other keyword arguments.
  """
  if 'server_optimizer_fn' in kwargs:
    raise TypeError(
        'build_fed_adam sets the server optimizer; use build_fed_avg to pass '
        'server_optimizer_fn.'
    )
  if adam not in ADAM_VARIANTS:
    raise ValueError(f'adam must be one of {ADAM_VARIANTS}, got {adam!r}.')
  default_beta_2, default_epsilon = ADAM_DEFAULTS[adam]
  beta_2 = default_beta_2 if beta_2 is None else beta_2
  epsilon = default_epsilon if epsilon is None else epsilon
  initial_rate, schedule = _initial_rate(server_learning_rate)
  if adam == SEED000_ADAM:
    server_optimizer = optimizers.build_seed000_adam(
        initial_rate, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon)
    kwargs.setdefault('client_weighting', tff.learning.ClientWeighting.UNIFORM)
  else:
    server_optimizer = tff.learning.optimizers.build_adam(
        learning_rate=initial_rate, beta_1=beta_1, beta_2=beta_2,
        epsilon=epsilon)
  return build_fed_avg(
      model_fn,
      client_optimizer_fn,
      server_optimizer,
      num_local_steps=num_local_steps,
      server_learning_rate=schedule,
      **kwargs,
  )


def _initial_rate(server_learning_rate):
  """(eta_0, the schedule or None for a number) of a server rate."""
  if isinstance(server_learning_rate, schedules.Schedule):
    return (float(server_learning_rate.initialize()[schedules.VALUE]),
            server_learning_rate)
  return server_learning_rate, None


def build_adaptive_fed_opt(
    model_fn: common.ModelFn,
    client_optimizer_fn: common.OptimizerFn,
    *,
    optimizer: Union[str, optimizers.AdaptiveOptimizer] = 'adam',
    server_learning_rate: schedules.ScheduleOrValue = 1.0,
    num_local_steps: schedules.ScheduleOrSteps,
    beta: Optional[float] = None,
    beta_1: Optional[float] = None,
    beta_2: Optional[float] = None,
    epsilon: Optional[float] = None,
    client_weighting: tff.learning.ClientWeighting = tff.learning.ClientWeighting.UNIFORM,
    flops_per_example: Optional[float] = None,
    **kwargs,
) -> tff.learning.templates.LearningProcess:
  """AdaptiveFedOpt as seed 003 compares it: FedAvg with an adaptive server.

  `build_fed_avg` whose server optimizer is `optimizer` from
  `tff_mixed.optimizers` with moving statistics, treating the mean client
  update Delta as its gradient: for 'adam',
    m <- b1 m + (1 - b1) Delta,  v <- b2 v + (1 - b2) Delta^2,
    x_{t+1} = x_t - eta_s m / (sqrt(v) + eps),
  with m = 0 and v = 1 at the start and no bias correction (seed 003's
  server optimizers); 'sgdm' and 'rmsprop' likewise. Clients run
  `client_optimizer_fn` (SGD in the paper). The mean is uniform over
  clients by default, as in the paper. For `tff.learning`'s bias-corrected
  Adam use `build_fed_adam`.

  Args:
    model_fn, client_optimizer_fn, num_local_steps: As in `build_fed_avg`.
    optimizer: 'sgdm', 'rmsprop', 'adam' or a
      `tff_mixed.optimizers.AdaptiveOptimizer`.
    server_learning_rate: eta_s, a number >= 0 (default 1) or a schedule of
      the round.
    beta, beta_1, beta_2, epsilon: The optimizer's hyper-parameters (see
      `tff_mixed.optimizers`); None keeps its default.
    client_weighting: `UNIFORM` (default), `NUM_EXAMPLES` or
      `tff_mixed.templates.DATASET_SIZE`.
    flops_per_example: As in `build_fed_avg` (seed 003 Eq. 22, SGD
      clients).
    **kwargs: Other keyword arguments of `build_fed_avg`.
  """
  if 'server_optimizer_fn' in kwargs:
    raise TypeError(
        'build_adaptive_fed_opt sets server_optimizer_fn; use build_fed_avg '
        'to pass it.')
  adaptive = optimizers.get(
      optimizer, beta=beta, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon)
  initial_rate, schedule = _initial_rate(server_learning_rate)
  server_optimizer = optimizers.build_tff_optimizer(
      adaptive, initial_rate, frozen_statistics=False)
  return build_fed_avg(
      model_fn, client_optimizer_fn, server_optimizer,
      num_local_steps=num_local_steps, client_weighting=client_weighting,
      server_learning_rate=schedule,
      flops_per_example=flops_per_example, **kwargs)
