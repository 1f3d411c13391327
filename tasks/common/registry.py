"""What a run trains, and one algorithm registry for every binary.

`AlgorithmConfig` is a frozen description of what to train (the algorithm,
its optimizers, K and learning-rate schedules, mixed FL's weights); a
`tasks.common.run_spec.RunSpec` holds it beside how the run goes
(`tasks.common.run_config`), and `tasks.common.task_registry.spec` reads
all three from a binary's flags, once (experiment scripts build an
`AlgorithmConfig` directly).
`ALGORITHMS` maps each `--algorithm` name to its builder and what it needs;
`build_process(config, ...)` is the one dispatch. Adding an algorithm
variant is one builder in `tff_mixed.algorithms` plus one entry here.
"""

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Optional, Union

import tensorflow as tf
import tensorflow_federated as tff

from tasks.common import parts
from tff_mixed import algorithms
from tff_mixed import optimizers
from tff_mixed import schedules
from tff_mixed.algorithms import mixed_fl
from tff_mixed.templates import client_groups as client_groups_lib

# The optimizers a config names (`parts`), here too: the flags and configs
# say `registry.OptimizerSpec`.
OPTIMIZERS = parts.OPTIMIZERS
OPTIMIZER_HPARAMS = parts.OPTIMIZER_HPARAMS
OptimizerSpec = parts.OptimizerSpec


@dataclasses.dataclass(frozen=True)
class AlgorithmConfig:
  """What the registry builds: an algorithm and its hyper-parameters.

  `None` means the builder's default, all the way down.

  Attributes:
    algorithm: A key of `ALGORITHMS`.
    num_local_steps: K: an int or a `tff_mixed.schedules.Schedule`.
    client_learning_rate: None, or a schedule of the client learning rate.
    server_learning_rate: None, or a schedule of the server learning rate
      (fedavg, fedadam, adaptive_fed_opt); its first value overrides
      `server.learning_rate`.
    server_adam: fedadam's Adam, 'tff' or 'seed000'
      (`tff_mixed.algorithms.build_fed_adam`).
    client, server, central, merge: The `tff.learning` optimizers (server:
      FedAvg's, FedAdam's Adam, mixed FL's; central and merge: mixed FL's):
      an `OptimizerSpec` (by name, what the flags give), or from code any
      `tff.learning.optimizers.Optimizer` of your own (recorded as
      code-only: a restart must pass it again; `parts`).
    adaptive: Seed 003's optimizer (`--optimizer`) for `adaptive_fed_opt`,
      `fed_gbo`, `mimelite`, `mfl`.
    federated_weight, central_weight, num_central_steps,
    central_shuffle_buffer, gradient_dissimilarity: Mixed FL's (seed 004).
    client_weighting: None (the builder's default), a
      `tff.learning.ClientWeighting`, or 'dataset_size' (|D_i|, seed 000
      Alg. 1: `tff_mixed.templates.DATASET_SIZE`).
    proximal_strength: FedProx's mu (`fedprox`).
    aggregator: One of `parts.AGGREGATORS` (`parts.model_aggregator`); with 'dp',
      `clip` (C) and `noise_multiplier` (z), and `dp_delta`, the delta of
      the (epsilon, delta) guarantee metrics.csv reports each round (None:
      1 / the number of training clients); with 'compression',
      `compression_threshold` and `compression_bits`
      (`tff_mixed.aggregators.compression`'s; None: TFF's 20,000 and 8).
      From code, also any
      `tff.aggregators` factory of your own (code-only, as above).
  """
  algorithm: str = 'fedavg'
  num_local_steps: schedules.ScheduleOrValue = 10
  client_learning_rate: Optional[schedules.Schedule] = None
  server_learning_rate: Optional[schedules.Schedule] = None
  server_adam: str = 'tff'
  client: parts.OptimizerPart = OptimizerSpec(learning_rate=0.1)
  server: parts.OptimizerPart = OptimizerSpec()
  central: parts.OptimizerPart = OptimizerSpec()
  merge: parts.OptimizerPart = OptimizerSpec()
  adaptive: Optional[optimizers.AdaptiveOptimizer] = None
  federated_weight: float = 0.5
  central_weight: float = 0.5
  num_central_steps: Optional[int] = None
  central_shuffle_buffer: int = 0
  gradient_dissimilarity: bool = False
  client_weighting: Optional[Union[tff.learning.ClientWeighting, str]] = None
  proximal_strength: Optional[float] = None
  aggregator: Any = 'mean'  # A name of `parts.AGGREGATORS`, or a factory.
  clip: Optional[float] = None
  noise_multiplier: Optional[float] = None
  dp_delta: Optional[float] = None
  compression_threshold: Optional[int] = None
  compression_bits: Optional[int] = None


def __getattr__(name):
  if name == 'RunConfig':
    raise AttributeError(
        'tasks.common.registry.RunConfig moved to '
        'tasks.common.run_config.RunConfig, and how a run executes (rounds, '
        'output_dir, fast mode, ...) to run_config.Execution, a RunSpec\'s '
        '`execution` (CHANGELOG.md, 2026-11-28).')
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


BuildFn = Callable[..., tff.learning.templates.LearningProcess]


class Algorithm(NamedTuple):
  """A registry entry: `build(config, model_fn, central_data_fn,
  flops, run)` (`flops`: the task's, `run`: a `_FromRun`) and what the
  algorithm needs."""
  build: BuildFn
  needs_central_data: bool = False
  takes_seed003_optimizer: bool = False  # `AlgorithmConfig.adaptive`.
  summary: str = ''


class _FromRun(NamedTuple):
  """What a build takes from the run: the mode, the seed and the cohort."""
  client_groups: Optional[client_groups_lib.ClientGroups] = None
  seed: int = 0
  clients_per_round: int = 10


def _fed_avg(config, model_fn, central_data_fn, flops, run):
  """FedAvg, or FedProx (FedAvg with the proximal term) for `fedprox`."""
  del central_data_fn
  build, proximal = algorithms.build_fed_avg, {}
  if config.algorithm == 'fedprox':
    build = algorithms.build_fed_prox
    proximal = dict(proximal_strength=config.proximal_strength)
  return build(
      model_fn, parts.built(config.client, 'client'),
      parts.built(config.server, 'server'), **proximal,
      num_local_steps=config.num_local_steps,
      client_learning_rate=config.client_learning_rate,
      server_learning_rate=config.server_learning_rate,
      **parts.sgd_flops(config, flops),
      **parts.client_kwargs(config, run))


def _server_learning_rate(config):
  """The server learning rate (a schedule, or a number) the config gives;
  none: the builder's default."""
  rate = config.server_learning_rate or getattr(
      config.server, 'learning_rate', None)  # An object's rate is its own.
  return {} if rate is None else dict(server_learning_rate=rate)


def _fed_adam(config, model_fn, central_data_fn, flops, run):
  del central_data_fn
  server = parts.spec_only(config, 'server')
  return algorithms.build_fed_adam(
      model_fn, parts.built(config.client, 'client'),
      num_local_steps=config.num_local_steps,
      client_learning_rate=config.client_learning_rate,
      **_server_learning_rate(config),
      beta_1=server.beta_1, beta_2=server.beta_2, epsilon=server.epsilon,
      adam=config.server_adam,
      **parts.sgd_flops(config, flops),
      **parts.client_kwargs(config, run))


def _mixed_fl(mixing):
  def build(config, model_fn, central_data_fn, flops, run):
    del flops
    central = (None if isinstance(config.central, OptimizerSpec)
               and config.central.name == 'sgd'
               and config.central.learning_rate is None
               else parts.built(config.central, 'central'))  # None: client lr
    # x server lr.
    return algorithms.build_mixed_fl(
        model_fn, parts.built(config.client, 'client'),
        parts.built(config.server, 'server'),
        central_data_fn=central_data_fn, mixing=mixing,
        num_local_steps=config.num_local_steps,
        central_optimizer_fn=central,
        merge_optimizer_fn=parts.built(config.merge, 'merge'),
        federated_weight=config.federated_weight,
        central_weight=config.central_weight,
        num_central_steps=config.num_central_steps,
        client_learning_rate=config.client_learning_rate,
        central_seed=run.seed,
        central_shuffle_buffer=config.central_shuffle_buffer,
        gradient_dissimilarity=config.gradient_dissimilarity,
        **parts.client_kwargs(config, run))
  return build


def _adaptive_fed_opt(config, model_fn, central_data_fn, flops, run):
  del central_data_fn
  return algorithms.build_adaptive_fed_opt(
      model_fn, parts.built(config.client, 'client'), optimizer=config.adaptive,
      **_server_learning_rate(config),
      num_local_steps=config.num_local_steps,
      client_learning_rate=config.client_learning_rate,
      **parts.sgd_flops(config, flops),
      **parts.client_kwargs(config, run))


def _global_statistics(builder):
  def build(config, model_fn, central_data_fn, flops, run):
    del central_data_fn
    return builder(
        model_fn,
        optimizers.build_tff_optimizer(
            config.adaptive, parts.spec_only(config, 'client').learning_rate,
            frozen_statistics=False),
        num_local_steps=config.num_local_steps,
        client_learning_rate=config.client_learning_rate,
        flops_per_example=flops.per_example, **parts.client_kwargs(config, run))
  return build


def _oracle(config, model_fn, central_data_fn, flops, run):
  """FedAvg of one client holding the pooled data (`tasks.common.oracle`): K SGD
  steps at the client learning rate, applied as they are (server SGD lr 1),
  i.e. centralised SGD."""
  del central_data_fn
  return algorithms.build_fed_avg(
      model_fn, parts.built(config.client, 'client'),
      num_local_steps=config.num_local_steps,
      client_learning_rate=config.client_learning_rate,
      **parts.sgd_flops(config, flops),
      **parts.client_kwargs(config, run))


ALGORITHMS: Mapping[str, Algorithm] = {
    'fedavg': Algorithm(
        _fed_avg, summary='server optimizer from --server_optimizer (SGD lr '
        '1 is FedAvg, another lr FedSGD)'),
    'fedadam': Algorithm(_fed_adam, summary='Adam on the server'),
    'fedprox': Algorithm(
        _fed_avg, summary='FedAvg whose clients add the proximal term '
        '(--proximal_strength/2) ||x - x_t||^2 (Li et al. 2020)'),
    **{mixing: Algorithm(_mixed_fl(mixing), needs_central_data=True,
                         summary='mixed FL (seed 004) with the task\'s '
                         'central data')
       for mixing in mixed_fl.MIXINGS},
    'adaptive_fed_opt': Algorithm(
        _adaptive_fed_opt, takes_seed003_optimizer=True,
        summary='--optimizer on the server (seed 003)'),
    'fed_gbo': Algorithm(
        _global_statistics(algorithms.build_fed_gbo), takes_seed003_optimizer=True,
        summary='--optimizer on clients, global statistics (seed 003)'),
    'mimelite': Algorithm(
        _global_statistics(algorithms.build_mimelite), takes_seed003_optimizer=True,
        summary='seed 003\'s Mimelite'),
    'mfl': Algorithm(
        _global_statistics(algorithms.build_mfl), takes_seed003_optimizer=True,
        summary='seed 003\'s MFL'),
    'oracle': Algorithm(
        _oracle, summary='centralised SGD on the pooled training and central '
        'data, K steps a round on batches of clients_per_round x B (seed 004 '
        '§5\'s oracle)'),
}
NAMES = tuple(ALGORITHMS)
ADAPTIVE = tuple(n for n, a in ALGORITHMS.items() if a.takes_seed003_optimizer)


def build_process(
    config: AlgorithmConfig, model_fn, *,
    central_data_fn: Optional[Callable[[], tf.data.Dataset]] = None,
    flops_per_example: Optional[float] = None,
    flops_per_step: Optional[Callable[[tf.Tensor], tf.Tensor]] = None,
    client_groups: Optional[client_groups_lib.ClientGroups] = None,
    seed: int = 0,
    clients_per_round: int = 10,
) -> tff.learning.templates.LearningProcess:
  """The process `config.algorithm` names.

  `flops_per_example` or `flops_per_step` are the task's
  (`Task.flops_per_example`, `Task.flops_per_step`): SGD clients report
  their FLOPs with them. `client_groups` (fast mode, as a run's
  `Execution.client_groups`; None: one dataset per client), `seed` (mixed
  FL's central shuffle, the DP noise) and `clients_per_round` (the DP
  mean's denominator) come from the run.

  Raises:
    ValueError: For an unknown algorithm, or one that needs central data
      the task does not give.
  """
  if config.algorithm not in ALGORITHMS:
    raise ValueError(f'algorithm must be one of {NAMES}, got '
                     f'{config.algorithm!r}.')
  entry = ALGORITHMS[config.algorithm]
  if entry.needs_central_data and central_data_fn is None:
    raise ValueError(f'algorithm {config.algorithm} needs central data, '
                     'which this task does not have with these flags.')
  flops = parts.Flops(flops_per_example, flops_per_step)
  return entry.build(config, model_fn, central_data_fn, flops,
                     _FromRun(client_groups, seed, clients_per_round))
