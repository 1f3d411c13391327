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
from tff_mixed.metrics import adaptive_fl_cost
from tff_mixed.templates import client_extensions
from tff_mixed.templates import common
from tff_mixed.templates import k_step_client_work
from tff_mixed.templates import scheduled_client_work

def build_fed_avg(
    model_fn: common.ModelFn,
    client_optimizer_fn: common.OptimizerFn,
    server_optimizer_fn: Optional[common.OptimizerFn] = None,
    *,
    num_local_steps: schedules.ScheduleOrValue,
    client_learning_rate: Optional[schedules.ScheduleOrValue] = None,
    client_weighting: tff.learning.ClientWeighting = tff.learning.ClientWeighting.NUM_EXAMPLES,
    model_distributor: Optional[tff.learning.templates.DistributionProcess] = None,
    model_aggregator: Optional[common.Aggregator] = None,
    metrics_aggregator: Optional[Callable[..., tff.Computation]] = None,
    flops_per_step: Optional[Callable[[tf.Tensor], tf.Tensor]] = None,
    flops_per_example: Optional[float] = None,
    client_groups: bool = False,
) -> tff.learning.templates.LearningProcess:
  """Builds FedAvg / FedSGD in which every client takes exactly K steps.

  Round t, cohort I_t, client i with dataset D_i:

    x_i^0 = x_t;  x_i^{k+1} = ClientOpt(x_i^k, grad f(x_i^k; b_k)), k < K_t,
      b_k the k-th batch of D_i, cycling D_i when it has fewer than K batches
    Delta_i = x_t - x_i^K,  p_i = examples processed (or 1, or 0 if D_i = {})
    Delta = sum_i p_i Delta_i / sum_i p_i      (model_aggregator)
    x_{t+1} = ServerOpt(x_t, Delta)            (Delta is the pseudo-gradient)

  With server SGD at learning rate 1 this is FedAvg; with another rate eta it
  is FedSGD of seed 000; with Adam it is FedAdam (see `build_fed_adam`).
  K_t and the client learning rate can follow `tff_mixed.schedules`
  (seed 000's decaying K and its decaying-learning-rate baseline).

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
    client_weighting: `tff.learning.ClientWeighting.NUM_EXAMPLES` (examples
      processed in the K steps) or `UNIFORM`.
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
    client_groups: Fast mode: `next` takes client groups
      (`tff_mixed.templates.client_groups.group_datasets`), each trained in
      one TF call; the same model as one dataset per client, to float
      rounding. Needs a weighted-mean `model_aggregator` (the default) or
      `tff_mixed.aggregators.gaussian_fixed`.

  Returns:
    A `tff.learning.templates.LearningProcess`.

  Raises:
    TypeError, ValueError: For arguments of the wrong type or value.
  """
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
  extensions = client_extensions.for_aggregator(model_aggregator)
  if extensions:  # DP-FedAvg's mean is unweighted, as TFF's.
    client_weighting = tff.learning.ClientWeighting.UNIFORM
  aggregator = common.build_model_aggregator(
      model_aggregator, weights_type.trainable, client_groups=client_groups,
      clips_updates=bool(extensions))
  client_work = scheduled_client_work.with_schedules(
      k_step_client_work.build_k_step_client_work(
          model_fn, client_optimizer, client_weighting=client_weighting,
          metrics_aggregator=metrics_aggregator,
          flops_per_step=flops_per_step, extensions=extensions,
          client_groups=client_groups),
      num_local_steps=num_local_steps, learning_rate=client_learning_rate)
  finalizer = tff.learning.templates.build_apply_optimizer_finalizer(
      server_optimizer, weights_type
  )
  return tff.learning.templates.compose_learning_process(
      initial_weights_fn, model_distributor, client_work, aggregator, finalizer
  )


def build_fed_adam(
    model_fn: common.ModelFn,
    client_optimizer_fn: common.OptimizerFn,
    *,
    num_local_steps: schedules.ScheduleOrValue,
    server_learning_rate: float = 0.3,
    beta_1: float = 0.9,
    beta_2: float = 0.99,
    epsilon: float = 1e-3,
    **kwargs,
) -> tff.learning.templates.LearningProcess:
  """FedAdam: `build_fed_avg` with Adam as the server optimizer.

  The server treats the averaged update Delta as a gradient:
    m_t = b1 m_{t-1} + (1 - b1) Delta,  v_t = b2 v_{t-1} + (1 - b2) Delta^2,
    x_{t+1} = x_t - lr sqrt(1 - b2^t) / (1 - b1^t) * m_t / (sqrt(v_t) + eps).
  Defaults: beta_1 = 0.9, beta_2 = 0.99, epsilon = 1e-3 (Reddi et al.'s
  defaults) and server lr 0.3 (seed 000, Table 5, FedAdam). Seed 000's
  Algorithm 3 puts eps inside the square root; `tff.learning`'s Adam, used
  here, puts it outside. Pass `server_optimizer_fn=build_yogi(...)` or
  `build_adagrad(...)` to `build_fed_avg` for FedYogi / FedAdagrad.

  Other keyword arguments are those of `build_fed_avg`.
  """
  if 'server_optimizer_fn' in kwargs:
    raise TypeError(
        'build_fed_adam sets the server optimizer; use build_fed_avg to pass '
        'server_optimizer_fn.'
    )
  server_optimizer = tff.learning.optimizers.build_adam(
      learning_rate=server_learning_rate,
      beta_1=beta_1,
      beta_2=beta_2,
      epsilon=epsilon,
  )
  return build_fed_avg(
      model_fn,
      client_optimizer_fn,
      server_optimizer,
      num_local_steps=num_local_steps,
      **kwargs,
  )


def build_adaptive_fed_opt(
    model_fn: common.ModelFn,
    client_optimizer_fn: common.OptimizerFn,
    *,
    optimizer: Union[str, optimizers.AdaptiveOptimizer] = 'adam',
    server_learning_rate: float,
    num_local_steps: schedules.ScheduleOrValue,
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
    server_learning_rate: eta_s, a number >= 0.
    beta, beta_1, beta_2, epsilon: The optimizer's hyper-parameters (see
      `tff_mixed.optimizers`); None keeps its default.
    client_weighting: `UNIFORM` (default) or `NUM_EXAMPLES`.
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
  server_optimizer = optimizers.build_tff_optimizer(
      adaptive, server_learning_rate, frozen_statistics=False)
  return build_fed_avg(
      model_fn, client_optimizer_fn, server_optimizer,
      num_local_steps=num_local_steps, client_weighting=client_weighting,
      flops_per_example=flops_per_example, **kwargs)
