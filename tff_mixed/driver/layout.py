"""What a run directory holds, and how its files are written."""

import os
import re
import tempfile
from collections.abc import Callable
from typing import Any, Optional

from tff_mixed.driver.errors import OutputDirError
from tff_mixed.driver.errors import WriteError

# The files of a run directory, and its folders: checkpoints/round_<N>
# (`tff.program.FileProgramStateManager`'s prefix) and TensorBoard's events.
CONFIG_FILE, METRICS_FILE, LOCK_FILE = 'config.json', 'metrics.csv', '.lock'
CHECKPOINT_DIR, CHECKPOINT_PREFIX = 'checkpoints', 'round_'
TENSORBOARD_DIR = 'tensorboard'


def make_dir(output_dir: str) -> None:
  """Creates `output_dir` (and its parents) unless it exists.

  Raises:
    OutputDirError: If it is empty, cannot be created or is not a directory.
  """
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


def reason(error: BaseException) -> str:
  """Why a write failed, in the system's words: an `OSError`'s reason, or
  a TensorFlow error's without TensorFlow's wrapping (`{{function_node
  ...}} <the file>; <the reason> [Op:SaveV2]` says `<the reason>`)."""
  said = getattr(error, 'strerror', None)
  if said:
    return said
  text = (str(getattr(error, 'message', None) or error).splitlines()
          or [type(error).__name__])[0]
  text = re.sub(r'\{\{.*?\}\}\s*', '', text)
  text = re.sub(r'\s*\[Op:[^\]]*\]\s*$', '', text)
  return text.rsplit('; ', 1)[-1]


def write_error(path: str, error: BaseException, kept: str) -> WriteError:
  """The one-line error of a write of `path` that failed with `error` (an
  `OSError` or a TensorFlow error); `kept` says what is left as it was."""
  return WriteError(f'cannot write {path}: {reason(error)}; {kept}.')


def _umask() -> int:
  mask = os.umask(0o022)
  os.umask(mask)
  return mask


_UMASK = _umask()  # Read once, at import (reading it sets it).


def write_atomically(path: str, write: Callable[[Any], None],
                     newline: Optional[str] = None) -> None:
  """Writes `path` through a uniquely named temporary file in its directory
  (two writers never share one), then renames it into place."""
  directory, name = os.path.split(path)
  fd, tmp = tempfile.mkstemp(dir=directory or '.', prefix=name + '.',
                             suffix='.tmp')
  try:
    # mkstemp's file is 0600; the run's other files follow the umask.
    os.fchmod(fd, 0o666 & ~_UMASK)
    with os.fdopen(fd, 'w', newline=newline) as f:
      write(f)
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise
