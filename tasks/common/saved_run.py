"""A trained model out of a run directory, without rebuilding anything by hand.

A run directory holds `config.json` (every flag that defines the run, and in
`provenance.binary` the training binary that made it) and TFF checkpoints
(`checkpoints/round_<N>`, written by `tff.program.FileProgramStateManager`
with `prefix='round_'`). `load_run` rebuilds the run's task and process the
way the binary built them (its own `main`, on the recorded flags, up to the
point where it would train: `training_flags.capturing_runs`), loads a
checkpoint into the process's state and returns its model weights. The
commands `python -m tasks.export` (a Keras model file) and `python -m
tasks.evaluate` (the test metrics) stand on it.

To read a checkpoint with TFF alone, build the same process and call
`tff.program.FileProgramStateManager(run_dir + '/checkpoints',
prefix='round_').load_latest(process.initialize())`.
"""

import asyncio
import contextlib
import dataclasses
import importlib
import json
import os
from typing import Any, Optional

from absl import flags
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tasks.common import registry
from tasks.common import run as run_lib
from tasks.common.training_flags import binary as binary_lib
from tff_mixed import driver
from tff_mixed import keys
from tff_mixed import models
from tff_mixed.task import Task

CONFIG_FILE = driver.CONFIG_FILE


class SavedRunError(ValueError):
  """A run directory that cannot be loaded; one line naming what is wrong."""


@dataclasses.dataclass(frozen=True)
class SavedRun:
  """A run directory's task, process and one checkpoint's model.

  Attributes:
    task: The run's `Task`, as its binary built it.
    config: Its `registry.ExperimentConfig`.
    process: Its `LearningProcess`, built as the run built it.
    state: The checkpoint's state of `process`.
    round_num: The checkpoint's round.
    model_weights: `tff.learning.models.ModelWeights` of that round (numpy).
  """
  task: Task
  config: registry.ExperimentConfig
  process: tff.learning.templates.LearningProcess
  state: Any
  round_num: int
  model_weights: tff.learning.models.ModelWeights

  def keras_model(self) -> tf.keras.Model:
    """A fresh Keras model of the task holding these weights (for a task
    whose model is a `tff_mixed.models.KerasModelFn`)."""
    if not isinstance(self.task.model_fn, models.KerasModelFn):
      raise SavedRunError(
          f'task {self.task.name} has no Keras model (its model_fn is not a '
          'tff_mixed.models.KerasModelFn); use model_weights.')
    keras_model = self.task.model_fn.keras_model_fn()
    self.model_weights.assign_weights_to(keras_model)
    return keras_model

  def evaluate(self) -> dict[str, float]:
    """The task's evaluation of these weights, keyed as metrics.csv's
    `eval/...` columns."""
    evaluate = driver.build_evaluation(self.task.model_fn)
    return {keys.path(keys.EVAL, name): value for name, value in
            driver.evaluate_all(evaluate, self.model_weights,
                                self.task.eval_dataset_fn()).items()}


def define_flags() -> None:
  """`--run_dir`, `--round` and `--binary`: the flags of a command that
  loads a run (`tasks.export`, `tasks.evaluate`)."""
  flags.DEFINE_string('run_dir', None, 'The run directory (config.json and '
                      'checkpoints/).', required=True)
  flags.DEFINE_integer('round', None, 'The checkpoint of this round (default '
                       'the newest).', lower_bound=0)
  flags.DEFINE_string('binary', None, 'The training binary that made the run '
                      '(e.g. tasks.digits.train), for runs whose config.json '
                      'predates provenance.binary.')


def load_from_flags() -> SavedRun:
  """`load_run` of the `define_flags` flags' values."""
  values = flags.FLAGS
  return load_run(values.run_dir, round_num=values.round,
                  binary=values.binary)


def _read_config(run_dir: str) -> dict[str, Any]:
  path = os.path.join(run_dir, CONFIG_FILE)
  try:
    with open(path) as f:
      return json.load(f)
  except FileNotFoundError:
    raise SavedRunError(f'{path} does not exist: is {run_dir} a run '
                        'directory?') from None
  except (OSError, ValueError) as e:
    raise SavedRunError(f'{path} does not read: {e}') from None


# Modules whose flags are not the training binary's.
_OWN_MODULES = ('tasks.export', 'tasks.evaluate', 'tasks.common.saved_run')


@contextlib.contextmanager
def _flags_as_run(config: dict[str, Any], flag_values):
  """The training flags as the run had them, and as they were after: every
  flag a `tasks` module defines back at its default, then each recorded
  value that is not its default given (a default stays unset, so a flag the
  run could not have given stays absent, as the binary's checks expect)."""
  touched = [flag for module, defined in
             flag_values.flags_by_module_dict().items()
             if module.startswith('tasks.') and module not in _OWN_MODULES
             for flag in defined]
  saved = [(flag, flag.value, flag.present, flag.using_default_value)
           for flag in touched]
  try:
    for flag in touched:
      flag.unparse()
    _give(config, flag_values)
    if not flag_values.is_parsed():  # A library call, not a command.
      flag_values.mark_as_parsed()
    yield
  finally:
    for flag, value, present, using_default in saved:
      flag.value, flag.present = value, present
      flag.using_default_value = using_default


def _give(config: dict[str, Any], flag_values) -> None:
  for name, value in config.items():
    if name not in flag_values or value is None:
      continue
    flag = flag_values[name]
    if value == flag.default or (isinstance(value, list) and not value
                                 and not flag.default):
      continue
    if isinstance(value, list):
      value = ','.join(str(v) for v in value)
    flag.parse(str(value).lower() if isinstance(value, bool) else str(value))


def load_run(run_dir: str, *, round_num: Optional[int] = None,
             binary: Optional[str] = None) -> SavedRun:
  """Loads `run_dir`'s newest checkpoint (or round `round_num`'s).

  The training binary is `config.json`'s `provenance.binary`, or `binary`
  (a module such as 'tasks.digits.train') for runs made before it was
  recorded. Its flags are set from `config.json`, its `main` builds the task
  and stops where it would train, and the rebuilt configuration must
  record exactly what `config.json` does.

  Raises:
    SavedRunError: One line: no config.json, an unknown binary, a
      configuration that does not rebuild, no checkpoint, or one that does
      not load into the process's state.
  """
  config = _read_config(run_dir)
  made_by = config.get(driver.PROVENANCE, {}).get('binary')
  binary = binary or made_by
  if not binary:
    raise SavedRunError(
        f'{os.path.join(run_dir, CONFIG_FILE)} does not say which binary made '
        'the run (runs before provenance.binary): give it, e.g. '
        'tasks.digits.train.')
  try:
    module = importlib.import_module(binary)
  except ImportError as e:
    raise SavedRunError(f'binary {binary} does not import: {e}') from None
  if not hasattr(module, 'main') and not hasattr(module, 'BENCHMARK'):
    raise SavedRunError(f'{binary} is not a training binary (no main).')
  main = getattr(module, 'main', None) or _benchmark_main(module)
  flag_values = flags.FLAGS
  recorded = {k: v for k, v in config.items()
              if k not in (driver.PROVENANCE, driver.RESOLVED)}
  with _flags_as_run({**recorded, 'output_dir': run_dir, 'progress': False},
                     flag_values), binary_lib.capturing_runs() as captured:
    main([binary])
  if not captured:
    raise SavedRunError(f'{binary} did not reach training with the flags of '
                        f'{run_dir}.')
  task, experiment, central_data_fn, process_fn = captured[0]
  # What the driver would write for this run, normalised as it writes it.
  rebuilt = json.loads(json.dumps(driver.full_config(
      task.name, experiment.seed, experiment.clients_per_round,
      experiment.record), sort_keys=True, default=str))
  if rebuilt != recorded:
    differ = sorted(k for k in set(recorded) | set(rebuilt)
                    if recorded.get(k) != rebuilt.get(k))
    raise SavedRunError(f'{binary} rebuilds another configuration than '
                        f'{run_dir} records (differing: {", ".join(differ)}).')
  task, process = run_lib.build(task, experiment.algorithm_config,
                                experiment.run_config, central_data_fn,
                                process_fn)
  manager = tff.program.FileProgramStateManager(
      os.path.join(run_dir, driver.CHECKPOINT_DIR),
      prefix=driver.CHECKPOINT_PREFIX)
  versions = asyncio.run(manager.get_versions()) or []
  if round_num is None:
    if not versions:
      raise SavedRunError(f'{run_dir} holds no checkpoint.')
    round_num = versions[-1]
  elif round_num not in versions:
    raise SavedRunError(f'{run_dir} has no checkpoint of round {round_num} '
                        f'(it has {", ".join(map(str, versions)) or "none"}).')
  try:
    state = asyncio.run(manager.load(round_num, process.initialize()))
  except Exception as e:  # pylint: disable=broad-except
    raise SavedRunError(f'the checkpoint of round {round_num} in {run_dir} '
                        f'does not load into the run\'s process: {e}') from None
  weights = tf.nest.map_structure(np.asarray,
                                  process.get_model_weights(state))
  return SavedRun(task, experiment, process, state, round_num, weights)


def _benchmark_main(module):
  from tasks.common import benchmark  # pylint: disable=g-import-not-at-top
  return benchmark.main_for(module.BENCHMARK)
