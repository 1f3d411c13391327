"""A trained model out of a run directory, without rebuilding anything by hand.

A run directory holds `config.json` (the run's spec: its task, the task's
arguments, the algorithm and how it ran; or, written before specs, the
training flags it was given) and TFF checkpoints (`checkpoints/round_<N>`,
written by `tff.program.FileProgramStateManager` with `prefix='round_'`).
`load_run` reads the spec (`read_spec`), builds the run's task and process
from it through the task registry and the algorithm registry, as the run
did, loads a checkpoint into the process's state and returns its model
weights; no flags are read or set. The commands `python -m tasks.export` (a Keras model file) and `python -m
tasks.evaluate` (the test metrics) stand on it.

To read a checkpoint with TFF alone, build the same process and call
`tff.program.FileProgramStateManager(run_dir + '/checkpoints',
prefix='round_').load_latest(process.initialize())`.
"""

import dataclasses
import json
import os
from typing import Any, Optional

from absl import flags
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tasks.common import run as run_lib
from tasks.common import run_spec
from tasks.common import sources
from tasks.common import task_registry
from tasks.common import training_flags
from tff_mixed import driver
from tff_mixed.driver import checkpoints
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
    task: The run's `Task`, as its run built it.
    spec: Its `RunSpec`.
    process: Its `LearningProcess`, built as the run built it.
    state: The checkpoint's state of `process`.
    round_num: The checkpoint's round.
    model_weights: `tff.learning.models.ModelWeights` of that round (numpy).
  """
  task: Task
  spec: run_spec.RunSpec
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
  """`--run_dir` and `--round`: the flags of a command that loads a run
  (`tasks.export`, `tasks.evaluate`)."""
  flags.DEFINE_string('run_dir', None, 'The run directory (config.json and '
                      'checkpoints/).', required=True)
  flags.DEFINE_integer('round', None, 'The checkpoint of this round (default '
                       'the newest).', lower_bound=0)
  flags.DEFINE_string('binary', None, 'Retired: the run\'s task is read '
                      'from its config.json.')


def load_from_flags() -> SavedRun:
  """`load_run` of the `define_flags` flags' values."""
  values = flags.FLAGS
  if values.binary is not None:
    raise SavedRunError(
        '--binary is retired: the run\'s task and configuration are read '
        'from its config.json alone; drop it.')
  return load_run(values.run_dir, round_num=values.round)


def read_spec(run_dir: str) -> run_spec.RunSpec:
  """The run spec `run_dir`'s config.json records, of any schema
  (`read_spec_file`)."""
  path = os.path.join(run_dir, CONFIG_FILE)
  if not os.path.exists(path):
    raise SavedRunError(f'{path} does not exist: is {run_dir} a run '
                        'directory?')
  return read_spec_file(path)


def read_spec_file(path: str) -> run_spec.RunSpec:
  """The run spec the JSON file at `path` holds, of any schema: a spec
  (`RunSpec.from_json`: `to_json`'s text or a config.json of schema 1 or 2) or,
  schema 0, the flag values a binary recorded in a config.json
  (`training_flags.spec_from_flag_record`).

  Raises:
    SavedRunError: One line, for a file that is missing, does not read, or
      is not a spec.
  """
  try:
    with open(path) as f:
      text = f.read()
    record = json.loads(text)
  except (OSError, ValueError, RecursionError) as e:
    raise SavedRunError(
        f'{path} does not read: {str(e).splitlines()[0]}') from None
  try:
    if isinstance(record, dict) and record.get('schema', 0) == 0:
      spec = training_flags.spec_from_flag_record(record)
    else:
      spec = run_spec.RunSpec.from_json(text)
  except ValueError as e:
    raise SavedRunError(f'{path}: {e}') from None
  if isinstance(record, dict) and (record.get('schema', 0) == 0
                                   or driver.PROVENANCE in record):
    # A run's record holds every task argument there was: one added since
    # reads as that run used it.
    spec = dataclasses.replace(spec, task_args={
        **task_registry.arguments_before(spec.task), **spec.task_args})
  try:  # Said here, naming the file, not when the task is built.
    known = task_registry.arguments(spec.task)
  except task_registry.TaskSpecError:
    return spec  # An unknown task: said when the run is built.
  unknown = sorted(set(spec.task_args) - {*known, 'use_synthetic_data'})
  if unknown:
    raise SavedRunError(
        f'{path}: task {spec.task} takes no argument '
        f'{", ".join(map(repr, unknown))} (it takes {", ".join(known)}).')
  return spec


def resume_record(spec: run_spec.RunSpec) -> dict[str, Any]:
  """What `run(spec)` records in config.json: the spec's record
  (`run_spec.record`) or, where `spec.execution.output_dir` holds the same run
  recorded otherwise (a binary's flags, schema 0; its data elsewhere), that
  record as it is, so the run resumes there and its config.json stays.

  Raises:
    tff_mixed.driver.OutputDirError: One line, for a directory holding
      another run, naming the first value that differs.
  """
  new = run_spec.record(spec)
  out = spec.execution.output_dir
  if not out or not os.path.exists(os.path.join(out, CONFIG_FILE)):
    return new
  try:
    there = read_spec(out)
    with open(os.path.join(out, CONFIG_FILE)) as f:
      previous = json.load(f)
  except (SavedRunError, OSError, ValueError):
    return new  # The driver says what is wrong with it.
  # A task this process does not know cannot be compared further.
  differs = (('spec.task', there.task, spec.task) if there.task != spec.task
             else run_spec.difference(there, spec))
  if differs:
    path, was, now = differs
    raise driver.OutputDirError(
        f'output_dir {out} holds a run with a different configuration '
        f'({path}: {was!r} there, {now!r} now); choose another output_dir '
        'or delete it.')
  # The driver adds back the task, seed and cohort it records itself.
  return {k: v for k, v in previous.items()
          if k not in (driver.PROVENANCE, driver.RESOLVED, driver.EXECUTION,
                       'task', 'seed', 'clients_per_round')}


def load_run(run_dir: str, *, round_num: Optional[int] = None) -> SavedRun:
  """Loads `run_dir`'s newest checkpoint (or round `round_num`'s).

  The run's spec is read from its config.json (`read_spec`), its task and
  process built from it as the run built them (`tasks.common.run.build`),
  and the checkpoint read into the process's state as data
  (`tff_mixed.driver.checkpoints.read`: nothing stored in it is run).

  Raises:
    SavedRunError: One line: no config.json, one that is not a run spec, a
      task or configuration that does not build, no checkpoint, or one
      that does not load into the process's state.
  """
  spec = read_spec(run_dir)
  try:
    task, process = run_lib.build(spec)
  except (run_lib.ConfigError, sources.DataUnavailableError) as e:
    raise SavedRunError(f'{run_dir} does not rebuild: {e}') from None
  manager = tff.program.FileProgramStateManager(
      os.path.join(run_dir, driver.CHECKPOINT_DIR),
      prefix=driver.CHECKPOINT_PREFIX)
  versions = checkpoints.run_sync(manager.get_versions()) or []
  if round_num is None:
    if not versions:
      raise SavedRunError(f'{run_dir} holds no checkpoint.')
    round_num = versions[-1]
  elif round_num not in versions:
    raise SavedRunError(f'{run_dir} has no checkpoint of round {round_num} '
                        f'(it has {", ".join(map(str, versions)) or "none"}).')
  try:
    state = checkpoints.read(
        os.path.join(run_dir, driver.CHECKPOINT_DIR,
                     f'{driver.CHECKPOINT_PREFIX}{round_num}'),
        process.initialize())
  except Exception as e:  # pylint: disable=broad-except
    raise SavedRunError(f'the checkpoint of round {round_num} in {run_dir} '
                        f'does not load into the run\'s process: {e}') from None
  weights = tf.nest.map_structure(np.asarray,
                                  process.get_model_weights(state))
  return SavedRun(task, spec, process, state, round_num, weights)
