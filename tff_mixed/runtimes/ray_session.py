"""A Ray session for `ray_runtime`: a local Ray this process starts and ends
(on 127.0.0.1 only, in a private directory, no usage statistics, ended even
when this process is killed), or a running cluster it joins and leaves
running.

A local Ray: `ray.init(_node_ip_address='127.0.0.1')` puts Ray's GCS, raylet,
object store and every worker on loopback; its session files and sockets go
in a directory only this user can enter (Ray makes its own directory
world-writable, so it is made inside one of ours); `RAY_USAGE_STATS_ENABLED=0`
before Ray starts any process; no dashboard and no metrics agent. Ray's
processes are ended by `Session.end()` (`ray.shutdown`), and by a watchdog
when this process is gone without it (SIGKILL included): Ray's dashboard
agent outlives a killed driver otherwise.

A cluster: anyone who can reach its ports can run code on it; docs/execution.md,
"Ray", says how to keep it on a trusted network with Ray's token
authentication.
"""

import os
import shutil
import socket
import subprocess
import tempfile
import warnings
from typing import Optional


class RayRuntimeError(RuntimeError):
  """Ray could not be started or joined, or a round cannot run on it."""


def import_ray():
  """The `ray` module, or RayRuntimeError (one line) without it."""
  try:
    import ray  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise RayRuntimeError(
        'the ray runtime needs the ray package (make install installs the '
        'pinned ray==2.52.1; pip install ray==2.52.1 elsewhere).') from None
  return ray


def first_line(error: Exception) -> str:
  """The first line of `error`'s message (its type's name if empty)."""
  return (str(error).strip().splitlines() or [type(error).__name__])[0]


# Ray 2.52's `init` warns that a later Ray will stop hiding the GPUs from an
# actor that asks for none; this runtime asks for GPUs explicitly
# (`gpus_per_worker`) and relies on today's hiding, which the warning does
# not change.
_GPU_HIDING_TIP = 'Tip: In future versions of Ray'


def _init(ray, **kwargs) -> None:
  with warnings.catch_warnings():
    warnings.filterwarnings('ignore', message=_GPU_HIDING_TIP,
                            category=FutureWarning)
    ray.init(**kwargs)


# Ends a local Ray's processes when the Python process that started them is
# gone, SIGKILL included: it blocks reading a pipe whose write end only that
# process holds; at EOF it kills every process whose command line names the
# session's private directory (Ray's GCS, raylet and dashboard agent; the
# latter outlives a killed driver otherwise) and removes the directory. The
# directory comes in the environment, so this shell's own command line does
# not name it.
_WATCHDOG = ('read _unused; pkill -KILL -f -- "$TFF_MIXED_RAY_SESSION"; '
             'rm -rf -- "$TFF_MIXED_RAY_SESSION"')


def _watch(session_dir: str) -> int:
  """Starts `_WATCHDOG` for `session_dir`; returns the pipe's write end
  (closing it ends the session's processes)."""
  read_fd, write_fd = os.pipe()  # Neither is inherited by Ray's processes.
  subprocess.Popen(  # pylint: disable=consider-using-with
      ['sh', '-c', _WATCHDOG], stdin=read_fd, stdout=subprocess.DEVNULL,
      stderr=subprocess.DEVNULL, start_new_session=True,
      env={**os.environ, 'TFF_MIXED_RAY_SESSION': session_dir})
  os.close(read_fd)
  return write_fd


# How long a cluster's address may take to accept a connection: Ray's own
# attempts to reach a missing cluster last minutes.
_CONNECT_SECONDS = 10.0


def check_reachable(address: str) -> None:
  """Raises RayRuntimeError (one line) unless `host:port` accepts a TCP
  connection ('auto' is left to Ray)."""
  if address == 'auto':
    return
  host, sep, port = address.rpartition(':')
  if not sep or not host or not port.isdigit():
    raise ValueError(f'ray address must be host:port or auto, got '
                     f'{address!r}.')
  try:
    socket.create_connection((host, int(port)), _CONNECT_SECONDS).close()
  except OSError as e:
    raise RayRuntimeError(
        f'no Ray cluster answers at {address} ({e.strerror or e}); start one '
        '(docs/execution.md, "Ray") or leave out --ray_address for a local '
        'Ray.') from None




class Session:
  """A Ray this process uses: `Session.start`, then `end()`."""

  def __init__(self, address: Optional[str], started: bool,
               session_dir: Optional[str]):
    self.address = address
    self._started = started
    # The local Ray's private directory (None for a cluster or the user's
    # own Ray).
    self.session_dir = session_dir
    self._watchdog = _watch(session_dir) if session_dir else None

  @classmethod
  def start(cls, address: Optional[str] = None, *, cpus: int = 1
            ) -> 'Session':
    """Joins the cluster at `address` (`host:port` or 'auto'), or starts a
    local Ray with `cpus` CPUs (no address); a Ray this process already
    has (the user's own) is used as it is.

    Raises:
      ValueError: For an address that is not host:port or auto.
      RayRuntimeError: If Ray cannot be started or joined (one line).
    """
    ray = import_ray()
    # Before Ray starts a process: they inherit it.
    os.environ['RAY_USAGE_STATS_ENABLED'] = '0'
    if ray.is_initialized():
      return cls(address, False, None)  # The user's own: left running.
    if address:
      check_reachable(address)
      try:
        _init(ray, address=address, include_dashboard=False,
              log_to_driver=False, logging_level='warning')
      except (ConnectionError, RuntimeError, ValueError) as e:
        raise RayRuntimeError(
            f'cannot join the Ray cluster at {address!r}: '
            f'{first_line(e)}') from None
      return cls(address, False, None)
    session_dir = tempfile.mkdtemp(prefix='tff_mixed_ray_')  # Mode 0700.
    try:
      _init(ray, num_cpus=cpus, include_dashboard=False,
            log_to_driver=False, logging_level='warning',
            _node_ip_address='127.0.0.1',
            _temp_dir=os.path.join(session_dir, 'ray'),
            # No dashboard, so no metrics agent: Ray would say, in an
            # error line, that it cannot reach one. The driver's core worker
            # still says it once, ~20 s in (docs/execution.md, "Ray").
            _system_config={'enable_metrics_collection': False})
    except Exception as e:  # pylint: disable=broad-except
      shutil.rmtree(session_dir, ignore_errors=True)
      raise RayRuntimeError(
          f'cannot start a local Ray: {first_line(e)}') from None
    return cls(None, True, session_dir)

  def end(self) -> None:
    """Ends the local Ray this session started (nothing for a cluster)."""
    ray = import_ray()
    if self._started and ray.is_initialized():
      ray.shutdown()
    self._started = False
    if self._watchdog is not None:  # Whatever ray.shutdown left, and the
      os.close(self._watchdog)      # session's directory.
      self._watchdog = None
