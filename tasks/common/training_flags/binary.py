"""What a training binary's `main` does after reading its flags."""

import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Optional

from absl import app
import tensorflow as tf
import tensorflow_federated as tff

from tasks.common import registry
from tasks.common import outputs
from tasks.common import run as run_lib
from tasks.common.training_flags import schedule_groups
from tff_mixed import aggregators
from tff_mixed import driver
from tff_mixed.task import Task


# `capturing_runs`: where `run_task` records what it would run, or None.
_captured: Optional[list] = None


@contextlib.contextmanager
def capturing_runs():
  """Within it, `run_task` records `(task, config, central_data_fn,
  process_fn)` in the yielded list and returns None instead of training:
  how `tasks.common.saved_run` rebuilds a run the way its binary built it."""
  global _captured
  previous, _captured = _captured, []
  try:
    yield _captured
  finally:
    _captured = previous


def run_task(
    task: Task,
    config: registry.ExperimentConfig,
    central_data_fn: Optional[Callable[[], tf.data.Dataset]] = None,
    process_fn: Optional[
        Callable[[], tff.learning.templates.LearningProcess]] = None,
    central_data_flags: str = '',
) -> driver.ExperimentResult:
  """Runs `config`'s experiment on `task` (`tasks.common.run.run`), then
  plots `metrics.png` and prints a line of what it did.

  What the run refuses is one line naming the flag. `central_data_flags`
  names the flags that give this task central data, for the error when a
  mixed FL algorithm has none.
  """
  if process_fn is not None and config.aggregator != 'mean':
    raise app.UsageError(
        f'--aggregator={config.aggregator}: this binary builds its own '
        'process, which takes the plain mean only.')
  if _captured is not None:
    _captured.append((task, config, central_data_fn, process_fn))
    return None
  outputs.start_tff()
  if config.aggregator == 'dp':
    print(dp_summary(config, len(task.train_client_ids)))
  if config.algorithm == 'oracle':
    if process_fn is not None:
      raise app.UsageError(
          '--algorithm=oracle pools the data of tasks trained by the registry; '
          'this binary builds its own process.')
    print(f'oracle: {len(task.train_client_ids)} clients'
          f'{" and the central data" if central_data_fn else ""} pooled; '
          f'batches of {config.clients_per_round} x the largest client batch.')
  try:
    result = run_lib.run(task, config.algorithm_config, config.run_config,
                         central_data_fn, record=config.record,
                         process_fn=process_fn)
  except run_lib.MissingCentralDataError as e:
    raise app.UsageError(
        f'--algorithm={config.algorithm} needs central data, which this task '
        + (f'gets with {central_data_flags}.' if central_data_flags
           else 'does not have with these flags.')) from e
  except run_lib.ConfigError as e:
    raise app.UsageError(str(e)) from e
  except run_lib.WorkerError as e:
    sys.exit(f'Error: --workers/--local_workers: {e}')
  except driver.RunError as e:
    sys.exit(f'Error: {e}')
  except driver.EvalPlateauError as e:
    raise app.UsageError(
        f'{schedule_groups.monitor_flags(config.eval_plateaus)}: {e}') from e
  if config.mixing_probe:
    return result
  final = ', '.join(  # Counts as integers, metrics to 4 decimals.
      f'{k}={v:.0f}' if k.rsplit('/', 1)[-1].startswith('num_')
      else f'{k}={v:.4f}'
      for k, v in result.final_eval.items())
  plot = os.path.join(config.output_dir, outputs.TRAINING_PLOT)
  try:
    outputs.plot_history(result.history, plot,
                         f'{task.name}: {config.algorithm}, {config.rounds} '
                         f'rounds of {config.clients_per_round} clients')
  except OSError as e:  # The run is complete; its plot is a convenience.
    print(f'Warning: {plot} could not be written ({e.strerror or e}); the run '
          f'is complete (metrics.csv).', file=sys.stderr)
    plot = 'not written'
  if result.resumed_from >= config.rounds:
    done = f'already complete ({config.rounds} rounds)'
  elif result.resumed_from:
    done = (f'rounds {result.resumed_from + 1}-{config.rounds} (resumed from '
            f'round {result.resumed_from}) done in '
            f'{result.wall_time_seconds:.1f}s')
  else:
    rounds = '1 round' if config.rounds == 1 else f'{config.rounds} rounds'
    done = f'{rounds} done in {result.wall_time_seconds:.1f}s'
  print(f'{task.name}: {done}; final eval: {final or "n/a"}; plot: {plot}')
  return result


def dp_summary(config: registry.ExperimentConfig, clients: int) -> str:
  """One line: DP-FedAvg's clip and noise and the client-level epsilon of
  the run's rounds at delta = 1 / clients (`aggregators.epsilon`)."""
  epsilon = aggregators.epsilon(
      config.noise_multiplier, config.clients_per_round / clients,
      config.rounds, 1 / clients)
  return (f'DP-FedAvg: clip {config.clip:g}, noise multiplier '
          f'{config.noise_multiplier:g}, {config.clients_per_round} of '
          f'{clients} clients a round: epsilon ~= {epsilon:.3g} at delta = '
          f'1/{clients} after {config.rounds} rounds (client-level; RDP '
          'accountant, cohorts taken as Poisson samples).')


def central_data(
    examples_fn: Callable[[], tf.data.Dataset], *, batch_size: int,
    shuffle_buffer: int, seed: int,
) -> Callable[[], tf.data.Dataset]:
  """`examples_fn`'s examples shuffled (a buffer of `shuffle_buffer`, from
  `seed`) and batched: a binary's central data from its `--central_...`
  flags, read in its `main`."""
  return lambda: examples_fn().shuffle(shuffle_buffer, seed=seed).batch(
      batch_size)


def check_no_arguments(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {" ".join(argv[1:])}')
