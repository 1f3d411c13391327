"""`run`: the one way into a run, for every binary, comparison and demo."""

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Optional

import tensorflow as tf
import tensorflow_federated as tff

from tasks.common import oracle
from tasks.common import mixing_probe
from tasks.common import parts
from tasks.common import registry
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


def describe(algorithm: registry.AlgorithmConfig) -> dict[str, Any]:
  """`algorithm` as `config.json` records a configuration that was not read
  from flags: each field, its `repr` where it is not a plain value, and
  `code-only: <type>` for an optimizer or aggregator object of your own
  (its settings are not recorded: a restart must pass the same again)."""
  plain = (str, int, float, bool, type(None))

  def recorded(value):
    if parts.is_code_only(value):
      return f'code-only: {type(value).__module__}.{type(value).__name__}'
    return value if isinstance(value, plain) else repr(value)

  return {f.name: recorded(getattr(algorithm, f.name))
          for f in dataclasses.fields(registry.AlgorithmConfig)}


def run(
    task: Task,
    algorithm: registry.AlgorithmConfig,
    run_config: registry.RunConfig,
    central_data_fn: Optional[Callable[[], tf.data.Dataset]] = None,
    *,
    record: Optional[Mapping[str, Any]] = None,
    process_fn: Optional[
        Callable[[], tff.learning.templates.LearningProcess]] = None,
) -> Any:
  """Runs `algorithm` on `task` as `run_config` says, through the driver.

  The process is `tasks.common.registry.build_process(algorithm, ...)` in the mode
  `run_config.client_groups` says (or `process_fn()` for a task that builds
  its own), built once the driver has checked the output directory, so a
  clash fails at once. `--algorithm=oracle` trains on the task's pooled
  data (`tasks.common.oracle`); `run_config.mixing_probe` runs seed 004 App. C.1's
  probe instead of training (`tasks.common.mixing_probe`). Workers other
  than the default one are started first, and the run's computations run
  on `run_config.runtime` (`tff_mixed.execution.running_on`).

  Args:
    task: The `Task`.
    algorithm: What to train.
    run_config: How the run goes.
    central_data_fn: The central data of a mixed FL algorithm (or the data
      the oracle pools with the clients').
    record: What `config.json` records (`ExperimentConfig.record`: the flags'
      names, whatever started the run); default `describe(algorithm)`.
    process_fn: For a task that builds its own process (MovieLens).

  Returns:
    The driver's `ExperimentResult` (with the process it trained), or the
    probe's `recommend_mixing` advice.

  Raises:
    ConfigError: One line: an algorithm the task cannot run (e.g. mixed FL
      without central data), or that a builder refuses.
    tff_mixed.driver.RunError: One line, for what the driver refuses.
    WorkerError: Workers that cannot be started or reached.
  """
  if algorithm.algorithm not in registry.ALGORITHMS:
    raise ConfigError(f'algorithm must be one of {registry.NAMES}, got '
                      f'{algorithm.algorithm!r}.')
  entry = registry.ALGORITHMS[algorithm.algorithm]
  if entry.needs_central_data and central_data_fn is None and not process_fn:
    raise MissingCentralDataError(
        f'{algorithm.algorithm} needs central data, which this task does not '
        'have.')
  if record is None:
    record = describe(algorithm)
  if run_config.client_shuffle not in (None, task.client_shuffle):
    try:
      task = dataclasses.replace(task,
                                 client_shuffle=run_config.client_shuffle)
    except ValueError as e:
      raise ConfigError(str(e)) from e
  if algorithm.algorithm == 'oracle':
    if process_fn is not None:
      raise ConfigError('oracle pools the data of tasks trained by the '
                        'registry; this task builds its own process.')
    task, central_data_fn, run_config = _oracle(task, central_data_fn,
                                                run_config)
  if run_config.mixing_probe:
    if not entry.needs_central_data:
      raise ConfigError(f'the mixing probe is for the mixed FL algorithms, '
                        f'not {algorithm.algorithm}.')
    if run_config.mixing_probe_first_round > run_config.rounds:
      raise ConfigError(
          f'mixing_probe_first_round={run_config.mixing_probe_first_round} '
          f'is after the last of rounds={run_config.rounds}.')
  several_workers = run_config.local_workers != 1 or run_config.workers
  if several_workers and run_config.runtime != execution.TFF:
    raise WorkerError(
        'several TFF workers are TFF\'s runtime; add --runtime=tff '
        f'(runtime={run_config.runtime} runs in this process).')
  if several_workers:
    try:
      execution.set_multi_worker_context(
          local_workers=run_config.local_workers,
          addresses=run_config.workers)
    except (RuntimeError, ValueError) as e:
      raise WorkerError(str(e)) from None
  with execution.running_on(run_config.runtime):
    if run_config.mixing_probe:
      return mixing_probe.run_probe(task, algorithm, run_config,
                                    central_data_fn, record)
    return driver.run_experiment(
        task, lambda: _process(task, algorithm, run_config, central_data_fn,
                               process_fn),
        config=record, **run_config.driver_arguments())


def _oracle(task, central_data_fn, run_config):
  """The oracle's task (`tasks.common.oracle`: the pooled data, one client
  a round), its central data (none) and run."""
  return (oracle.pooled_task(task, central_data_fn,
                             run_config.clients_per_round), None,
          dataclasses.replace(run_config, clients_per_round=1))


def _process(task, algorithm, run_config, central_data_fn, process_fn):
  try:
    if process_fn is not None:
      return process_fn()
    return registry.build_process(
        algorithm, task.model_fn, central_data_fn=central_data_fn,
        flops_per_example=task.flops_per_example,
        client_groups=run_config.client_groups, seed=run_config.seed,
      clients_per_round=run_config.clients_per_round)
  except ValueError as e:
    raise ConfigError(str(e)) from e


def build(task: Task, algorithm: registry.AlgorithmConfig,
          run_config: registry.RunConfig,
          central_data_fn: Optional[Callable[[], tf.data.Dataset]] = None,
          process_fn: Optional[
              Callable[[], tff.learning.templates.LearningProcess]] = None,
          ) -> tuple[Task, tff.learning.templates.LearningProcess]:
  """The task and process `run` trains (the oracle's pooled task), built
  without training: what a saved run's checkpoints were written by."""
  if algorithm.algorithm == 'oracle':
    task, central_data_fn, run_config = _oracle(task, central_data_fn,
                                                run_config)
  return task, _process(task, algorithm, run_config, central_data_fn,
                        process_fn)
