"""The worker started by tff_mixed.execution never outlives Python."""

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tff_mixed import execution

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _worker_pids() -> set[int]:
  out = subprocess.run(
      ['pgrep', '-f', execution.worker_binary_path()],
      capture_output=True, text=True, check=False,
  ).stdout
  return {int(p) for p in out.split()}


def _ancestors(pid: int) -> list[int]:
  """`pid`'s parent, its parent, ... up to init (empty if `pid` is gone)."""
  chain = []
  while pid > 1:
    try:
      with open(f'/proc/{pid}/stat') as f:
        pid = int(f.read().rsplit(')', 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
      break
    chain.append(pid)
  return chain


def _started_by(pid: int, workers) -> set[int]:
  """The workers among `workers` that descend from process `pid`."""
  return {w for w in workers if pid in _ancestors(w)}


def _orphans(workers) -> set[int]:
  """Workers no Python process owns any more: their watchdog (or they) were
  handed to init. Workers of other test processes running at the same time
  (pytest-xdist) still have a Python ancestor and are not counted."""
  def owned(worker):
    for ancestor in _ancestors(worker):
      try:
        with open(f'/proc/{ancestor}/cmdline', 'rb') as f:
          if b'python' in f.read():
            return True
      except OSError:
        pass
    return False
  return {w for w in workers if not owned(w)}


def _wait_until_gone(pids, timeout=120.0):  # Bounds a hang only.
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    if not pids & _worker_pids():
      return True
    time.sleep(0.2)
  return False


def test_binary_through_a_pipe_returns_and_leaves_no_worker(tmp_path):
  before = _worker_pids()
  command = (
      f'{sys.executable} -m tasks.quadratic.train --rounds=2 '
      f'--clients_per_round=2 --num_local_steps=2 --noprogress '
      f'--output_dir={tmp_path}/run | cat'
  )
  result = subprocess.run(
      command, shell=True, cwd=ROOT, capture_output=True, text=True,
      timeout=300,
  )
  assert result.returncode == 0, result.stderr[-2000:]
  assert 'x* = 0.52337' in result.stdout
  assert not _orphans(_worker_pids() - before)


_CHILD = """
import sys
import numpy as np
import tensorflow_federated as tff
from tff_mixed import execution
worker = execution.set_local_execution_context()
@tff.federated_computation(tff.FederatedType(np.float32, tff.CLIENTS))
def mean(x):
  return tff.federated_mean(x)
assert mean([1.0, 3.0]) == 2.0
print(worker.pid, flush=True)
sys.stdin.read()
"""


def test_worker_dies_when_python_is_killed():
  before = _worker_pids()
  child = subprocess.Popen(
      [sys.executable, '-c', _CHILD], cwd=ROOT, stdin=subprocess.PIPE,
      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
  )
  try:
    line = child.stdout.readline()
    assert line.strip().isdigit(), 'child did not start its worker'
    started = _started_by(child.pid, _worker_pids() - before)
    assert started, 'no worker_binary was running'
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=120)
    assert _wait_until_gone(started)
  finally:
    if child.poll() is None:
      child.kill()


def test_stop_ends_the_worker_and_the_next_call_restarts_it():
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top

  @tff.federated_computation(tff.FederatedType(np.float32, tff.CLIENTS))
  def total(x):
    return tff.federated_sum(x)

  worker = execution._worker  # pylint: disable=protected-access
  assert total([1.0, 2.0]) == 3.0
  pids = _started_by(os.getpid(), _worker_pids())
  assert pids
  execution.shutdown()
  assert worker.pid is None
  assert _wait_until_gone(pids)
  assert total([1.0, 2.0]) == 3.0


def test_the_local_worker_runs_with_two_malloc_arenas(monkeypatch):
  """glibc's per-thread arenas grew the worker ~70 KB a round; two keep it
  flat (bench/memory.py). A value the user set wins."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top

  monkeypatch.delenv('MALLOC_ARENA_MAX', raising=False)
  assert execution.worker_environment()['MALLOC_ARENA_MAX'] == '2'
  monkeypatch.setenv('MALLOC_ARENA_MAX', '4')
  assert execution.worker_environment()['MALLOC_ARENA_MAX'] == '4'
  monkeypatch.delenv('MALLOC_ARENA_MAX')

  @tff.federated_computation(tff.FederatedType(np.float32, tff.CLIENTS))
  def total(x):
    return tff.federated_sum(x)

  execution.shutdown()  # The next call starts a worker with this environment.
  assert total([1.0, 2.0]) == 3.0
  pids = _started_by(os.getpid(), _worker_pids())  # The watchdog and worker.
  assert pids
  for pid in pids:
    with open(f'/proc/{pid}/environ', 'rb') as f:
      assert b'MALLOC_ARENA_MAX=2' in f.read().split(b'\0')


def _other_addresses():
  """This machine's addresses that are not loopback (IPv4 and IPv6), from
  the routes a connect-less UDP socket would take and `hostname -I`."""
  import socket  # pylint: disable=g-import-not-at-top
  found = set()
  for family, probe in ((socket.AF_INET, '192.0.2.1'),
                        (socket.AF_INET6, '2001:db8::1')):
    with socket.socket(family, socket.SOCK_DGRAM) as s:
      try:
        s.connect((probe, 9))  # Sends nothing: only picks a route.
        found.add((family, s.getsockname()[0]))
      except OSError:
        pass
  hostname = subprocess.run(['hostname', '-I'], capture_output=True,
                            text=True, check=False).stdout.split()
  for address in hostname:
    found.add((socket.AF_INET6 if ':' in address else socket.AF_INET,
               address))
  return {(f, a) for f, a in found
          if not a.startswith('127.') and a not in ('::1', '::', '0.0.0.0')}


def _connects(family, address, port) -> bool:
  import socket  # pylint: disable=g-import-not-at-top
  with socket.socket(family, socket.SOCK_STREAM) as s:
    s.settimeout(10)
    try:
      s.connect((address, port))
      return True
    except OSError:
      return False


def test_a_local_worker_is_reachable_from_this_machine_only():
  """TFF's worker listens on every interface; preloaded with
  `_loopback_bind`, ours answers on 127.0.0.1 and refuses connections to
  this machine's other addresses (and IPv6 loopback)."""
  import socket  # pylint: disable=g-import-not-at-top
  others = _other_addresses()
  if not others:
    pytest.skip('This machine has no address but loopback.')
  worker = execution.LocalWorker()
  try:
    assert worker.stub().is_ready
    port = worker.port
    assert _connects(socket.AF_INET, '127.0.0.1', port)
    for family, address in sorted(others) + [(socket.AF_INET6, '::1')]:
      assert not _connects(family, address, port), address
  finally:
    worker.stop()


_HTTP2_HELLO = (b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'  # Preface, SETTINGS.
                b'\x00\x00\x00\x04\x00\x00\x00\x00\x00')
# Connects to 127.0.0.1:PORT as a gRPC client starts and prints what the
# server answers in its first bytes (hex; empty: closed unanswered).
_ANSWER = (
    'import socket, sys\n'
    's = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 60)\n'
    f's.sendall({_HTTP2_HELLO!r})\n'
    'try:\n'
    '  print(s.recv(64).hex())\n'
    'except ConnectionResetError:\n'
    '  print("")\n')


# A Python another user can run (this one may sit in a directory of root's).
_SYSTEM_PYTHON = '/usr/bin/python3'
# Runs a command as user nobody. Not `subprocess.run(user=...)`: that forks
# this process, whose gRPC threads do not survive a fork.
_AS_NOBODY = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups']


def _answer(port, as_nobody=False):
  result = subprocess.run(
      [*(_AS_NOBODY if as_nobody else []), _SYSTEM_PYTHON, '-I', '-c',
       _ANSWER, str(port)], capture_output=True, text=True, check=True,
      cwd='/')
  return bytes.fromhex(result.stdout.strip())


@pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists(_SYSTEM_PYTHON)
    or not shutil.which('setpriv'),
    reason='Acting as another user needs root, setpriv and a Python that '
    'user can run.')
def test_another_user_of_this_machine_cannot_use_a_local_worker():
  """A local worker keeps only connections from its own user's sockets
  (`_loopback_bind.c`): the same client as another uid (nobody) is closed
  unanswered, while this user's gets the server's first HTTP/2 frame, and
  the worker goes on serving."""
  worker = execution.LocalWorker()
  try:
    assert worker.stub().is_ready
    port = worker.port
    settings = _answer(port)
    assert settings[3] == 0x04, settings  # A SETTINGS frame.
    assert _answer(port, as_nobody=True) == b''
    assert _answer(port)[3] == 0x04
    assert worker.stub().is_ready
  finally:
    worker.stop()


def test_without_the_loopback_shim_no_local_worker_starts(monkeypatch):
  real = importlib.util.find_spec
  monkeypatch.setattr(
      importlib.util, 'find_spec',
      lambda name: None if name == 'tff_mixed._loopback_bind' else real(name))
  before = _worker_pids()
  with pytest.raises(RuntimeError, match=(
      r'^tff_mixed/_loopback_bind.c was not built \(it needs a C compiler '
      r'at install: make install, or pip install -e .\), and without it a '
      r'local TFF worker would listen on every network interface')):
    execution.LocalWorker().stub()
  assert _worker_pids() <= before


_THREADS = '''
import os, sys
import tensorflow as tf
from tff_mixed import execution
from tff_mixed.runtimes import client_loop
if sys.argv[1] == 'started':
  tf.constant(1.0) + 1.0  # TensorFlow's context starts.
execution.set_local_execution_context()
print(tf.config.threading.get_intra_op_parallelism_threads(),
      os.cpu_count() // client_loop.default_concurrency(),
      client_loop.share_cores())
execution.shutdown()
'''


@pytest.mark.parametrize('case, env, expected', [
    # Each concurrent call its share of the cores; once set, left alone.
    ('fresh', {}, lambda share: [share, share, None]),
    # A count the user chose stays.
    ('fresh', {'TF_NUM_INTRAOP_THREADS': '3'}, lambda share: [0, share, None]),
    # Too late once TensorFlow has started: nothing changes.
    ('started', {}, lambda share: [0, share, None]),
])
def test_the_runtime_s_calls_each_get_their_share_of_the_cores(case, env,
                                                               expected):
  """A process of its own: the intra-op pool is fixed when TensorFlow's
  context starts."""
  base = {k: v for k, v in os.environ.items()
          if k != 'TF_NUM_INTRAOP_THREADS'}  # The suite's (conftest.py).
  result = subprocess.run(
      [sys.executable, '-c', _THREADS, case],
      env={**base, 'TF_CPP_MIN_LOG_LEVEL': '3', **env},
      capture_output=True, text=True, check=False,
      cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  assert result.returncode == 0, result.stderr[-1500:]
  threads, share, again = result.stdout.split()
  assert int(share) >= 1
  assert [int(threads), int(share),
          None if again == 'None' else int(again)] == expected(int(share))
