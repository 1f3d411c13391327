"""One run per output directory: the directory's `.lock`."""

import json
import os
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from typing import Any, Optional

from tff_mixed.driver import layout
from tff_mixed.driver.errors import OutputDirError


def _process_alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:  # Alive, another user's.
    return True
  return True


def lock_output_dir(output_dir: str) -> Callable[[], None]:
  """Takes `output_dir`'s lock (creating the directory); returns its release.

  The lock file holds the owner's pid and host and appears complete or not
  at all (written aside, then hard-linked into place). A lock whose process
  is gone (same host) is stale and taken over, with a warning.

  Raises:
    OutputDirError: If another live run holds the lock, or `output_dir` is
      not a directory this process can write.
  """
  layout.make_dir(output_dir)
  path = os.path.join(output_dir, layout.LOCK_FILE)
  owner = {'pid': os.getpid(), 'host': socket.gethostname(),
           'started': time.strftime('%Y-%m-%d %H:%M:%S')}
  for _ in range(2):
    try:
      fd, tmp = tempfile.mkstemp(dir=output_dir, prefix=layout.LOCK_FILE + '.')
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
