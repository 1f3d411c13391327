"""`run`: the one way into a run, for every binary, comparison and demo."""

import contextlib
import dataclasses
import functools
from typing import Optional

import numpy as np
import tensorflow_federated as tff

from tasks.common import oracle
from tasks.common import parts
from tasks.common import registry
from tasks.common import run_config as run_config_lib
from tasks.common import run_spec
from tasks.common import sources
from tasks.common import task_registry
from tff_mixed import aggregators
from tff_mixed import driver
from tff_mixed import execution
from tff_mixed.task import Task


class ConfigError(ValueError):
  """An algorithm configuration the task or the builders cannot run; one
  line (the flags' layer names the flag)."""


class MissingCentralDataError(ConfigError):
  """A mixed FL algorithm on a task without central data."""


class WorkerError(RuntimeError):
  """TFF workers that cannot be started or reached; one line."""


def run(spec: run_spec.RunSpec) -> driver.ExperimentResult:
  """Runs `spec` through the driver: the one way into a run, for every
  binary, comparison, demo and notebook.

  The task is the task registry's (`tasks.common.task_registry`: the
  task, its central data and, for a task that builds its own, the
  process); the process is `tasks.common.registry.build_process(
  spec.algorithm, ...)` in the mode `spec.execution.client_groups` says,
  built
  once the driver has checked the output directory, so a clash fails at
  once. `--algorithm=oracle` trains on the task's pooled data
  (`tasks.common.oracle`). Workers other than the default one are started
  first, and the run's computations run on `spec.execution.runtime`
  (`execution_of`). Seed 004 App. C.1's mixing probe is its own entry,
  `tasks.common.mixing_probe.run_probe(spec, ...)`.

  Args:
    spec: The run. Its output directory may hold the same run recorded by
      an older tff_mixed (flags, schema 0; the spec with its execution
      inside, schema 1): it resumes there, its record kept as written
      (`saved_run.resume_record`).

  Returns:
    The driver's `ExperimentResult` (with the process it trained).

  Raises:
    ConfigError: One line: a task or algorithm that cannot run (e.g. mixed
      FL without central data), or that a builder refuses.
    tasks.common.sources.DataUnavailableError: The task's data is missing
      or does not read (one line).
    tff_mixed.driver.RunError: One line, for what the driver refuses.
    WorkerError: Workers that cannot be started or reached.
  """
  algorithm, run_config = spec.algorithm, spec.run
  check_workers(spec.execution)
  record = record_of(spec)  # Another run there: refused before the data.
  task, central_data_fn, process_fn = build_task(spec)
  round_columns = _round_columns(spec, task)  # The task's, not the oracle's.
  if algorithm.aggregator == 'dp':
    print(dp_summary(algorithm, run_config.clients_per_round,
                     spec.execution.rounds, len(task.train_client_ids)))
  if algorithm.aggregator == 'compression':
    note = compression_note(task.model_fn,
                            parts.compression_settings(algorithm)[0])
    if note:
      print(note)
  if algorithm.algorithm == 'oracle':
    print(f'oracle: {len(task.train_client_ids)} clients'
          f'{" and the central data" if central_data_fn else ""} pooled; '
          f'batches of {run_config.clients_per_round} x the largest client '
          'batch.')
    task, central_data_fn, run_config = _oracle(task, central_data_fn,
                                                run_config)
  with execution_of(spec.execution):
    return driver.run_experiment(
        task, lambda: _process(task, algorithm, run_config, spec.execution,
                               central_data_fn, process_fn),
        config=record, round_columns=round_columns,
        **run_config_lib.driver_arguments(run_config, spec.execution))


def record_of(spec: run_spec.RunSpec) -> dict:
  """What config.json records of `spec`: the spec's record, or the same
  run's older record already in its output directory, kept as written
  (`saved_run.resume_record`), with how it is started now beside it
  (`run_spec.execution_record`: never compared on resume).

  Raises:
    tff_mixed.driver.OutputDirError: One line, for a directory holding
      another run.
  """
  # saved_run reads runs back with this module.
  from tasks.common import saved_run  # pylint: disable=g-import-not-at-top
  return {**saved_run.resume_record(spec),
          driver.EXECUTION: run_spec.execution_record(spec)}


def _round_columns(spec: run_spec.RunSpec, task: Task):
  """The driver's `round_columns` of a run: DP's epsilon after r rounds."""
  algorithm = spec.algorithm
  if algorithm.aggregator != 'dp':
    return None
  clients = len(task.train_client_ids)
  return aggregators.epsilon_columns(
      algorithm.noise_multiplier, spec.run.clients_per_round / clients,
      dp_delta(algorithm, clients))


def columns(spec: run_spec.RunSpec) -> list[str]:
  """The `metrics.csv` columns `run(spec)` writes, known before it trains
  (`tff_mixed.driver.metrics_columns` of the task and process `build`
  gives): what a grid checks its summaries' columns against before any of
  its runs starts. The task is built as the run builds it (its data read,
  or fetched where the run would fetch it).

  Raises:
    As `build`.
  """
  task, process, round_columns = _built(spec)
  arguments = run_config_lib.driver_arguments(spec.run, spec.execution)
  return driver.metrics_columns(
      task, process, on_non_finite=arguments['on_non_finite'],
      round_columns=round_columns,
      eval_plateaus=arguments['eval_plateaus'],
      train_eval_clients=arguments['train_eval_clients'],
      seed=arguments['seed'])


def compression_note(model_fn, threshold: int) -> Optional[str]:
  """One line when `--aggregator=compression` compresses nothing: no
  trainable tensor of the model has more than `threshold` elements, so the
  run is `robust`'s (TFF's adaptive zeroing and clipping) and the uploads
  are full size; None otherwise."""
  sizes = [int(np.prod(v.shape)) for v in model_fn().trainable_variables]
  largest = max(sizes, default=0)
  if largest > threshold:
    return None
  return (f'Note: --aggregator=compression quantises only tensors of more '
          f'than {threshold:,} elements (--compression_threshold); this '
          f'model\'s largest has {largest:,}, so nothing is compressed: the '
          'run is --aggregator=robust\'s and its uploads are full size.')


def dp_delta(algorithm: registry.AlgorithmConfig, clients: int) -> float:
  """The delta a DP run reports: `algorithm.dp_delta`, or 1 / clients."""
  return algorithm.dp_delta if algorithm.dp_delta is not None else 1 / clients


def dp_summary(algorithm: registry.AlgorithmConfig, clients_per_round: int,
               rounds: int, clients: int) -> str:
  """One line: DP-FedAvg's clip and noise and the client-level epsilon of
  `rounds` rounds of `clients_per_round` of `clients` at its delta
  (`dp_delta`; `aggregators.epsilon`), which metrics.csv then records
  round by round (dp/epsilon)."""
  delta = dp_delta(algorithm, clients)
  epsilon = aggregators.epsilon(
      algorithm.noise_multiplier, clients_per_round / clients, rounds, delta)
  said = (f'1/{clients}' if algorithm.dp_delta is None
          else f'{algorithm.dp_delta:g}')
  return (f'DP-FedAvg: clip {algorithm.clip:g}, noise multiplier '
          f'{algorithm.noise_multiplier:g}, {clients_per_round} of '
          f'{clients} clients a round: epsilon ~= {epsilon:.3g} at delta = '
          f'{said} after {rounds} rounds (client-level; RDP '
          'accountant, cohorts taken as Poisson samples; metrics.csv has '
          'dp/epsilon for each round).')


def check_workers(config: run_config_lib.Execution) -> None:
  """Several workers are TFF's runtime's, Ray's options Ray's.

  Raises:
    WorkerError: One line, for several workers on another runtime.
  """
  if (config.local_workers != 1 or config.workers) and (
      config.runtime != execution.TFF):
    raise WorkerError(
        '--workers/--local_workers: several TFF workers are TFF\'s runtime; '
        f'add --runtime=tff (runtime={config.runtime} runs in this '
        'process).')
  for runtime, names in ((execution.RAY, RAY_OPTIONS),
                        (execution.IN_PROCESS, ('concurrency',))):
    given = [name for name in names if getattr(config, name) != getattr(
        run_config_lib.Execution, name)]
    if given and config.runtime != runtime:
      raise WorkerError(
          f'{", ".join("--" + n for n in given)}: the {runtime} runtime\'s; '
          f'add --runtime={runtime} (runtime={config.runtime} does not '
          'use it).')


# `Execution`'s options of the ray runtime, as `execution.ray_context`
# names them.
RAY_OPTIONS = {'ray_workers': 'workers', 'ray_address': 'address',
               'ray_gpus_per_worker': 'gpus_per_worker'}


@contextlib.contextmanager
def execution_of(config: run_config_lib.Execution):
  """Within it, computations run as `config` (a run's execution) says:
  its workers started (other than the default one) and its runtime
  (`tff_mixed.execution.running_on`).

  Raises:
    WorkerError: Workers that cannot be started or reached (one line).
  """
  if config.local_workers != 1 or config.workers:
    try:
      execution.set_multi_worker_context(
          local_workers=config.local_workers,
          addresses=config.workers)
    except (RuntimeError, ValueError) as e:
      raise WorkerError(f'--workers/--local_workers: {e}') from None
  options = {}
  if config.runtime == execution.IN_PROCESS and config.concurrency:
    options = dict(concurrency=config.concurrency)
  if config.runtime == execution.RAY:
    options = {option: getattr(config, name)
               for name, option in RAY_OPTIONS.items()}
    options['workers'] = options['workers'] or None
    try:
      execution.ray_context(**options)
    except (RuntimeError, ValueError) as e:
      raise WorkerError(f'--runtime=ray: {e}') from None
  with execution.running_on(config.runtime, **options):
    yield


def build_task(spec: run_spec.RunSpec):
  """The spec's task (with `spec.run.client_shuffle`), central data and
  own process (`task_registry`), checked against what the algorithm and
  the task's process need.

  Raises:
    ConfigError: One line, for a task the registry cannot build, or an
      algorithm it cannot run.
    tasks.common.sources.DataUnavailableError: Missing data (one line).
  """
  algorithm = spec.algorithm
  if algorithm.algorithm not in registry.ALGORITHMS:
    raise ConfigError(f'algorithm must be one of {registry.NAMES}, got '
                      f'{algorithm.algorithm!r}.')
  try:
    built = task_registry.build(spec.task, spec.task_args, spec.algorithm,
                                spec.run)
  except sources.DataUnavailableError:
    raise
  except ValueError as e:
    raise ConfigError(str(e)) from e
  for field, (value, why) in built.run_needs.items():
    given = getattr(spec.execution if field in run_config_lib.EXECUTION
                    else spec.run, field)
    if given != value:
      raise ConfigError(
          f'{spec.algorithm.algorithm} on task {spec.task} needs '
          f'{field}={value!r} ({why}), got {given!r}.')
  changes = dict(rebuild=functools.partial(
      _rebuilt_task, spec, task_registry.registered(spec.task)))
  if spec.run.client_shuffle not in (None, built.task.client_shuffle):
    changes['client_shuffle'] = spec.run.client_shuffle
  try:
    task = dataclasses.replace(built.task, **changes)
  except ValueError as e:
    raise ConfigError(str(e)) from e
  if built.process_fn is not None and spec.algorithm.algorithm == 'oracle':
    raise ConfigError('oracle pools the data of tasks trained by the '
                      'registry; this task builds its own process.')
  if built.process_fn is not None and spec.algorithm.aggregator != 'mean':
    raise ConfigError(
        f'aggregator={spec.algorithm.aggregator}: task {spec.task} builds '
        'its own process for this algorithm, which takes the plain mean only.')
  if (registry.ALGORITHMS[algorithm.algorithm].needs_central_data
      and built.central_data_fn is None and built.process_fn is None):
    raise MissingCentralDataError(
        f'{algorithm.algorithm} needs central data, which task {spec.task} '
        'does not have with these arguments.')
  return task, built.central_data_fn, built.process_fn


def _rebuilt_task(spec: run_spec.RunSpec, registered) -> Task:
  """The spec's task built again (`Task.rebuild`: in a Ray actor, for its
  clients' data), with the build function registered from code, if any."""
  if registered is not None and task_registry.registered(spec.task) is None:
    task_registry.register(spec.task, registered)
  return build_task(spec)[0]


def _oracle(task, central_data_fn, run_config):
  """The oracle's task (`tasks.common.oracle`: the pooled data, one client
  a round), its central data (none) and run."""
  return (oracle.pooled_task(task, central_data_fn,
                             run_config.clients_per_round), None,
          dataclasses.replace(run_config, clients_per_round=1))


def _process(task, algorithm, run_config, execution_config, central_data_fn,
             process_fn):
  try:
    if process_fn is not None:
      return process_fn()
    return registry.build_process(
        algorithm, task.model_fn, central_data_fn=central_data_fn,
        flops_per_example=task.flops_per_example,
        flops_per_step=task.flops_per_step,
        client_groups=execution_config.client_groups, seed=run_config.seed,
        clients_per_round=run_config.clients_per_round)
  except ValueError as e:
    raise ConfigError(str(e)) from e


def build(spec: run_spec.RunSpec
          ) -> tuple[Task, tff.learning.templates.LearningProcess]:
  """The task and process `run(spec)` trains (the oracle's pooled task),
  built without training: what a saved run's checkpoints were written by."""
  return _built(spec)[:2]


def _built(spec: run_spec.RunSpec):
  """`build(spec)`, and the run's `round_columns` (of the task's clients,
  not the oracle's one pooled client)."""
  task, central_data_fn, process_fn = build_task(spec)
  round_columns = _round_columns(spec, task)
  run_config = spec.run
  if spec.algorithm.algorithm == 'oracle':
    task, central_data_fn, run_config = _oracle(task, central_data_fn,
                                                run_config)
  return task, _process(task, spec.algorithm, run_config, spec.execution,
                        central_data_fn, process_fn), round_columns
