"""Runs a grid's runs, N at once, each an ordinary binary in a subprocess.

A finished run (its metrics.csv reaches the run's `--rounds`) is skipped; an
interrupted one is started again and resumes from its last checkpoint (the
binary's own resume). Each run's output goes to `logs/<setting>.seed_<s>.log`.
A run that fails is reported with its directory, its log and its error
line, and does not stop the others. One runner runs a grid directory at a
time (`lock_grid`); a run whose directory another process holds (an
`--index` job, a user's own command) is "running elsewhere", not failed.
Each binary is started so that it gets SIGTERM when the runner dies, even by
`kill -9` (`_LAUNCH`): it stops as on Ctrl-C, keeping its last checkpoint,
and nothing is left running unwatched.
"""

import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, Optional, TextIO

from tasks.grid import spec as spec_lib
from tff_mixed.driver import errors
from tff_mixed.driver import history
from tff_mixed.driver import layout
from tff_mixed.driver import lock

# Starts a run's binary (argv after the runner's pid) so that the kernel
# sends it SIGTERM when the runner ends, however it ends (Linux's
# PR_SET_PDEATHSIG, kept across exec); if the runner is already gone, it
# does not start.
_LAUNCH = (
    'import ctypes, os, signal, sys\n'
    'if sys.platform.startswith("linux"):\n'
    '  ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)\n'
    'if os.getppid() != int(sys.argv[1]):\n'
    '  sys.exit("grid runner gone: not started")\n'
    'os.execv(sys.argv[2], sys.argv[2:])\n')
# What absl prints after a flag error; the error is the line before.
_ABSL_HINT = 'Pass --helpshort or --helpfull to see help on flags.'


def lock_grid(output_dir: str):
  """Takes the grid directory's lock (one runner per grid); returns its
  release.

  Raises:
    errors.OutputDirError: In one line, if another runner holds it.
  """
  try:
    return lock.lock_output_dir(output_dir, what='grid')
  except errors.OutputDirError:
    owner = lock.holder(output_dir) or {}
    raise errors.OutputDirError(
        f'grid {output_dir} is being run by pid {owner.get("pid", "?")} on '
        f'{owner.get("host", "?")} (since {owner.get("started", "?")}); one '
        'runner per grid directory: wait for it, or stop it and run this '
        'again.') from None


def rounds_done(run: spec_lib.Run) -> int:
  """The last round in the run's metrics.csv (0 if none or unreadable)."""
  path = os.path.join(run.output_dir, layout.METRICS_FILE)
  try:
    rows = history.read_history(path, math.inf)
  except errors.OutputDirError:
    return 0
  return int(rows[-1]['round']) if rows else 0


def is_done(run: spec_lib.Run) -> bool:
  return rounds_done(run) >= run.rounds


def log_path(output_dir: str, run: spec_lib.Run) -> str:
  return os.path.join(output_dir, spec_lib.LOGS_DIR,
                      f'{run.setting.dir_name}.seed_{run.seed}.log')


def _error_line(path: str) -> str:
  """The error a failed run's log ends with (absl's help hint skipped)."""
  try:
    with open(path, errors='replace') as f:
      lines = [line.strip() for line in f if line.strip()]
  except OSError:
    return ''
  while lines and lines[-1] == _ABSL_HINT:
    lines.pop()
  return lines[-1] if lines else ''


def _elsewhere(run: spec_lib.Run) -> Optional[str]:
  """Who else runs `run` ("pid N on host"), if its directory is locked."""
  owner = lock.holder(run.output_dir)
  if owner is None:
    return None
  return f'pid {owner.get("pid", "?")} on {owner.get("host", "?")}'


def _bar(done: int, total: int, width: int = 20) -> str:
  filled = round(width * done / total) if total else width
  return '[' + '#' * filled + '.' * (width - filled) + ']'


class _Running:
  """A started run: its process, log file and start time."""

  def __init__(self, run, process, log, log_file):
    self.run, self.process, self.log, self.log_file = run, process, log, log_file
    self.start = time.monotonic()


def launch(run: spec_lib.Run, log_file: TextIO) -> subprocess.Popen:
  """Starts `run`'s binary in a subprocess writing to `log_file`, so that
  it gets SIGTERM when this process ends, however it ends (`_LAUNCH`)."""
  return subprocess.Popen(
      [sys.executable, '-c', _LAUNCH, str(os.getpid()), *run.argv()],
      stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
      # Our signal handler forwards signals; a terminal's Ctrl-C would
      # reach them twice.
      start_new_session=True)


def _run_on_a_node(argv: list[str], log: str, cwd: str) -> int:
  """A Ray task: runs `argv` (a run's binary, its Python replaced by this
  node's) in `cwd` (the runner's) appending to `log`, and returns its exit
  code; cancelled
  (`ray.cancel`), it gives the binary SIGINT, which stops it as Ctrl-C does
  (keeping its last checkpoint), and waits for it."""
  with open(log, 'a') as log_file:
    process = subprocess.Popen(
        [sys.executable, '-c', _LAUNCH, str(os.getpid()), sys.executable,
         *argv[1:]],
        stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True, cwd=cwd)
    try:
      return process.wait()
    except KeyboardInterrupt:  # What ray.cancel raises in a running task.
      process.send_signal(signal.SIGINT)
      return process.wait()


class _OnRay:
  """A run handed to Ray: `run_all`'s view of a process (`poll`,
  `returncode`, `send_signal`)."""

  def __init__(self, ray, result):
    self._ray, self._result = ray, result
    self.returncode = None

  def poll(self) -> Optional[int]:
    if self.returncode is None:
      ready, _ = self._ray.wait([self._result], timeout=0)
      if ready:
        try:
          self.returncode = self._ray.get(self._result)
        except self._ray.exceptions.TaskCancelledError:
          self.returncode = -signal.SIGINT
        except self._ray.exceptions.RayError:  # Its node or worker died.
          self.returncode = 1
    return self.returncode

  def send_signal(self, signum: int) -> None:
    del signum  # Whichever: the task stops its binary as on Ctrl-C.
    self._ray.cancel(self._result)


def on_ray(cpus: float = 1.0, gpus: float = 0.0
           ) -> Callable[[spec_lib.Run, TextIO], _OnRay]:
  """A `run_all` start that hands each run to the current Ray (a local one
  or a cluster: `tff_mixed.execution.ray_context`) as a task asking for
  `cpus` CPUs and `gpus` GPUs, so Ray places each run on a node with them
  free and queues the rest. The grid directory must be at the same path on
  every node (a shared file system): the runs write there, and so does
  each run's log."""
  import ray  # pylint: disable=g-import-not-at-top
  task = ray.remote(num_cpus=cpus, num_gpus=gpus, max_retries=0)(
      _run_on_a_node)

  def start(run: spec_lib.Run, log_file: TextIO) -> _OnRay:
    return _OnRay(ray, task.remote(run.argv(), log_file.name, os.getcwd()))

  return start


def run_all(runs: Sequence[spec_lib.Run], output_dir: str, *, parallel: int,
            out: TextIO = sys.stdout,
            start: Callable[[spec_lib.Run, TextIO], Any] = launch,
            ) -> list[spec_lib.Run]:
  """Runs every unfinished run of `runs`, `parallel` at once.

  Prints a line when a run starts or ends, with the grid's progress. On
  SIGINT or SIGTERM the running binaries get the same signal (each keeps its
  last checkpoint) and the signal is raised again once they have ended; if
  the runner dies otherwise, they get SIGTERM from the kernel. A run whose
  directory another process holds is left to it ("running elsewhere").
  The caller holds the grid's lock (`lock_grid`).

  Args:
    runs: The grid's runs.
    output_dir: The grid directory (logs go to its `logs/`).
    parallel: How many runs at once.
    out: Where the progress lines go.
    start: `start(run, log_file)` starts a run's binary and returns its
      process: a `subprocess.Popen`, or anything with its `poll()`,
      `returncode` and `send_signal(signum)`. `launch` by default; the
      tests' start forks the binary from a process that imported TensorFlow
      once.

  Returns:
    The runs that failed, in the grid's order (not the order they ended).
  """
  total = len(runs)
  todo = [r for r in runs if not is_done(r)]
  skipped = total - len(todo)
  estimate = (' (how long the rest takes is said as runs finish)'
              if len(todo) > 1 else '')
  print(f'grid: {total} runs, {skipped} already finished, {len(todo)} to '
        f'run, {parallel} at once{estimate}; logs in '
        f'{os.path.join(output_dir, spec_lib.LOGS_DIR)}', file=out, flush=True)
  os.makedirs(os.path.join(output_dir, spec_lib.LOGS_DIR), exist_ok=True)
  running: list[_Running] = []
  failed: list[spec_lib.Run] = []
  elsewhere: list[spec_lib.Run] = []
  finished = skipped
  received: list[int] = []
  durations: list[float] = []  # Of the runs this call finished.

  def forward(signum, unused_frame):
    received.append(signum)
    for r in running:
      if r.process.poll() is None:
        r.process.send_signal(signum)

  previous = {s: signal.signal(s, forward)
              for s in (signal.SIGINT, signal.SIGTERM)}
  try:
    queue = list(todo)
    while queue or running:
      while queue and len(running) < parallel and not received:
        run = queue.pop(0)
        other = _elsewhere(run)
        if other:
          elsewhere.append(run)
          print(f'  running elsewhere  {run.name} ({other}; left to it)',
                file=out, flush=True)
          continue
        log = log_path(output_dir, run)
        log_file = open(log, 'a')  # A resumed run's log continues.
        process = start(run, log_file)
        running.append(_Running(run, process, log, log_file))
        resumed = rounds_done(run)
        note = (f' (stopped at round {resumed}; resumes from its last '
                'checkpoint)' if resumed else '')
        print(f'  started  {run.name}{note}', file=out, flush=True)
      if received and not running:
        break
      time.sleep(0.2)
      for r in [r for r in running if r.process.poll() is not None]:
        running.remove(r)
        r.log_file.close()
        code = r.process.returncode
        seconds = time.monotonic() - r.start
        if code == 0 and is_done(r.run):
          finished += 1
          durations.append(seconds)
          status = f'finished {r.run.name} in {seconds:.0f}s'
          if queue or running:
            status += f'; {_left(durations, queue, running, parallel)}'
        elif received:
          status = f'stopped  {r.run.name} (resumes on the next call)'
        elif other := _elsewhere(r.run):  # Taken between our look and
          elsewhere.append(r.run)  # its start.
          status = f'running elsewhere  {r.run.name} ({other}; left to it)'
        else:
          failed.append(r.run)
          status = (f'FAILED   {r.run.name} (exit {code}; {r.run.output_dir};'
                    f' log {r.log}): {_error_line(r.log)}')
        ended = finished + len(failed) + len(elsewhere)
        print(f'{_bar(ended, total)} {ended}/{total} {status}', file=out,
              flush=True)
  finally:
    for s, handler in previous.items():
      signal.signal(s, handler)
  if received:
    print(f'grid: stopped by signal {received[0]}; {finished}/{total} runs '
          'finished. Run the same command again to finish the rest.',
          file=out, flush=True)
    signal.raise_signal(received[0])
  print(f'grid: {finished} of {total} runs finished'
        + (f', {len(failed)} failed' if failed else '')
        + (f', {len(elsewhere)} running elsewhere (run the same command '
           'again once they end)' if elsewhere else '') + '.', file=out,
        flush=True)
  return sorted(failed, key=runs.index)


def _left(durations: Sequence[float], queue: Sequence, running: Sequence,
          parallel: int) -> str:
  """An estimate of the time left: the runs not finished, at the mean
  time of those finished so far, `parallel` at once (the running ones
  counted half done)."""
  mean = sum(durations) / len(durations)
  seconds = mean * (len(queue) + 0.5 * len(running)) / max(1, parallel)
  if seconds < 90:
    text = f'{seconds:.0f} s'
  elif seconds < 5400:
    text = f'{seconds / 60:.0f} min'
  else:
    text = f'{seconds / 3600:.1f} h'
  left = len(queue) + len(running)
  return f'about {text} left ({left} run{"s" if left != 1 else ""})'


def run_one(run: spec_lib.Run, out: TextIO = sys.stdout) -> Optional[int]:
  """The `--index` path: runs `run` in this process's place (exec), unless
  it is finished (then returns 0)."""
  if is_done(run):
    print(f'{run.name}: finished ({run.output_dir})', file=out, flush=True)
    return 0
  out.flush()
  argv = run.argv()
  os.execv(argv[0], argv)
  return None  # Not reached.
