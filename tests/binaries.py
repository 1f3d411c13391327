"""Runs the repository's binaries (`python -m MODULE FLAGS...`) for tests.

`run` is what every test module calls instead of its own `subprocess.run`
copy. By default a binary runs in a child forked from one *zygote*: a
subprocess of this test process that imported TensorFlow, TFF and
matplotlib's pyplot once (as tests/test_help.py does), so a binary costs its
own work, not ~6 s of imports. The child is a fresh process for everything the binary does: it
imports the binary's module (absl flags are defined there, once per child:
no DuplicateFlagError), parses its flags, builds its own TFF execution
context and worker (the zygote never made one: no gRPC channel is shared),
and its exit code, stdout and stderr are returned like `subprocess.run`'s.

`subprocess=True` (or an `env=`) runs a real `python -m` instead, for a test
whose point is the process itself or whose environment must be read at
TensorFlow's import.
"""

import json
import os
import select
import signal
import subprocess as _subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT_SECONDS = 900  # Bounds a hang only: a busy 2-core machine is slow.

# Python code run first by every process started here. A suite started in
# the background inherits SIGINT ignored, and so would a binary (it would
# train on through Ctrl-C); a terminal's binary has Python's handler. Not a
# `preexec_fn`: that makes `subprocess` fork() this test process, whose
# gRPC threads (TFF's runtime) abort a forked child in gRPC's fork handler
# ("Check failed: next_worker->state == KICKED"); without one it uses vfork.
_AS_FROM_A_TERMINAL = (
    'import signal; signal.signal(signal.SIGINT, signal.default_int_handler)')

_ZYGOTE = _AS_FROM_A_TERMINAL + r'''
import json, os, runpy, sys, traceback
import tensorflow  # Imported once; every child inherits it.
import tensorflow_federated
import matplotlib  # As tasks/common/reports.py plots: ~0.6 s a binary.
matplotlib.use('Agg')
import matplotlib.pyplot
sys.stdout.write('ready\n')
sys.stdout.flush()
for line in sys.stdin:
  request = json.loads(line)
  pid = os.fork()
  if pid == 0:
    code = 1
    try:
      out = os.open(request['stdout'], os.O_WRONLY)
      err = os.open(request['stderr'], os.O_WRONLY)
      null = os.open(os.devnull, os.O_RDONLY)
      os.dup2(null, 0)
      os.dup2(out, 1)
      os.dup2(err, 2)
      os.setpgid(0, 0)  # A timeout kills the binary and its workers.
      os.chdir(request['cwd'])
      sys.stdin = open(os.devnull)
      module = request['module']
      try:
        if module.endswith('.py'):  # `python path/script.py`.
          path = os.path.abspath(module)
          # The script's directory first, then this checkout (as where
          # it is the installed one, not another worktree's -e install).
          sys.path[0:1] = [os.path.dirname(path), request['cwd']]
          sys.argv = [module, *request['args']]
          runpy.run_path(path, run_name='__main__')
        else:  # `python -m module` from cwd.
          sys.path[0] = request['cwd']
          sys.argv = ['-m', *request['args']]
          runpy.run_module(module, run_name='__main__', alter_sys=True)
        code = 0
      except SystemExit as e:
        if e.code is None:
          code = 0
        elif isinstance(e.code, int):
          code = e.code
        else:
          sys.stderr.write(f'{e.code}\n')
          code = 1
      except BaseException:  # pylint: disable=broad-except
        traceback.print_exc()
        code = 1
      try:  # Interpreter exit as `python -m`'s: threads, atexit handlers.
        import atexit, threading
        threading._shutdown()  # pylint: disable=protected-access
        atexit._run_exitfuncs()  # pylint: disable=protected-access
      except BaseException:  # pylint: disable=broad-except
        traceback.print_exc()
    finally:
      try:
        sys.stdout.flush()
        sys.stderr.flush()
      finally:
        os._exit(code)
  sys.stdout.write(json.dumps({'pid': pid}) + '\n')
  sys.stdout.flush()
  _, status = os.waitpid(pid, 0)
  sys.stdout.write(json.dumps({'code': os.waitstatus_to_exitcode(status)})
                   + '\n')
  sys.stdout.flush()
'''

_lock = threading.Lock()
_zygote = None
_buffer = b''  # What was read from the zygote past the last line.


def _start_zygote():
  global _zygote
  if _zygote is None or _zygote.poll() is not None:
    _zygote = _subprocess.Popen(
        [sys.executable, '-c', _ZYGOTE], cwd=ROOT, stdin=_subprocess.PIPE,
        stdout=_subprocess.PIPE, stderr=_subprocess.DEVNULL, text=True,
        bufsize=1)
    global _buffer
    _buffer = b''
    line = _readline(_zygote.stdout, None)
    if line is None or line.strip() != 'ready':
      _zygote.kill()
      _zygote = None
      raise RuntimeError('the forking test runner did not start')
  return _zygote


def stop():
  """Ends the zygote (the next `run` starts another)."""
  global _zygote
  with _lock:
    if _zygote is not None:
      _zygote.stdin.close()
      try:
        _zygote.wait(timeout=30)
      except _subprocess.TimeoutExpired:
        _zygote.kill()
        _zygote.wait()
      _zygote = None


def _readline(stream, timeout_seconds):
  """The zygote's next line (unbuffered: `select` sees every byte not yet
  read), or None after `timeout_seconds` (None: no limit) or at its end."""
  global _buffer
  deadline = None if timeout_seconds is None else (
      time.monotonic() + timeout_seconds)
  while b'\n' not in _buffer:
    left = None if deadline is None else max(0.0, deadline - time.monotonic())
    ready, _, _ = select.select([stream.fileno()], [], [], left)
    if not ready:
      return None
    chunk = os.read(stream.fileno(), 65536)
    if not chunk:
      return None
    _buffer += chunk
  line, _buffer = _buffer.split(b'\n', 1)
  return line.decode()


def _forked(module, args, cwd, timeout):
  with _lock, tempfile.TemporaryDirectory() as tmp:
    paths = {name: os.path.join(tmp, name) for name in ('stdout', 'stderr')}
    for path in paths.values():
      open(path, 'w').close()
    zygote = _start_zygote()
    zygote.stdin.write(json.dumps(
        {'module': module, 'args': list(args), 'cwd': cwd, **paths}) + '\n')
    zygote.stdin.flush()
    pid = json.loads(_readline(zygote.stdout, None))['pid']
    line = _readline(zygote.stdout, timeout)
    if line is None:
      try:
        os.killpg(pid, signal.SIGKILL)
      except OSError:
        pass
      _readline(zygote.stdout, 60)  # Its exit status.
    with open(paths['stdout']) as f:
      stdout = f.read()
    with open(paths['stderr']) as f:
      stderr = f.read()
    command = _command(module, args)
    if line is None:
      raise _subprocess.TimeoutExpired(command, timeout, stdout, stderr)
    return _subprocess.CompletedProcess(
        command, json.loads(line)['code'], stdout, stderr)


def _command(module, args):
  if module.endswith('.py'):
    return [sys.executable, module, *args]
  return [sys.executable, '-m', module, *args]


def popen(module, *args, **kwargs):
  """`python -X faulthandler -m module *args` from the repository, running:
  a `subprocess.Popen` (`kwargs` are its own) for a test that signals it.
  SIGINT is Python's handler, as from a terminal; faulthandler makes a
  SIGABRT print every thread's stack."""
  code = (_AS_FROM_A_TERMINAL + '; import runpy, sys; del sys.argv[0]; '
          'runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)')
  kwargs.setdefault('cwd', ROOT)
  # Not the test process's stdin (pytest-xdist's channel to its worker).
  kwargs.setdefault('stdin', _subprocess.DEVNULL)
  return _subprocess.Popen(
      [sys.executable, '-X', 'faulthandler', '-c', code, module, *args],
      **kwargs)


def run(module, *args, timeout=TIMEOUT_SECONDS, cwd=ROOT, env=None,
        subprocess=False):  # pylint: disable=redefined-outer-name
  """`python -m module *args` (or `python module *args` for a path ending
  in .py, relative to `cwd`) from `cwd`: a CompletedProcess with text stdout
  and stderr (raises subprocess.TimeoutExpired after `timeout`)."""
  if subprocess or env is not None:
    return _subprocess.run(
        _command(module, args), cwd=cwd, env=env,
        capture_output=True, text=True, timeout=timeout)
  return _forked(module, args, cwd, timeout)


def assert_same_metrics(path_a, path_b, rtol=1e-6):
  """Two runs' metrics.csv hold the same rounds, columns and values, to
  float rounding (`rtol`), but the wall-clock seconds. Training metrics of
  two runtimes agree bit for bit; TFF's worker evaluates through its own
  graph optimisation, which may move an evaluation's last digit."""
  import csv  # pylint: disable=g-import-not-at-top
  import math  # pylint: disable=g-import-not-at-top

  def rows(path):
    with open(path) as f:
      return [{k: v for k, v in row.items()
               if 'seconds' not in k or k.startswith('simulated')}
              for row in csv.DictReader(f)]

  a, b = rows(path_a), rows(path_b)
  assert len(a) == len(b) and a, (len(a), len(b))
  for row_a, row_b in zip(a, b):
    assert list(row_a) == list(row_b)
    for key, value in row_a.items():
      try:
        x, y = float(value), float(row_b[key])
        close = math.isclose(x, y, rel_tol=rtol, abs_tol=1e-12) or (
            math.isnan(x) and math.isnan(y))
      except ValueError:
        close = value == row_b[key]
      assert close, (row_a['round'], key, value, row_b[key])
