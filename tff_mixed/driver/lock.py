"""One run per output directory: the directory's `.lock`.

The lock is the kernel's: `fcntl.flock` on `.lock`, held for the run and
dropped by the kernel when its process ends, however it ends. So there is no
stale lock to take over, and no race between two runs that find one left by a
run that was killed (each used to remove the other's fresh lock). The file
holds the owner's pid, host and start time, for the message a second run
gives; it is removed when the run ends.
"""

import errno
import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Callable
from typing import Optional

from tff_mixed.driver import layout
from tff_mixed.driver.errors import OutputDirError

# How long a run that finds the lock held waits for its holder to write who
# it is (it does so right after taking the lock).
_HOLDER_WRITE_SECONDS = 5.0
_POLL_SECONDS = 0.01
# Errors of opening the lock file that mean the directory is not writable.
_NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)


def lock_output_dir(output_dir: str,
                    what: str = 'output_dir') -> Callable[[], None]:
  """Takes `output_dir`'s lock (creating the directory); returns its release.
  `what` names the directory in messages (a grid runner's: 'grid').

  Raises:
    OutputDirError: If another live run holds the lock, or `output_dir` is
      not a directory this process can write.
  """
  layout.make_dir(output_dir)
  path = os.path.join(output_dir, layout.LOCK_FILE)
  owner = {'pid': os.getpid(), 'host': socket.gethostname(),
           'started': time.strftime('%Y-%m-%d %H:%M:%S')}
  while True:
    try:
      fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
      if e.errno in _NOT_WRITABLE:
        raise OutputDirError(
            f'{what} {output_dir} is not writable: {e.strerror}.'
        ) from None
      raise
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = _wait_for_holder(fd)
      os.close(fd)
      raise OutputDirError(
          f'{what} {output_dir} is in use by pid '
          f'{holder.get("pid", "(unknown)")} on {holder.get("host")} (since '
          f'{holder.get("started")}); wait for that run, or choose another '
          'output_dir.') from None
    # A run that ended between our open and our flock removed the file we
    # opened: lock the one at `path` now.
    if not _is_at(fd, path):
      os.close(fd)
      continue
    previous = _read(fd)
    if previous.get('pid') is not None:
      where = ('' if previous.get('host') == owner['host']
               else f' on {previous.get("host")}')
      print(f'Warning: {what} {output_dir}: taking over the lock of pid '
            f'{previous["pid"]}{where}, which has ended.', file=sys.stderr)
    release = _Release(fd, path)
    try:
      os.ftruncate(fd, 0)
      os.pwrite(fd, json.dumps(owner).encode(), 0)
    except OSError as e:
      release()
      raise OutputDirError(
          f'{what} {output_dir}: cannot write {path}: {e.strerror}.'
      ) from None
    return release


def holder(output_dir: str) -> Optional[dict]:
  """Who holds `output_dir`'s lock now (its pid, host and start), or None
  if no live process does; takes nothing."""
  path = os.path.join(output_dir, layout.LOCK_FILE)
  try:
    fd = os.open(path, os.O_RDONLY)
  except OSError:
    return None
  try:
    try:
      fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
      return _wait_for_holder(fd)
    fcntl.flock(fd, fcntl.LOCK_UN)
    return None
  finally:
    os.close(fd)


def _is_at(fd: int, path: str) -> bool:
  try:
    return os.fstat(fd).st_ino == os.stat(path).st_ino
  except FileNotFoundError:
    return False


def _read(fd: int) -> dict:
  """The owner a lock file holds ({} if empty or not an owner record)."""
  try:
    text = os.pread(fd, 4096, 0)
    owner = json.loads(text) if text else {}
  except (OSError, ValueError):
    return {}
  return owner if isinstance(owner, dict) else {}


def _wait_for_holder(fd: int) -> dict:
  """The holder of the lock on `fd`, once it has written who it is."""
  deadline = time.monotonic() + _HOLDER_WRITE_SECONDS
  holder = _read(fd)
  while 'pid' not in holder and time.monotonic() < deadline:
    time.sleep(_POLL_SECONDS)
    holder = _read(fd)
  return holder


class _Release:
  """Removes the lock file, then drops the lock (in that order: a run that
  opened the file in between finds it gone and retries); only the first
  call does anything."""

  def __init__(self, fd: int, path: str):
    self._fd: Optional[int] = fd
    self._path = path

  def __call__(self) -> None:
    if self._fd is None:
      return
    fd, self._fd = self._fd, None
    try:
      if _is_at(fd, self._path):
        os.remove(self._path)
    finally:
      os.close(fd)
