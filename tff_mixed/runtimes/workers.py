"""TFF's C++ worker processes: local ones this Python process owns (ended
with it, on loopback only) and remote ones someone else started.

`tff_mixed.execution` builds TFF's contexts on them and re-exports both.
"""

import importlib.util
import os
import signal
import subprocess
import threading
import time
from typing import Optional

import grpc
import portpicker
import tensorflow_federated as tff

_READY_TIMEOUT_SECONDS = 120.0
_POLL_SECONDS = 0.1
_STOP_TIMEOUT_SECONDS = 10.0
REMOTE_READY_TIMEOUT_SECONDS = 10.0
_GRPC_MAX_MESSAGE_BYTES = 2 * 1000 * 1000 * 1000
_GRPC_OPTIONS = [
    ('grpc.max_message_length', _GRPC_MAX_MESSAGE_BYTES),
    ('grpc.max_receive_message_length', _GRPC_MAX_MESSAGE_BYTES),
    ('grpc.max_send_message_length', _GRPC_MAX_MESSAGE_BYTES),
]

# Runs the worker in the background, then blocks reading stdin (the pipe).
# EOF means the owning Python process has gone: kill the worker (SIGINT would
# not do: a background job of a non-interactive sh ignores it) and wait.
_WATCHDOG = (
    '"$0" "$@" </dev/null & worker=$!; '
    'read _unused; '
    'kill -KILL "$worker" 2>/dev/null; wait "$worker"'
)


def worker_binary_path() -> str:
  """Returns the path of the C++ worker shipped inside the TFF package."""
  return os.path.join(os.path.dirname(tff.__file__), 'data', 'worker_binary')


# glibc's malloc gives each of the worker's threads its own arena (up to 8 per
# core); what a round frees in one arena is not reused by the next round's
# allocations in another, and the worker's resident memory grew ~70 KB a round
# (137 -> 174 MB from round 500 to 2,000, `bench/memory.py`). Two arenas keep
# it flat (BENCHMARKS.md, "Memory over 2,000 rounds"). A value the user set
# wins.
WORKER_MALLOC_ARENAS = '2'


def loopback_shim_path() -> str:
  """The shared object that keeps a local worker on loopback.

  TFF's `worker_binary` takes only `--port` and listens on every interface
  (`[::]:PORT`): unauthenticated gRPC that runs any TensorFlow it is sent,
  files read and written included. `tff_mixed/_loopback_bind.c`, built at
  install (setup.py) and preloaded into the worker, turns its bind to the
  wildcard address into one to 127.0.0.1, so only this machine reaches it,
  and closes every connection it accepts whose other end is not a socket
  of this user's, so no other user of the machine reaches it either.

  Raises:
    RuntimeError: If it was not built (no C compiler at install).
  """
  spec = importlib.util.find_spec('tff_mixed._loopback_bind')
  if spec is None or not spec.origin or not os.path.isfile(spec.origin):
    raise RuntimeError(
        'tff_mixed/_loopback_bind.c was not built (it needs a C compiler at '
        'install: make install, or pip install -e .), and without it a local '
        'TFF worker would listen on every network interface; install it, or '
        'run in process (--runtime=in_process, the default).')
  return spec.origin


def worker_environment() -> dict[str, str]:
  """The environment a local worker starts with: this process's, with
  `MALLOC_ARENA_MAX` = `WORKER_MALLOC_ARENAS` unless it is set, and the
  loopback shim (`loopback_shim_path`) preloaded."""
  env = dict(os.environ)
  env.setdefault('MALLOC_ARENA_MAX', WORKER_MALLOC_ARENAS)
  env['LD_PRELOAD'] = ' '.join(
      p for p in (loopback_shim_path(), env.get('LD_PRELOAD')) if p)
  return env


class LocalWorker:
  """One C++ `worker_binary` tied to the lifetime of this Python process."""

  def __init__(
      self,
      *,
      max_concurrent_computation_calls: int = -1,
      log_path: Optional[str] = None,
  ):
    self._max_calls = max_concurrent_computation_calls
    self._log_path = log_path
    self._lock = threading.Lock()
    self._process: Optional[subprocess.Popen] = None
    self._pipe_write_fd: Optional[int] = None
    self._stub = None
    self._port: Optional[int] = None

  @property
  def pid(self) -> Optional[int]:
    """The watchdog's pid, which is also the worker's process-group id."""
    return None if self._process is None else self._process.pid

  @property
  def port(self) -> Optional[int]:
    """The port the worker listens on, on 127.0.0.1 only."""
    return None if self._process is None else self._port

  def stub(self) -> tff.framework.RemoteExecutorGrpcStub:
    """Returns a ready stub, (re)starting the worker if needed."""
    with self._lock:
      if self._stub is not None and self._stub.is_ready:
        return self._stub
      self._stop_locked()
      self._start_locked()
      return self._stub

  def _start_locked(self):
    binary = worker_binary_path()
    if not os.path.isfile(binary):
      raise RuntimeError(f'TFF worker binary not found at {binary}.')
    env = worker_environment()  # Refuses before a worker starts exposed.
    port = portpicker.pick_unused_port()
    args = [
        'sh',
        '-c',
        _WATCHDOG,
        binary,
        f'--port={port}',
        f'--max_concurrent_computation_calls={self._max_calls}',
    ]
    read_fd, write_fd = os.pipe()
    log = (
        open(self._log_path, 'ab')
        if self._log_path
        else subprocess.DEVNULL
    )
    try:
      self._process = subprocess.Popen(
          args,
          stdin=read_fd,
          stdout=log,
          stderr=subprocess.STDOUT,
          start_new_session=True,  # Own process group: killpg reaches both.
          env=env,
      )
    finally:
      os.close(read_fd)
      if log is not subprocess.DEVNULL:
        log.close()
    self._pipe_write_fd = write_fd
    self._port = port
    channel = grpc.insecure_channel(f'127.0.0.1:{port}', _GRPC_OPTIONS)
    stub = tff.framework.RemoteExecutorGrpcStub(channel)
    deadline = time.monotonic() + _READY_TIMEOUT_SECONDS
    while not stub.is_ready:
      if self._process.poll() is not None or time.monotonic() > deadline:
        self._stop_locked()
        where = self._log_path or 'a log file (pass worker_log=...)'
        raise RuntimeError(
            f'TFF worker on port {port} did not become ready; see {where}.'
        )
      time.sleep(_POLL_SECONDS)
    self._stub = stub

  def stop(self):
    """Stops the worker (idempotent). The next computation starts a new one."""
    with self._lock:
      self._stop_locked()

  def _stop_locked(self):
    self._stub = None
    if self._pipe_write_fd is not None:
      os.close(self._pipe_write_fd)  # The watchdog sees EOF and stops it.
      self._pipe_write_fd = None
    process, self._process = self._process, None
    if process is None:
      return
    try:
      process.wait(timeout=_STOP_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
      pass
    try:
      os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
      pass
    process.wait()


class RemoteWorker:
  """A TFF `worker_binary` someone else started, at `host:port`.

  Start one on another machine with the worker shipped inside the TFF
  package (`python -c "from tff_mixed import execution;
  print(execution.worker_binary_path())"`):

    MALLOC_ARENA_MAX=2 worker_binary --port=8000

  It speaks unauthenticated gRPC: use it on a trusted network only. File-backed
  client data must be at the same path on every worker.
  """

  def __init__(self, address: str, *,
               ready_timeout_seconds: float = REMOTE_READY_TIMEOUT_SECONDS):
    self.address = address
    self._timeout = ready_timeout_seconds
    self._stub = None

  def stub(self) -> tff.framework.RemoteExecutorGrpcStub:
    """A ready gRPC stub to the worker (a new channel if the last is not
    ready)."""
    if self._stub is not None and self._stub.is_ready:
      return self._stub
    channel = grpc.insecure_channel(self.address, _GRPC_OPTIONS)
    try:
      grpc.channel_ready_future(channel).result(timeout=self._timeout)
    except grpc.FutureTimeoutError:
      channel.close()
      raise RuntimeError(
          f'TFF worker at {self.address} is not reachable (no answer in '
          f'{self._timeout:g} s); start it with worker_binary --port=PORT.'
      ) from None
    self._stub = tff.framework.RemoteExecutorGrpcStub(channel)
    return self._stub

  def stop(self):
    """Forgets the connection (the worker belongs to whoever started it)."""
    self._stub = None
