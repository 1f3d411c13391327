"""The optimizers and aggregators an `AlgorithmConfig` names or holds.

By name: an `OptimizerSpec` (what the `--{side}_optimizer` flags give) and
`AGGREGATORS`' names (`model_aggregator`). From code: any `tff.learning` optimizer or
`tff.aggregators` factory of the researcher's own, used as it is and
recorded as code-only (`is_code_only`). And what every K-step builder takes
of them (`client_kwargs`, `sgd_flops`).
"""

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple, Optional, Union

import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed import aggregators as tff_aggregators
from tff_mixed import checks

# `tff.learning` optimizers the `--{side}_optimizer` flags name.
OPTIMIZERS = ('sgd', 'sgdm', 'adam', 'yogi', 'adagrad', 'rmsprop')
# The `OptimizerSpec` fields each optimizer reads besides the learning rate.
OPTIMIZER_HPARAMS = {
    'sgd': (), 'sgdm': ('momentum',),
    'adam': ('beta_1', 'beta_2', 'epsilon'),
    'yogi': ('beta_1', 'beta_2', 'epsilon'),
    'adagrad': ('epsilon',), 'rmsprop': ('beta_2', 'epsilon'),
}


@dataclasses.dataclass(frozen=True)
class OptimizerSpec:
  """A `tff.learning.optimizers` optimizer by name and hyper-parameters.

  `learning_rate=None` leaves the rate to the algorithm's default.
  """
  name: str = 'sgd'
  learning_rate: Optional[float] = None
  momentum: float = 0.9
  beta_1: float = 0.9
  beta_2: float = 0.99
  epsilon: float = 1e-3

  def build(self, default_learning_rate: float = 1.0
            ) -> tff.learning.optimizers.Optimizer:
    """The `tff.learning` optimizer this names, at `learning_rate` (or
    `default_learning_rate` when it gives none)."""
    lr = (default_learning_rate if self.learning_rate is None
          else self.learning_rate)
    opt = tff.learning.optimizers
    if self.name == 'sgd':
      return opt.build_sgdm(learning_rate=lr)
    if self.name == 'sgdm':
      return opt.build_sgdm(learning_rate=lr, momentum=self.momentum)
    if self.name == 'adam':
      return opt.build_adam(lr, beta_1=self.beta_1, beta_2=self.beta_2,
                            epsilon=self.epsilon)
    if self.name == 'yogi':
      return opt.build_yogi(lr, beta_1=self.beta_1, beta_2=self.beta_2,
                            epsilon=self.epsilon)
    if self.name == 'adagrad':
      return opt.build_adagrad(lr, epsilon=self.epsilon)
    if self.name == 'rmsprop':
      return opt.build_rmsprop(lr, decay=self.beta_2, epsilon=self.epsilon)
    raise ValueError(f'optimizer must be one of {OPTIMIZERS}, got '
                     f'{self.name!r}.')



# An `AlgorithmConfig` optimizer: by name, or a researcher's own object.
OptimizerPart = Union[OptimizerSpec, tff.learning.optimizers.Optimizer]
FACTORIES = (tff.aggregators.WeightedAggregationFactory,
              tff.aggregators.UnweightedAggregationFactory)


def is_code_only(part) -> bool:
  """Whether an `AlgorithmConfig` part is an object given in code (an
  optimizer or aggregator of the researcher's own), not a name."""
  return isinstance(part, (tff.learning.optimizers.Optimizer, FACTORIES))


def built(part: OptimizerPart, name: str,
           default_learning_rate: float = 1.0):
  """`part` (the config's `name`) as a `tff.learning` optimizer: an
  `OptimizerSpec` built, a researcher's own optimizer as it is."""
  if isinstance(part, OptimizerSpec):
    return part.build(default_learning_rate)
  if isinstance(part, tff.learning.optimizers.Optimizer):
    return part
  raise ValueError(f'{name} must be an OptimizerSpec or a '
                   'tff.learning.optimizers.Optimizer, got '
                   f'{checks.a_kind(part)}.')


def spec_only(config, name: str) -> OptimizerSpec:
  """The config's `name` optimizer, which this algorithm reads by its
  hyper-parameters (so it cannot be an object of your own)."""
  part = getattr(config, name)
  if not isinstance(part, OptimizerSpec):
    raise ValueError(f'{config.algorithm} reads its {name} optimizer\'s '
                     'hyper-parameters, so it must be an OptimizerSpec, got '
                     f'{checks.a_kind(part)}.')
  return part


# `AlgorithmConfig.aggregator`: the builders' default weighted mean, TFF's
# robust aggregator (adaptive clipping and zeroing), DP-FedAvg with fixed
# clipping (`tff_mixed.aggregators.gaussian_fixed`, which fast mode runs too)
# and TFF's compression aggregator (uniform quantisation of large tensors;
# `tff_mixed.aggregators.compression`, its threshold and bits settable).
AGGREGATORS = ('mean', 'robust', 'dp', 'compression')
# Those that act on each client's update: one TFF client per client.
PER_CLIENT_AGGREGATORS = ('robust', 'compression')


def compression_settings(config) -> tuple[int, int]:
  """`(threshold, bits)` of `--aggregator=compression`, TFF's defaults for
  what `config` leaves None."""
  return (tff_aggregators.COMPRESSION_THRESHOLD
          if config.compression_threshold is None
          else config.compression_threshold,
          tff_aggregators.COMPRESSION_BITS if config.compression_bits is None
          else config.compression_bits)


def model_aggregator(config, clients_per_round: int, seed: int):
  """The `model_aggregator` `config.aggregator` names (None: the mean), or
  the factory it is."""
  if isinstance(config.aggregator, FACTORIES):
    return config.aggregator
  if config.aggregator == 'mean':
    return None
  if config.aggregator == 'robust':
    return tff.learning.robust_aggregator()
  if config.aggregator == 'compression':
    return tff_aggregators.compression(*compression_settings(config))
  if config.aggregator == 'dp':
    return tff_aggregators.gaussian_fixed(
        config.noise_multiplier, clients_per_round, config.clip, seed=seed)
  raise ValueError(f'aggregator must be one of {AGGREGATORS}, got '
                   f'{config.aggregator!r}.')


def client_kwargs(config, run):
  """The client weighting, aggregator and mode every K-step builder takes
  (`run`: the mode, seed and cohort of `registry.build_process`)."""
  kwargs = dict(client_groups=run.client_groups)
  if config.client_weighting is not None:
    kwargs.update(client_weighting=config.client_weighting)
  aggregator = model_aggregator(config, run.clients_per_round, run.seed)
  if aggregator is not None:
    kwargs.update(model_aggregator=aggregator)
  return kwargs


class Flops(NamedTuple):
  """The task's FLOPs of a client's work: per example (seed 003 Eq. 22) or
  the task's own count of a step (`Task.flops_per_step`)."""
  per_example: Optional[float] = None
  per_step: Optional[Callable[[tf.Tensor], tf.Tensor]] = None


def sgd_flops(config, flops: Flops) -> dict[str, Any]:
  """The FLOPs keyword an SGD client's builder takes; other clients report
  no FLOPs (seed 003 Eq. 22 counts SGD)."""
  if not (isinstance(config.client, OptimizerSpec)
          and config.client.name == 'sgd'):
    return {}
  if flops.per_step is not None:
    return dict(flops_per_step=flops.per_step)
  return dict(flops_per_example=flops.per_example)
