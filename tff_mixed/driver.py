"""The one training driver behind every binary: plain Python, no flags.

`run_experiment` runs any `LearningProcess` on any `Task`: seeded client
sampling, periodic centralised evaluation, metrics to CSV and TensorBoard, a
progress bar, and checkpoint/resume through `tff.program.FileProgramStateManager`.
A run killed and restarted with the same configuration continues from its last
checkpoint and ends with the same model as an uninterrupted run.

What it guards (nothing fails silently; each failure is one line):
* one run per output directory: a lock file (`.lock`, the owner's pid and
  host) is taken before anything is written; a stale one (its process is
  gone) is taken over;
* resume from the newest checkpoint that loads: a corrupt or partial one is
  reported, moved aside (`round_N.corrupt`) and the previous one is used;
  leftover temporary checkpoint directories are removed; `metrics.csv` and
  TensorBoard are rewritten from the resumed round, so no round appears
  twice;
* every round's new state is checked to be finite (`check_finite_state`):
  a non-finite state stops the run (the last checkpoint is untouched) or,
  with `on_non_finite='skip'`, the round is undone and counted;
* a round whose clients were all dropped reports no train metrics (rather
  than 0.0) and says so;
* Ctrl-C raises `RunInterrupted`, naming the round to resume from.
"""

import asyncio
import collections
import contextlib
import csv
import dataclasses
import io
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Optional, Union

from google.protobuf import message
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff
import tqdm

from tff_mixed import schedules
from tff_mixed.metrics import runtime
from tff_mixed.templates import client_groups as groups
from tff_mixed.task import Task

CONFIG_FILE = 'config.json'
METRICS_FILE = 'metrics.csv'
CHECKPOINT_DIR = 'checkpoints'
CHECKPOINT_PREFIX = 'round_'
TENSORBOARD_DIR = 'tensorboard'
LOCK_FILE = '.lock'
TRAIN_LOSS_KEY = 'client_work/train/loss'
TRAIN_PREFIX = 'client_work/train/'
PARTICIPATING_KEY = 'client_work/clients/participating'
SKIPPED_KEY = 'skipped_non_finite'
ON_NON_FINITE = ('stop', 'skip')


class RunError(Exception):
  """A run that cannot start or go on; its message is one line."""


class OutputDirError(RunError, ValueError):
  """The output directory cannot hold this run: another configuration, in
  use by another run, unreadable files, or not a writable directory."""


class CohortError(RunError, ValueError):
  """The task cannot give the cohort asked for (e.g. more clients a round
  than it has); raised before anything is trained."""


class NonFiniteStateError(RunError, ArithmeticError):
  """A round produced a state that is not finite."""


class RunInterrupted(KeyboardInterrupt):
  """Ctrl-C during a run; the message says where to resume from."""


# Where a non-finite value in a process state points (path prefix -> part),
# most specific first: the composer's server step, then TFF's composer.
_STATE_PARTS = (
    ('server/server_optimizer', 'the server optimizer'),
    ('server/central', 'the central step'),
    ('server/merge', 'the merge'),
    ('server/federated_gradient', 'the federated gradient'),
    ('client_work/augmenting_gradient', 'the central step'),
    ('finalizer', 'the server optimizer'),
    ('aggregator', 'the aggregator'),
    ('distributor', 'the distributor'),
    ('client_work', 'the client work'),
    ('global_model_weights', 'the global model'),
)


# `tff_mixed.schedules` state keys of losses not yet observed (on_plateau's
# best starts at +inf, loss_ratio's reference at NaN).
_UNOBSERVED_LOSSES = (schedules.BEST, schedules.REFERENCE)


def _leaves(structure, prefix=''):
  """(path, leaf) of a state: mappings, named tuples, lists, attrs."""
  if isinstance(structure, Mapping):
    items = structure.items()
  elif hasattr(structure, '_asdict'):
    items = structure._asdict().items()
  elif isinstance(structure, (list, tuple)):
    items = enumerate(structure)
  elif hasattr(structure, '__attrs_attrs__'):
    items = ((a.name, getattr(structure, a.name))
             for a in structure.__attrs_attrs__)
  else:
    yield prefix.rstrip('/'), structure
    return
  for key, value in items:
    yield from _leaves(value, f'{prefix}{key}/')


def non_finite_parts(state: Any) -> dict[str, list[str]]:
  """The parts of a process state holding NaN or infinity: part -> paths.

  Parts are named for what a researcher tunes (`'the server optimizer'`,
  `'the central step'`, `'the merge'`, `'the global model'`, ...); paths
  are the state's keys, e.g. `finalizer/accumulator/0`. Not checked: the
  losses a loss-driven schedule compares against, which are +inf or NaN
  until its window fills (a non-finite loss is never recorded there).
  """
  parts = {}
  for path, leaf in _leaves(state):
    value = np.asarray(leaf)
    if value.dtype.kind not in 'fc' or np.all(np.isfinite(value)):
      continue
    if path.rsplit('/', 1)[-1] in _UNOBSERVED_LOSSES:
      continue
    part = next((name for prefix, name in _STATE_PARTS
                 if path == prefix or path.startswith(prefix + '/')
                 or path.startswith(prefix + '_')), 'the state')
    parts.setdefault(part, []).append(path)
  return parts


def check_finite_state(state: Any, round_num: int) -> None:
  """Raises `NonFiniteStateError` unless every float in `state` is finite.

  The guard the driver applies after every round, for any loop: e.g.
  `check_finite_state(output.state, round_num)` after `process.next`.
  """
  parts = non_finite_parts(state)
  if parts:
    order = [name for _, name in _STATE_PARTS]
    named = sorted(parts.items(), key=lambda item: (
        order.index(item[0]) if item[0] in order else len(order)))
    raise NonFiniteStateError(
        f'round {round_num}: the new state is not finite in '
        + ', '.join(f'{part} ({", ".join(paths[:3])}'
                    f'{", ..." if len(paths) > 3 else ""})'
                    for part, paths in named)
        + '.')


@dataclasses.dataclass
class ExperimentResult:
  state: Any
  history: list[dict[str, float]]
  final_eval: dict[str, float]
  wall_time_seconds: float


def flatten_metrics(metrics: Any, prefix: str = '') -> dict[str, float]:
  """Flattens nested metric mappings to `{'a/b/c': float}`."""
  flat = {}
  if isinstance(metrics, Mapping):
    for key, value in metrics.items():
      flat.update(flatten_metrics(value, f'{prefix}{key}/'))
  elif isinstance(metrics, (list, tuple)) and not isinstance(metrics, str):
    for i, value in enumerate(metrics):
      flat.update(flatten_metrics(value, f'{prefix}{i}/'))
  else:
    value = np.asarray(metrics)
    if value.size == 1 and value.dtype.kind in 'biuf':
      flat[prefix.rstrip('/')] = value.item()
  return flat


def seeded_initial_weights(
    model_fn, seed: int
) -> tff.learning.models.ModelWeights:
  """Initial weights drawn from the model's own initializers under `seed`."""
  tf.keras.utils.set_random_seed(seed)
  model = model_fn()
  weights = tff.learning.models.ModelWeights.from_model(model)
  return tf.nest.map_structure(lambda v: v.numpy(), weights)


def build_evaluation(model_fn) -> tff.Computation:
  """A `tff.tensorflow.computation` (weights, dataset) -> finalized metrics.

  Centralised evaluation: the model's metrics over every batch, computed in
  one TF graph (Keras metric finalizers must run in graph mode).
  """
  with tf.Graph().as_default():
    model = model_fn()
    weights_type = tff.learning.models.weights_type_from_model(model)
    data_type = tff.SequenceType(tff.types.tensorflow_to_type(model.input_spec))

  @tff.tensorflow.computation(weights_type, data_type)
  def evaluate(model_weights, dataset):
    model = model_fn()
    weights = tff.learning.models.ModelWeights.from_model(model)

    @tf.function  # Orders the metric updates before the read.
    def run(model_weights, dataset):
      tf.nest.map_structure(lambda v, t: v.assign(t), weights, model_weights)
      for batch in dataset:
        model.forward_pass(batch, training=False)
      return model.report_local_unfinalized_metrics()

    unfinalized = run(model_weights, dataset)
    return collections.OrderedDict(
        (name, finalizer(unfinalized[name]))
        for name, finalizer in model.metric_finalizers().items()
    )

  return evaluate


def evaluate_all(evaluate, model_weights, eval_data) -> dict[str, float]:
  """Flat metrics of `evaluate` on a dataset or on each of a name->dataset map
  (keys `<name>/<metric>`)."""
  if isinstance(eval_data, Mapping):
    results = {}
    for name, dataset in eval_data.items():
      metrics = flatten_metrics(evaluate(model_weights, dataset))
      results.update({f'{name}/{k}': v for k, v in metrics.items()})
    return results
  return flatten_metrics(evaluate(model_weights, eval_data))


def _write_atomically(path: str, write: Callable[[Any], None],
                      newline: Optional[str] = None) -> None:
  """Writes `path` through a uniquely named temporary file in its directory
  (two writers never share one), then renames it into place."""
  directory, name = os.path.split(path)
  fd, tmp = tempfile.mkstemp(dir=directory or '.', prefix=name + '.',
                             suffix='.tmp')
  try:
    with os.fdopen(fd, 'w', newline=newline) as f:
      write(f)
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise


def _process_alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:  # Alive, another user's.
    return True
  return True


def _make_dir(output_dir: str) -> None:
  if not output_dir:
    raise OutputDirError('output_dir is empty; give a directory.')
  try:
    os.makedirs(output_dir, exist_ok=True)
  except OSError as e:
    raise OutputDirError(
        f'output_dir {output_dir} cannot be created: {e.strerror or e}.'
    ) from None
  if not os.path.isdir(output_dir):
    raise OutputDirError(f'output_dir {output_dir} is not a directory.')


def lock_output_dir(output_dir: str) -> Callable[[], None]:
  """Takes `output_dir`'s lock (creating the directory); returns its release.

  The lock file holds the owner's pid and host and appears complete or not
  at all (written aside, then hard-linked into place). A lock whose process
  is gone (same host) is stale and taken over, with a warning.

  Raises:
    OutputDirError: If another live run holds the lock, or `output_dir` is
      not a directory this process can write.
  """
  _make_dir(output_dir)
  path = os.path.join(output_dir, LOCK_FILE)
  owner = {'pid': os.getpid(), 'host': socket.gethostname(),
           'started': time.strftime('%Y-%m-%d %H:%M:%S')}
  for _ in range(2):
    try:
      fd, tmp = tempfile.mkstemp(dir=output_dir, prefix=LOCK_FILE + '.')
      with os.fdopen(fd, 'w') as f:
        json.dump(owner, f)
      try:
        os.link(tmp, path)
        return lambda: _release_lock(path, owner)
      except FileExistsError:
        pass
      finally:
        os.remove(tmp)
    except PermissionError as e:
      raise OutputDirError(
          f'output_dir {output_dir} is not writable: {e.strerror}.') from None
    holder = _read_lock(path)
    if holder is None:  # Released between the two calls.
      continue
    same_host = holder.get('host') == owner['host']
    pid = holder.get('pid')
    if same_host and isinstance(pid, int) and not _process_alive(pid):
      print(f'Warning: output_dir {output_dir}: taking over the lock of pid '
            f'{pid}, which has ended.', file=sys.stderr)
      try:
        os.remove(path)
      except FileNotFoundError:
        pass
      continue
    raise OutputDirError(
        f'output_dir {output_dir} is in use by pid {pid} on '
        f'{holder.get("host")} (since {holder.get("started")}); wait for that '
        f'run, or delete {path} if it is gone.')
  raise OutputDirError(f'output_dir {output_dir}: could not take {path}.')


def _read_lock(path: str) -> Optional[dict]:
  try:
    with open(path) as f:
      return json.load(f)
  except FileNotFoundError:
    return None
  except (OSError, ValueError):
    return {}


def _release_lock(path: str, owner: Mapping[str, Any]) -> None:
  if _read_lock(path) == json.loads(json.dumps(owner)):
    os.remove(path)


PROVENANCE = 'provenance'
RESOLVED = 'resolved'


def provenance() -> dict[str, Any]:
  """What code made a run: tff_mixed's and TFF's versions, and the git
  commit of this checkout (None outside git; `dirty` if it has changes)."""
  import importlib.metadata  # pylint: disable=g-import-not-at-top
  import subprocess  # pylint: disable=g-import-not-at-top
  try:
    version = importlib.metadata.version('tff_mixed')
  except importlib.metadata.PackageNotFoundError:
    version = None
  here = os.path.dirname(os.path.abspath(__file__))

  def git(*args):
    try:
      result = subprocess.run(['git', '-C', here, *args], capture_output=True,
                              text=True, timeout=10, check=True)
      return result.stdout.strip()
    except (OSError, subprocess.SubprocessError):
      return None

  commit = git('rev-parse', 'HEAD')
  return {'tff_mixed': version, 'tensorflow_federated': tff.__version__,
          'git_commit': commit,
          'git_dirty': bool(git('status', '--porcelain', '--untracked-files=no'))
                       if commit else None}


def prepare_output_dir(output_dir: str, config: Mapping[str, Any]) -> bool:
  """Creates `output_dir` with `config.json`, or checks it matches `config`.

  Returns whether it wrote `config.json` (a new run). `config.json` also
  records `provenance()` under `"provenance"`, which is not compared: a run
  resumed by other code continues, with a warning naming both. Nor is
  `"resolved"` (`record_resolved`). The caller holds the directory's lock
  (`lock_output_dir`).

  Raises:
    OutputDirError: If `output_dir` holds a run with another configuration,
      its `config.json` is unreadable, or it cannot be written.
  """
  _make_dir(output_dir)
  path = os.path.join(output_dir, CONFIG_FILE)
  config = json.loads(json.dumps(dict(config), sort_keys=True, default=str))
  if os.path.exists(path):
    try:
      with open(path) as f:
        previous = json.load(f)
      if not isinstance(previous, dict):
        raise ValueError('not a JSON object')
    except (OSError, ValueError) as e:
      raise OutputDirError(
          f'{path} is unreadable ({e}); restore it or choose another '
          'output_dir.') from None
    made_by = previous.pop(PROVENANCE, None)
    previous.pop(RESOLVED, None)
    changed = sorted(
        k for k in set(previous) | set(config) if previous.get(k) != config.get(k)
    )
    if changed:
      key = changed[0]
      raise OutputDirError(
          f'output_dir {output_dir} holds a run with a different configuration '
          f'({key}: {previous.get(key)!r} there, {config.get(key)!r} now); '
          'choose another output_dir or delete it.'
      )
    now = provenance()
    if made_by is not None and made_by != now:
      print(f'Warning: output_dir {output_dir} was started by {made_by}; '
            f'resuming with {now}.', file=sys.stderr)
    return False
  record = dict(config, **{PROVENANCE: provenance()})
  try:
    _write_atomically(
        path, lambda f: json.dump(record, f, indent=2, sort_keys=True))
  except OSError as e:
    raise OutputDirError(
        f'output_dir {output_dir} is not writable: {e.strerror or e}.'
    ) from None
  return True


def record_resolved(output_dir: str, process, state) -> None:
  """Adds to `config.json` the hyperparameters `process` starts with, under
  `"resolved"`: the values a `None` in the configuration stood for (a
  builder's default server learning rate, a schedule's first value).

  They follow from the configuration, so they are not compared on resume.
  A process without `get_hparams` records none.
  """
  if not hasattr(process, 'get_hparams'):
    return
  hparams = {
      key: float(_csv_value(value)) if isinstance(value, float) else value
      for key, value in flatten_metrics(process.get_hparams(state)).items()
  }
  path = os.path.join(output_dir, CONFIG_FILE)
  with open(path) as f:
    record = json.load(f)
  record[RESOLVED] = {'hparams': hparams}
  _write_atomically(
      path, lambda f: json.dump(record, f, indent=2, sort_keys=True))


def _remove_new_run(output_dir: str, existed: bool,
                    release: Callable[[], None]) -> None:
  """Undoes `prepare_output_dir` of a run that failed before its first
  round: its `config.json`, its empty checkpoint directory, its lock, and
  `output_dir` itself if this run created it and nothing else is there."""
  os.remove(os.path.join(output_dir, CONFIG_FILE))
  checkpoints = os.path.join(output_dir, CHECKPOINT_DIR)
  if os.path.isdir(checkpoints) and not os.listdir(checkpoints):
    os.rmdir(checkpoints)
  release()
  if not existed and not os.listdir(output_dir):
    os.rmdir(output_dir)


def _read_history(path: str, last_round: int) -> list[dict[str, float]]:
  """Rows of an earlier run up to `last_round` (later rows were not saved).

  Raises:
    OutputDirError: If the file is not a metrics table.
  """
  if not os.path.exists(path):
    return []
  try:
    with open(path, newline='') as f:
      text = f.read()
    # A row a kill cut short (rows are appended every round) is dropped; it
    # lies past the last checkpoint anyway.
    text = text[:text.rfind('\n') + 1]
    rows = [
        {k: _csv_read(v) for k, v in row.items() if v not in ('', None)}
        for row in csv.DictReader(io.StringIO(text, newline=''))
    ]
    if any('round' not in row or None in row for row in rows):
      raise ValueError('a row without a round, or with extra fields')
  except (OSError, ValueError, TypeError) as e:
    raise OutputDirError(
        f'{path} is unreadable ({e}); restore it or choose another '
        'output_dir.') from None
  return [row for row in rows if row['round'] <= last_round]


def _csv_value(value: float) -> Union[int, float, str]:
  """A metric as `metrics.csv` writes it, the same whether the row was just
  measured or read back on resume.

  Counts and rounds are integers (`764`, not `764.0`). Most metrics are
  float32 in TF: a float32 value is written in its shortest form (a learning
  rate of 0.1 as `0.1`, not its float64 expansion `0.10000000149011612`), and
  `_csv_read` gives the float32 value back exactly. Other floats are written
  as Python does; one whose short form also reads as a float32's (a float64
  0.1) is read back as that float32, within half a float32 unit.
  """
  if not isinstance(value, float):
    return value
  if value.is_integer() and abs(value) < 2**53:
    return int(value)
  with np.errstate(over='ignore'):  # Beyond float32's range: not float32.
    as_float32 = np.float32(value)
  return str(as_float32) if float(as_float32) == value else value


def _csv_read(text: str) -> float:
  """The value `_csv_value` wrote as `text`."""
  value = float(text)
  with np.errstate(over='ignore'):  # Beyond float32's range: not float32.
    as_float32 = np.float32(value)
  return float(as_float32) if str(as_float32) == text else value


# metrics.csv is written here rather than by TFF's
# `tff.program.CSVFileReleaseManager` (which also appends, and drops rows past a
# key on resume) for what this adds: counts as integers and float32 metrics in
# their shortest form (TFF's writes float64 expansions), a row torn by a kill
# dropped on read, and a synchronous write before the round's checkpoint.
def _append_history(path: str, history: list[dict[str, float]],
                    columns: list[str]) -> None:
  """Appends `history`'s last row to `path`, which holds the rows before it
  under `columns`; rewrites the file when the row brings a new column."""
  row = history[-1]
  if not columns or any(key not in columns for key in row):
    _write_history(path, history)
    columns[:] = list(dict.fromkeys(k for r in history for k in r))
    return
  with open(path, 'a', newline='') as f:
    csv.DictWriter(f, fieldnames=columns).writerow(
        {k: _csv_value(v) for k, v in row.items()})


def _write_history(path: str, history: list[dict[str, float]]) -> None:
  keys = list(dict.fromkeys(k for row in history for k in row))

  def write(f):
    writer = csv.DictWriter(f, fieldnames=keys)
    writer.writeheader()
    writer.writerows({k: _csv_value(v) for k, v in row.items()}
                     for row in history)

  _write_atomically(path, write, newline='')


def _remove_temporary_checkpoints(directory: str) -> None:
  """Removes the `<prefix><round>_temp<n>` directories TFF writes a
  checkpoint into before renaming it, left behind by a killed run."""
  if not os.path.isdir(directory):
    return
  for entry in os.listdir(directory):
    if entry.startswith(CHECKPOINT_PREFIX) and '_temp' in entry:
      shutil.rmtree(os.path.join(directory, entry), ignore_errors=True)


# What reading a damaged SavedModel raises (a structure that does not match
# the process raises ValueError instead, and is not damage).
_UNREADABLE = (OSError, IndexError, tf.errors.OpError, message.DecodeError)


def load_latest_good(state_manager: tff.program.FileProgramStateManager,
                     directory: str, structure: Any) -> tuple[Any, int]:
  """(state, round) of the newest checkpoint in `directory` that loads, or
  (None, 0) if none does.

  A checkpoint that fails to load (truncated, garbage, an empty directory)
  is reported in one line and renamed `<name>.corrupt` (kept for a
  post-mortem, invisible to the state manager); the next older one is
  tried.
  """
  versions = asyncio.run(state_manager.get_versions()) or []
  for version in reversed(versions):
    path = os.path.join(directory, f'{CHECKPOINT_PREFIX}{version}')
    try:
      return asyncio.run(state_manager.load(version, structure)), version
    except ValueError as e:
      raise OutputDirError(
          f'checkpoint {path} does not fit this process\'s state ('
          f'{str(e).splitlines()[0][:200]}); was it written by another '
          'version of the code?') from None
    except _UNREADABLE as e:
      aside = path + '.corrupt'
      suffix = 1
      while os.path.exists(aside):
        aside, suffix = f'{path}.corrupt{suffix}', suffix + 1
      os.rename(path, aside)
      print(f'Warning: checkpoint {path} does not load ({type(e).__name__});'
            f' moved to {aside}, resuming from the one before.',
            file=sys.stderr)
  return None, 0


# TensorBoard is written with `tf.summary` rather than TFF's
# `tff.program.TensorBoardReleaseManager` because a resumed run rewrites the
# event files up to its checkpoint: releasing again would add a second value
# at every step replayed after a kill.
def _rewrite_tensorboard(directory: str, history: list[dict[str, float]]):
  """A fresh event file holding `history` (a resumed run's rows), so
  TensorBoard never shows a round twice; returns its writer."""
  if os.path.isdir(directory):
    shutil.rmtree(directory)
  writer = tf.summary.create_file_writer(directory)
  for row in history:
    _summarize(writer, row)
  return writer


def _summarize(writer, row: Mapping[str, float]) -> None:
  with writer.as_default(step=int(row['round'])):
    for key, value in row.items():
      if key != 'round':
        tf.summary.scalar(key, value)


def full_config(task_name, seed, clients_per_round, config=None) -> dict:
  """The configuration `run_experiment` records in `config.json`."""
  run_config = dict(config or {})
  run_config.update(task=task_name, seed=seed, clients_per_round=clients_per_round)
  return run_config


class EvalPlateauError(ValueError):
  """An `EvalPlateau` that does not fit the process or the evaluation."""


NUM_LOCAL_STEPS = 'num_local_steps'
LEARNING_RATE = 'learning_rate'
PLATEAU_HPARAMS = (NUM_LOCAL_STEPS, LEARNING_RATE)


@dataclasses.dataclass(frozen=True)
class EvalPlateau:
  """Decays K or the client learning rate when an evaluation metric plateaus.

  Seed 001 §3.5 (last paragraph, and Table 3's K-step and lr-step rows):
  "once the validation error plateaus we decay either K or eta". A process
  sees only its clients' training loss, which is what
  `tff_mixed.schedules.on_plateau` watches inside it; this watches the
  driver's centralised evaluation instead. After each evaluation the driver
  advances `schedule` with the metric (negated for `mode='max'`) and, when
  the value changes, writes it into the process state with `set_hparams`:
  `client_work/num_local_steps` (as `num_steps(value)`) or
  `client_work/optimizer_hparams/learning_rate`. Patience and window
  therefore count evaluations (every `eval_every` rounds), not rounds.

  The process must hold that hyper-parameter constant, as builders do for
  a number (a hand-set constant stays; a schedule would overwrite it): the
  driver checks at each evaluation that the process still has the value it
  set. On resume the schedule is replayed over the evaluations in
  `metrics.csv`, so a resumed run decays exactly when an uninterrupted one
  does. Each row gets `eval_plateau/<hparam>`, the value the next round
  uses.

  Attributes:
    schedule: A `tff_mixed.schedules.on_plateau(...)`; its initial value
      must be the process's (K, or the client learning rate).
    hparam: `'num_local_steps'` or `'learning_rate'`.
    metric: A column of `metrics.csv` the evaluation writes, e.g.
      `'eval/loss'` (or `'eval/<name>/loss'` when the task evaluates a
      mapping of datasets).
    mode: `'min'` (a loss or an error) or `'max'` (an accuracy).
  """
  schedule: schedules.Schedule
  hparam: str = NUM_LOCAL_STEPS
  metric: str = 'eval/loss'
  mode: str = 'min'

  def __post_init__(self):
    if not isinstance(self.schedule, schedules.OnPlateau):
      raise EvalPlateauError(
          'EvalPlateau needs a tff_mixed.schedules.on_plateau schedule, got '
          f'{type(self.schedule).__name__}.')
    if self.hparam not in PLATEAU_HPARAMS:
      raise EvalPlateauError(f'EvalPlateau hparam must be one of '
                             f'{PLATEAU_HPARAMS}, got {self.hparam!r}.')
    if self.mode not in ('min', 'max'):
      raise EvalPlateauError(
          f"EvalPlateau mode must be 'min' or 'max', got {self.mode!r}.")

  def as_hparam(self, value) -> float:
    """The schedule's value as the process holds it."""
    value = float(value)
    if self.hparam == NUM_LOCAL_STEPS:
      return int(schedules.num_steps(value))
    return float(np.float32(value))

  def observe(self, state: schedules.State, round_num: int,
              metrics: Mapping[str, float]) -> schedules.State:
    """The schedule's state after an evaluation with `metrics`."""
    value = metrics[self.metric]
    return self.schedule.next(
        state, tf.constant(round_num, tf.int32),
        tf.constant(-value if self.mode == 'max' else value, tf.float64))


def _client_hparam(hparams, name: str):
  """(container, key) of K or the client learning rate in `hparams`."""
  work = hparams.get('client_work') if isinstance(hparams, Mapping) else None
  if not isinstance(work, Mapping):
    return None, None
  if name == LEARNING_RATE:
    work = work.get('optimizer_hparams')
    if not isinstance(work, Mapping):
      return None, None
  return (work, name) if name in work else (None, None)


def _check_plateaus(plateaus, plateau_states, process, state, metric_names):
  """Checks every `EvalPlateau` against the process and the evaluation."""
  seen = set()
  for plateau, plateau_state in zip(plateaus, plateau_states):
    if plateau.hparam in seen:
      raise EvalPlateauError(f'two EvalPlateaus set {plateau.hparam}.')
    seen.add(plateau.hparam)
    if metric_names is None:
      raise EvalPlateauError(
          f'EvalPlateau on {plateau.hparam} watches {plateau.metric}, but the '
          'task has no evaluation data.')
    if plateau.metric not in metric_names:
      raise EvalPlateauError(
          f'EvalPlateau on {plateau.hparam}: the evaluation does not report '
          f'{plateau.metric!r}; it reports {", ".join(sorted(metric_names))}.')
    container, key = _client_hparam(process.get_hparams(state), plateau.hparam)
    if container is None:
      raise EvalPlateauError(
          f'EvalPlateau on {plateau.hparam}: this process has no client_work '
          f'{plateau.hparam} in its get_hparams.')
    held = plateau.as_hparam(container[key])
    expected = plateau.as_hparam(plateau.schedule.value(plateau_state))
    if held != expected:
      raise EvalPlateauError(
          f'EvalPlateau on {plateau.hparam} is at {expected}, but the '
          f'process is at {held}.')


def _metric_names(evaluate, eval_data) -> list[str]:
  """The `eval/...` columns `evaluate_all` writes."""
  def leaves(type_, prefix=''):
    if not isinstance(type_, tff.StructType):
      return [prefix.rstrip('/')]
    return [leaf for i, (name, element) in enumerate(
        tff.structure.iter_elements(type_))
            for leaf in leaves(element, f'{prefix}{name or i}/')]

  names = leaves(evaluate.type_signature.result)
  if isinstance(eval_data, Mapping):
    names = [f'{data}/{name}' for data in eval_data for name in names]
  return [f'eval/{name}' for name in names]


RoundHook = Callable[[int, tff.learning.templates.LearningProcessOutput, float],
                     Optional[Any]]


def run_rounds(
    process: tff.learning.templates.LearningProcess,
    state: Any,
    client_data_fn: Callable[[int], Sequence[tf.data.Dataset]],
    round_nums: Iterable[int],
    on_round: Optional[RoundHook] = None,
) -> Any:
  """The one round loop every training run goes through.

  For each round r of `round_nums`: `output = process.next(state,
  client_data_fn(r))`, then `on_round(r, output, seconds)` (the round's
  wall time); the next round starts from what `on_round` returns, or from
  `output.state` if it returns None. Returns the last state.
  `run_experiment` drives it with its
  cohort sampling (`sample_client_data`), metrics, checkpoints and
  evaluation; experiment scripts with their own cohorts and measurements
  pass theirs.
  """
  for round_num in round_nums:
    started = time.perf_counter()
    output = process.next(state, client_data_fn(round_num))
    state = output.state
    if on_round is not None:
      replaced = on_round(round_num, output, time.perf_counter() - started)
      if replaced is not None:
        state = replaced
  return state


# Cohorts are drawn here rather than by TFF's
# `tff.simulation.build_uniform_sampling_fn` because a task may sample from its
# own distribution (the quadratic task draws clients z with density ∝ z^-1/2,
# seed 000 §3); other tasks draw uniformly without replacement, as TFF's
# does, from an rng seeded by (seed, round).
def sample_client_data(task: Task, seed: int, round_num: int,
                       clients_per_round: int) -> list[tf.data.Dataset]:
  """Round `round_num`'s cohort: `np.random.default_rng([seed, round_num])`
  samples it, so a resumed run sees the same clients as an uninterrupted
  one."""
  rng = np.random.default_rng([seed, round_num])
  return [task.train_dataset_fn(cid)
          for cid in task.sample_clients(rng, clients_per_round)]


def _apply_plateaus(plateaus, plateau_states, process, state, round_num,
                    row):
  """Advances each `EvalPlateau` with `row`'s evaluation; returns `state`
  with the values they give (and records them in `row`)."""
  hparams = process.get_hparams(state)
  changed = False
  for i, plateau in enumerate(plateaus):
    container, key = _client_hparam(hparams, plateau.hparam)
    current = plateau.as_hparam(plateau.schedule.value(plateau_states[i]))
    if plateau.as_hparam(container[key]) != current:
      raise EvalPlateauError(
          f'round {round_num}: the process has {plateau.hparam} = '
          f'{plateau.as_hparam(container[key])} where EvalPlateau set '
          f'{current}; its {plateau.hparam} follows a schedule of its own '
          '(build it with a constant).')
    plateau_states[i] = plateau.observe(plateau_states[i], round_num, row)
    value = plateau.as_hparam(plateau.schedule.value(plateau_states[i]))
    row[f'eval_plateau/{plateau.hparam}'] = value
    if value != current:
      container[key] = np.asarray(value, np.asarray(container[key]).dtype)
      changed = True
  return process.set_hparams(state, hparams) if changed else state


@contextlib.contextmanager
def _remembering_interrupts():
  """Yields an event set by every Ctrl-C (SIGINT) while the rounds run.

  Ctrl-C still raises `KeyboardInterrupt` at once. But Python swallows an
  exception raised inside a finalizer or `__del__` (printing "Exception
  ignored"), and TF and TFF run many (TFF disposes of remote values in
  `weakref.finalize`): a Ctrl-C landing in one would be lost and the run would
  go on. The round loop checks the event after each round. Only Python's
  default handler is replaced, only from the main thread, and it is restored
  afterwards.
  """
  requested = threading.Event()
  if (threading.current_thread() is not threading.main_thread() or
      signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
    yield requested
    return

  def handler(signum, frame):
    requested.set()
    signal.default_int_handler(signum, frame)

  signal.signal(signal.SIGINT, handler)
  try:
    yield requested
  finally:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def run_experiment(
    task: Task,
    process: Union[tff.learning.templates.LearningProcess,
                   Callable[[], tff.learning.templates.LearningProcess]],
    *,
    rounds: int,
    clients_per_round: int,
    output_dir: str,
    seed: int = 0,
    eval_every: int = 10,
    checkpoint_every: int = 10,
    config: Optional[Mapping[str, Any]] = None,
    progress: bool = True,
    runtime_model: Optional[runtime.RuntimeModel] = None,
    client_groups: int = 0,
    eval_plateaus: Sequence[EvalPlateau] = (),
    on_non_finite: str = 'stop',
) -> ExperimentResult:
  """Trains `process` on `task` for `rounds` rounds, resuming if possible.

  Round r (1-based) samples its cohort with `sample_client_data` and runs
  through `run_rounds`, so a resumed run sees the same clients as an
  uninterrupted one. The initial
  model is drawn from the model's initializers under `seed`.

  Args:
    task: The `Task`.
    process: A `LearningProcess` whose `next` takes client datasets, or a
      no-arg callable building one, called after `output_dir` is checked
      (so a clash with an earlier run fails before a slow build).
    rounds: Total number of rounds (a resumed run stops at the same total).
    clients_per_round: Cohort size.
    output_dir: Where `config.json`, `metrics.csv`, `checkpoints/` and
      `tensorboard/` go.
    seed: Seed of initialisation and client sampling.
    eval_every: Evaluate every this many rounds (and after the last); 0: only
      after the last.
    checkpoint_every: Save the state every this many rounds and after the last.
    config: Everything that defines the run (flags); a restart must match it.
    progress: Show a tqdm progress bar.
    client_groups: For a process built with `client_groups=True` (fast
      mode), the number of groups each round's cohort is split into (>= 1;
      `tff_mixed.templates.client_groups.group_datasets`); 0 for a process
      that takes one dataset per client.
    runtime_model: Seed 001's model of a round's wall-clock time on real
      clients; default `runtime.RuntimeModel()`. Each row gets
      `simulated_seconds` and `simulated_seconds_cumulative` (on resume the
      earlier rows are re-timed with this model).
    eval_plateaus: `EvalPlateau`s: K or the client learning rate decayed
      when an evaluation metric plateaus (seed 001's K-step and lr-step on
      the validation error); they need `eval_every >= 1`.
    on_non_finite: What a round whose new state is not finite does:
      `'stop'` raises `NonFiniteStateError` (the last checkpoint stays as it
      was); `'skip'` undoes the round (the next one starts from the state
      before it), warns, and marks it in `skipped_non_finite` (0 or 1 per
      row). Not part of the configuration: a stopped run can be resumed
      with `'skip'`.

  Returns:
    An `ExperimentResult` with the final state, per-round history (including
    rounds of an earlier, resumed run) and the final evaluation. Besides the
    process's metrics each row has `sgd_steps_cumulative`, `round_seconds`
    (measured here) and the simulated times.

  Raises:
    ValueError: For non-positive `rounds`/`clients_per_round`/`checkpoint_every`.
    OutputDirError: If `output_dir` holds a run with another configuration,
      is in use by another run, holds a checkpoint past `rounds`, holds
      unreadable `config.json`/`metrics.csv`, or is not a writable
      directory (checked before anything is written).
    EvalPlateauError: For an `EvalPlateau` that does not fit the process or
      the evaluation (checked before the first round).
    CohortError: If the task cannot draw `clients_per_round` clients (checked
      before the first round, like the configuration).
    NonFiniteStateError: With `on_non_finite='stop'`, for a round whose new
      state is not finite (`check_finite_state`).
    RunInterrupted: On Ctrl-C (a `KeyboardInterrupt`), naming the round.
  """
  for name, value in (
      ('rounds', rounds),
      ('clients_per_round', clients_per_round),
      ('checkpoint_every', checkpoint_every),
  ):
    if value < 1:
      raise ValueError(f'{name} must be >= 1, got {value}.')
  if eval_every < 0:
    raise ValueError(f'eval_every must be >= 0, got {eval_every}.')
  if eval_plateaus and not eval_every:
    raise EvalPlateauError('eval_plateaus need eval_every >= 1 (with 0 the '
                           'model is evaluated only after the last round).')
  if on_non_finite not in ON_NON_FINITE:
    raise ValueError(f'on_non_finite must be one of {ON_NON_FINITE}, got '
                     f'{on_non_finite!r}.')
  try:  # A first cohort, before anything is written or built.
    task.sample_clients(np.random.default_rng([seed, 1]), clients_per_round)
  except ValueError as e:
    raise CohortError(str(e)) from None
  run_config = full_config(task.name, seed, clients_per_round, config)
  existed = bool(output_dir) and os.path.exists(output_dir)
  release = lock_output_dir(output_dir)
  try:
    return _run_locked(
        task, process, rounds=rounds, clients_per_round=clients_per_round,
        output_dir=output_dir, seed=seed, eval_every=eval_every,
        checkpoint_every=checkpoint_every, run_config=run_config,
        progress=progress, runtime_model=runtime_model,
        client_groups=client_groups, eval_plateaus=eval_plateaus,
        on_non_finite=on_non_finite, existed=existed, release=release)
  finally:
    release()


def _run_locked(task, process, *, rounds, clients_per_round, output_dir, seed,
                eval_every, checkpoint_every, run_config, progress,
                runtime_model, client_groups, eval_plateaus, on_non_finite,
                existed, release) -> ExperimentResult:
  """`run_experiment` once the output directory's lock is held."""
  created = prepare_output_dir(output_dir, run_config)
  try:  # Until the first round, a failure leaves no new run behind.
    if not hasattr(process, 'next'):  # A builder, called once the dir is good.
      process = process()
    grouped = groups.takes_groups(process)
    if grouped and client_groups < 1:
      raise ValueError('The process takes client groups (built with '
                       'client_groups=True): pass client_groups >= 1.')
    if not grouped and client_groups:
      raise ValueError(f'client_groups={client_groups} but the process takes '
                       'one dataset per client (build it with '
                       'client_groups=True).')

    checkpoint_dir = os.path.join(output_dir, CHECKPOINT_DIR)
    _remove_temporary_checkpoints(checkpoint_dir)
    state_manager = tff.program.FileProgramStateManager(
        checkpoint_dir, prefix=CHECKPOINT_PREFIX, keep_total=3)
    state = process.initialize()
    state = process.set_model_weights(
        state, seeded_initial_weights(task.model_fn, seed)
    )
    if created:
      record_resolved(output_dir, process, state)
    saved, start_round = load_latest_good(state_manager, checkpoint_dir,
                                          state)
    if start_round > rounds:
      raise OutputDirError(
          f'output_dir {output_dir} holds a run checkpointed at round '
          f'{start_round}, past rounds={rounds}; ask for at least '
          f'{start_round} rounds or choose another output_dir.')
    if saved is not None:
      state = saved
    metrics_path = os.path.join(output_dir, METRICS_FILE)
    history = _read_history(metrics_path, start_round)
    cumulative_steps = (history[-1].get('sgd_steps_cumulative', 0.0)
                        if history else 0.0)
    if runtime_model is None:
      runtime_model = runtime.RuntimeModel()
    # Simulated time is not part of the configuration: on resume, earlier rounds
    # are re-timed with this run's model so the cumulative curve is one model's.
    simulated = 0.0
    for row in history:
      row['simulated_seconds'] = runtime_model.round_seconds_from_metrics(row)
      simulated += row['simulated_seconds']
      row['simulated_seconds_cumulative'] = simulated
    eval_data = task.eval_dataset_fn() if task.eval_dataset_fn else None
    evaluate = (build_evaluation(task.model_fn) if eval_data is not None
                else None)
    final_eval = {}
    # Replays the evaluations of a resumed run, so decays land where they would.
    plateau_states = [p.schedule.initialize() for p in eval_plateaus]
    for row in history:
      for i, plateau in enumerate(eval_plateaus):
        if plateau.metric in row:
          plateau_states[i] = plateau.observe(plateau_states[i],
                                              int(row['round']), row)
    _check_plateaus(
        eval_plateaus, plateau_states, process, state,
        None if evaluate is None else _metric_names(evaluate, eval_data))
  except BaseException:
    if created:
      _remove_new_run(output_dir, existed, release)
    raise
  tensorboard_dir = os.path.join(output_dir, TENSORBOARD_DIR)
  if start_round:  # Drops rows a killed run wrote past its checkpoint.
    if history:
      _write_history(metrics_path, history)
    summary_writer = _rewrite_tensorboard(tensorboard_dir, history)
  else:
    summary_writer = tf.summary.create_file_writer(tensorboard_dir)
  started = time.perf_counter()
  last_round = last_checkpoint = start_round

  algorithm = run_config.get('algorithm')
  bar = tqdm.trange(
      start_round + 1, rounds + 1, initial=start_round, total=rounds,
      desc=f'{task.name} {algorithm}' if algorithm else task.name,
      disable=not progress, leave=True,
  )
  if start_round < rounds:  # Round 1 also traces and compiles (20-40 s).
    bar.set_postfix_str('compiling and running the first round')
  columns = []  # metrics.csv's header, once a row has been written.
  def on_round(round_num, output, seconds):
    nonlocal state, cumulative_steps, simulated, final_eval, last_round
    nonlocal last_checkpoint
    row = {'round': float(round_num)}
    row.update(flatten_metrics(output.metrics))
    try:
      check_finite_state(output.state, round_num)
      state = output.state
      skipped = False
    except NonFiniteStateError as e:
      if on_non_finite == 'stop':
        kept = (f'the last checkpoint (round {last_checkpoint}) is kept'
                if last_checkpoint else 'no checkpoint was written yet')
        raise NonFiniteStateError(
            f'{e} Stopped; {kept}. Lower the learning rates, or with '
            "on_non_finite='skip' (--on_non_finite=skip) undo such rounds "
            'instead.') from None
      tqdm.tqdm.write(f'Warning: {e} The round is undone.', file=sys.stderr)
      skipped = True  # `state` is still the state before the round.
    if on_non_finite == 'skip':
      row[SKIPPED_KEY] = float(skipped)
    note = None
    if row.get(PARTICIPATING_KEY) == 0:
      # Train metrics over no client would read 0.0, like perfect training.
      row = {k: v for k, v in row.items() if not k.startswith(TRAIN_PREFIX)}
      note = ('all clients dropped' if row.get(
          'client_work/clients/dropped_non_finite') else 'no client had data')
      tqdm.tqdm.write(f'Warning: round {round_num}: {note}; the model did not '
                      'learn from clients this round.', file=sys.stderr)
    cumulative_steps += row.get('client_work/sgd_steps', 0.0)
    row['sgd_steps_cumulative'] = cumulative_steps
    row['simulated_seconds'] = runtime_model.round_seconds_from_metrics(row)
    simulated += row['simulated_seconds']
    row['simulated_seconds_cumulative'] = simulated
    row['round_seconds'] = seconds
    is_last = round_num == rounds
    if eval_data is not None and (
        is_last or (eval_every and round_num % eval_every == 0)
    ):
      final_eval = evaluate_all(
          evaluate, process.get_model_weights(state), eval_data)
      row.update({f'eval/{k}': v for k, v in final_eval.items()})
      if eval_plateaus:
        state = _apply_plateaus(eval_plateaus, plateau_states, process, state,
                                round_num, row)
    diverged = [k for k, v in row.items()
                if (k == TRAIN_LOSS_KEY or (k.startswith('eval/')
                                            and k.endswith('loss')))
                and not np.isfinite(v)]
    if diverged:
      tqdm.tqdm.write(
          f'Warning: round {round_num}: '
          + ', '.join(f'{k} = {row[k]}' for k in diverged)
          + ' (the model state is finite; its loss overflows).',
          file=sys.stderr)
    history.append(row)
    # Every round, so `tail -f` follows; rows past the last checkpoint are
    # dropped on resume (and a row a kill cut short).
    _append_history(metrics_path, history, columns)
    _summarize(summary_writer, row)
    if note:
      bar.set_postfix_str(note)
    else:
      shown = {}
      if TRAIN_LOSS_KEY in row:
        shown['loss'] = f'{row[TRAIN_LOSS_KEY]:.4f}'
      for key in ('accuracy', 'loss'):
        if key in final_eval:
          shown[f'eval_{key}'] = f'{final_eval[key]:.4f}'
          break
      bar.set_postfix(shown)
    if is_last or round_num % checkpoint_every == 0:
      asyncio.run(state_manager.save(state, round_num))
      last_checkpoint = round_num
    last_round = round_num
    if interrupt_requested.is_set() and not is_last:  # Swallowed Ctrl-C.
      raise KeyboardInterrupt
    return state

  def client_data(round_num):
    datasets = sample_client_data(task, seed, round_num, clients_per_round)
    return (groups.group_datasets(datasets, client_groups) if grouped
            else datasets)

  try:
    with _remembering_interrupts() as interrupt_requested:
      state = run_rounds(process, state, client_data, bar, on_round)
  except KeyboardInterrupt:
    raise RunInterrupted(
        f'interrupted in round {last_round + 1}; resume with the same command '
        f'(from the checkpoint of round {last_checkpoint}).') from None
  finally:
    bar.close()
    summary_writer.flush()
  if eval_data is not None and not final_eval:  # Resumed a finished run.
    final_eval = evaluate_all(
        evaluate, process.get_model_weights(state), eval_data)
  if history:
    _write_history(metrics_path, history)
  return ExperimentResult(
      state=state,
      history=history,
      final_eval=final_eval,
      wall_time_seconds=time.perf_counter() - started,
  )
