"""`config.json`: what defines a run, compared on resume, and what made it."""

import json
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

import tensorflow_federated as tff

from tff_mixed import execution
from tff_mixed.driver import history
from tff_mixed.driver import layout
from tff_mixed.driver.errors import OutputDirError

PROVENANCE = 'provenance'
RESOLVED = 'resolved'
# How the run was last started (rounds asked for, evaluation and checkpoint
# cadence, runtime): recorded, never compared, updated on resume.
EXECUTION = 'execution'


def full_config(task_name, seed, clients_per_round, config=None) -> dict:
  """The configuration `run_experiment` records in `config.json`."""
  run_config = dict(config or {})
  run_config.update(task=task_name, seed=seed, clients_per_round=clients_per_round)
  return run_config


def _resumed_by_other(output_dir: str, made_by: dict, now: dict) -> str:
  """One line: what of the code (or runtime) differs from the one that
  started the run at `output_dir`, and, for another runtime, what that
  means for its model."""
  changed = [k for k in dict.fromkeys([*made_by, *now])
             if made_by.get(k) != now.get(k)]
  there = ', '.join(f'{k} {made_by.get(k)}' for k in changed)
  here = ', '.join(f'{k} {now.get(k)}' for k in changed)
  arithmetic = (
      "; its model goes on with this runtime's arithmetic, which rounds "
      'differently (docs/execution.md, "Runtimes")'
      if 'runtime' in changed else '')
  return (f'Warning: output_dir {output_dir} was started with {there}; '
          f'resuming with {here}{arithmetic}.')


def provenance() -> dict[str, Any]:
  """What code made a run: tff_mixed's and TFF's versions, the git commit
  of this checkout (None outside git; `dirty` if it has changes) and the
  module run with `python -m` (`binary`, None otherwise), which
  `tasks.common.saved_run` rebuilds the run with, and the runtime it ran on
  (`tff_mixed.execution.current_runtime`)."""
  import __main__  # pylint: disable=g-import-not-at-top
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
  spec = getattr(__main__, '__spec__', None)
  return {'tff_mixed': version, 'tensorflow_federated': tff.__version__,
          'git_commit': commit,
          'git_dirty': bool(git('status', '--porcelain', '--untracked-files=no'))
                       if commit else None,
          'binary': getattr(spec, 'name', None),
          'runtime': execution.current_runtime()}


def prepare_output_dir(output_dir: str, config: Mapping[str, Any]) -> bool:
  """Creates `output_dir` with `config.json`, or checks it matches `config`.

  Returns whether it wrote `config.json` (a new run). `config.json` also
  records `provenance()` under `"provenance"`, which is not compared: a run
  resumed by other code continues, with a warning naming both. Nor is
  `"resolved"` (`record_resolved`), nor `"execution"` (how the run was
  last started: a resume that changes it rewrites it; a config.json from
  before it existed stays as it is). The caller holds the
  directory's lock (`lock_output_dir`).

  Raises:
    OutputDirError: If `output_dir` holds a run with another configuration,
      its `config.json` is unreadable, or it cannot be written.
  """
  layout.make_dir(output_dir)
  path = os.path.join(output_dir, layout.CONFIG_FILE)
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
    kept = dict(previous)
    made_by = previous.pop(PROVENANCE, None)
    previous.pop(RESOLVED, None)
    was_executed = previous.pop(EXECUTION, None)
    executed = config.pop(EXECUTION, None)
    changed = first_difference(previous, config, '')
    if changed:
      key, there, now = changed
      raise OutputDirError(
          f'output_dir {output_dir} holds a run with a different configuration '
          f'({key}: {there!r} there, {now!r} now); '
          'choose another output_dir or delete it.'
      )
    now = provenance()
    if isinstance(made_by, dict) and made_by != now:
      print(_resumed_by_other(output_dir, made_by, now), file=sys.stderr)
    # A record from before runs recorded it is left as it was written.
    if was_executed is not None and executed not in (None, was_executed):
      kept[EXECUTION] = executed
      _write(path, kept, 'the run\'s checkpoints are kept')
    return False
  _write(path, dict(config, **{PROVENANCE: provenance()}),
         'nothing of the run was written')
  return True


def _write(path: str, record: Mapping[str, Any], kept: str) -> None:
  """Writes `record` as config.json at `path`, atomically; a write the
  system refuses is `layout.write_error`'s one line, saying what is `kept`."""
  try:
    layout.write_atomically(
        path, lambda f: json.dump(record, f, indent=2, sort_keys=True))
  except OSError as e:
    raise layout.write_error(path, e, kept) from None


def first_difference(a, b, path: str = ''):
  """The first leaf, in key order, where JSON values `a` and `b` differ, as
  `(dotted path, a's, b's)` (a nested configuration names the value, not
  the whole mapping), or None."""
  if isinstance(a, dict) and isinstance(b, dict):
    for key in sorted(set(a) | set(b)):
      found = first_difference(a.get(key), b.get(key),
                                f'{path}.{key}' if path else key)
      if found:
        return found
    return None
  return None if a == b else (path, a, b)


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
      key: float(history.csv_value(value)) if isinstance(value, float) else value
      for key, value in history.flatten_metrics(
          process.get_hparams(state)).items()
  }
  path = os.path.join(output_dir, layout.CONFIG_FILE)
  with open(path) as f:
    record = json.load(f)
  record[RESOLVED] = {'hparams': hparams}
  _write(path, record, 'nothing was trained')


def remove_new_run(output_dir: str, existed: bool,
                   release: Callable[[], None]) -> None:
  """Undoes `prepare_output_dir` of a run that failed before its first
  round (or in it, before `config.json` was written): its `config.json`,
  its empty checkpoint directory, its lock, and `output_dir` itself if this
  run created it and nothing else is there."""
  config = os.path.join(output_dir, layout.CONFIG_FILE)
  if os.path.exists(config):
    os.remove(config)
  checkpoints = os.path.join(output_dir, layout.CHECKPOINT_DIR)
  if os.path.isdir(checkpoints) and not os.listdir(checkpoints):
    os.rmdir(checkpoints)
  release()
  if not existed and not os.listdir(output_dir):
    os.rmdir(output_dir)
