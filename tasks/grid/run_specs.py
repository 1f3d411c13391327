"""Each run of a grid as a spec on disk before any run starts.

`with_specs` gives every run of a grid its run spec, read from the run's
flags as its binary reads them: a repository task's binary in this process
(`task_registry.spec_from_args`), a binary of your own in a process of its
own (`tasks.grid.write_specs`). The grid runner then starts each run's
binary with `--spec_json`.
"""

import contextlib
import dataclasses
import io
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from typing import Any, Optional

from tasks.grid import runner
from tasks.grid import spec as spec_lib
from tasks.grid import write_specs as write_specs_lib


class SpecError(ValueError):
  """A run's flags that its binary refuses (one line: the run, the flag)."""


def write_specs(request_path: str) -> subprocess.CompletedProcess:
  """Runs `tasks.grid.write_specs` on `request_path` in a new Python (the
  binary's flags and the runner's cannot share absl's `FLAGS`)."""
  return subprocess.run(
      [sys.executable, '-m', 'tasks.grid.write_specs', request_path],
      capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)


def with_specs(runs: Sequence[spec_lib.Run], output_dir: str, *,
               unfinished_only: bool = False,
               write: Callable[[str], Any] = write_specs,
               ) -> list[spec_lib.Run]:
  """`runs` (those not finished, with `unfinished_only`), each given its run
  spec, `<output_dir>/specs/<setting>/seed_<s>.json`: its flags read as its
  binary reads them (presets, defaults, checks), every run's before any
  is written. A repository task's binary (`tasks.<task>.train`) is read in
  this process (`task_registry.spec_from_args`); a binary of your own in
  one process of its own (`tasks.grid.write_specs`), or, if it takes flags
  only (no `main.spec_of`), it keeps its flags. What the binary says as it
  reads them (a preset's duration) goes to stderr, once. The binary then
  runs the spec (`--spec_json`), so what a run trains is a value on disk
  before it starts, and a flag wrong in any run is one error before any
  starts, with nothing written.

  Args:
    runs: Runs of one grid (one binary).
    output_dir: The grid directory.
    unfinished_only: Leave finished runs as they are.
    write: For a binary of your own, `write(request_path)` runs
      `tasks.grid.write_specs` and returns its `returncode`, `stdout` and
      `stderr` (`write_specs`; the tests' forks it from a process that
      imported TensorFlow once).

  Raises:
    SpecError: One line naming the run and what its binary refused.
  """
  todo = [r for r in runs if not (unfinished_only and runner.is_done(r))]
  if not todo:
    return list(runs)
  specs_dir = os.path.join(output_dir, spec_lib.SPECS_DIR)
  placed = {r.name: dataclasses.replace(r, spec_file=os.path.join(
      specs_dir, r.setting.dir_name, f'seed_{r.seed}.json')) for r in todo}
  task = _repository_task(todo[0].binary)
  if task is not None:
    notes = _read_here(task, list(placed.values()))
  else:
    notes = _read_by_binary(list(placed.values()), write)
    if notes is None:
      return list(runs)
  for note in notes:  # Not on stdout: `--list`'s commands are read there.
    print(note, file=sys.stderr)
  return [placed.get(r.name, r) for r in runs]


def _repository_task(binary: str) -> Optional[str]:
  """The task whose training binary `binary` is (`tasks.<task>.train`), if
  it is one of this repository's."""
  from tasks.common import task_registry  # pylint: disable=g-import-not-at-top
  parts = binary.split('.')
  if (len(parts) == 3 and parts[0] == 'tasks' and parts[2] == 'train'
      and parts[1] in task_registry.names()
      and task_registry.registered(parts[1]) is None):
    return parts[1]
  return None


def _read_here(task: str, runs: list[spec_lib.Run]) -> list[str]:
  """Writes `runs`' specs, each read by `task_registry.spec_from_args`,
  and returns what the readings said (each line once).

  Raises:
    SpecError: The first run refused, before any spec is written.
  """
  from tasks.common import task_registry  # pylint: disable=g-import-not-at-top
  texts, said = [], io.StringIO()
  with contextlib.redirect_stderr(said):  # The presets' notes, once each.
    for run in runs:
      try:
        texts.append(task_registry.spec_from_args(task, run.args()).to_json())
      except task_registry.TaskSpecError as e:
        raise SpecError(f'run {run.name}: {e}') from None
  write_specs_lib.write_files(
      [(run.spec_file, text) for run, text in zip(runs, texts)])
  return list(dict.fromkeys(
      line.strip() for line in said.getvalue().splitlines() if line.strip()))


def _read_by_binary(runs: list[spec_lib.Run],
                    write: Callable[[str], Any]) -> Optional[list[str]]:
  """Writes `runs`' specs by `write` (`tasks.grid.write_specs`) and returns
  what the binary said, or None for a binary that takes flags only.

  Raises:
    SpecError: What the binary (or its import) refused, one line.
  """
  request = {'binary': runs[0].binary, 'runs': [
      {'name': r.name, 'args': r.args(), 'spec_file': r.spec_file}
      for r in runs]}
  # The request outside the grid: a refusal leaves nothing there.
  with tempfile.NamedTemporaryFile('w', suffix='.request',
                                   delete=False) as f:
    json.dump(request, f)
  try:
    result = write(f.name)
  finally:
    os.remove(f.name)
  *notes, said = (result.stdout or '').strip().splitlines() or ['']
  if result.returncode != 0 or said not in ('specs', 'flags'):
    lines = (result.stderr or '').strip().splitlines()
    raise SpecError(lines[-1] if lines else (
        f'tasks.grid.write_specs for {runs[0].binary} ended with exit '
        f'{result.returncode} and said nothing.'))
  return None if said == 'flags' else notes
