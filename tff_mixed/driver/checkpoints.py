"""Checkpoints through `tff.program.FileProgramStateManager`: the newest one
that loads is resumed from; a damaged one is moved aside."""

import asyncio
import os
import shutil
import sys
from typing import Any

from google.protobuf import message
import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed.driver import layout
from tff_mixed.driver.errors import OutputDirError

KEEP_TOTAL = 3


def state_manager(checkpoint_dir: str) -> tff.program.FileProgramStateManager:
  """The run's state manager (checkpoints `round_<N>`, the newest 3 kept)."""
  return tff.program.FileProgramStateManager(
      checkpoint_dir, prefix=layout.CHECKPOINT_PREFIX, keep_total=KEEP_TOTAL)


def remove_temporary_checkpoints(directory: str) -> None:
  """Removes the `<prefix><round>_temp<n>` directories TFF writes a
  checkpoint into before renaming it, left behind by a killed run."""
  if not os.path.isdir(directory):
    return
  for entry in os.listdir(directory):
    if entry.startswith(layout.CHECKPOINT_PREFIX) and '_temp' in entry:
      shutil.rmtree(os.path.join(directory, entry), ignore_errors=True)


# What reading a damaged SavedModel raises (a structure that does not match
# the process raises ValueError instead, and is not damage).
_UNREADABLE = (OSError, IndexError, tf.errors.OpError, message.DecodeError)


def load_latest_good(manager: tff.program.FileProgramStateManager,
                     directory: str, structure: Any) -> tuple[Any, int]:
  """(state, round) of the newest checkpoint in `directory` that loads, or
  (None, 0) if none does.

  A checkpoint that fails to load (truncated, garbage, an empty directory)
  is reported in one line and renamed `<name>.corrupt` (kept for a
  post-mortem, invisible to the state manager); the next older one is
  tried.
  """
  versions = asyncio.run(manager.get_versions()) or []
  for version in reversed(versions):
    path = os.path.join(directory, f'{layout.CHECKPOINT_PREFIX}{version}')
    try:
      return asyncio.run(manager.load(version, structure)), version
    except ValueError as e:
      raise OutputDirError(
          f'checkpoint {path} does not fit this process\'s state ('
          f'{str(e).splitlines()[0][:200]}); was it written by another '
          'version of the code?') from None
    except _UNREADABLE as e:
      aside = path + '.corrupt'
      suffix = 1
      while os.path.exists(aside):
        aside, suffix = f'{path}.corrupt{suffix}', suffix + 1
      os.rename(path, aside)
      print(f'Warning: checkpoint {path} does not load ({type(e).__name__});'
            f' moved to {aside}, resuming from the one before.',
            file=sys.stderr)
  return None, 0


def save(manager: tff.program.FileProgramStateManager, state: Any,
         round_num: int, directory: str, kept: str) -> None:
  """Saves round `round_num`'s state; a failed write (a full disk, a file
  size limit) is a one-line `WriteError` naming the checkpoint and saying
  what is `kept`; TFF writes a checkpoint aside and renames it into place,
  so no checkpoint is left half-written."""
  try:
    asyncio.run(manager.save(state, round_num))
  except (OSError, tf.errors.OpError) as e:
    remove_temporary_checkpoints(directory)
    raise layout.write_error(
        os.path.join(directory, f'{layout.CHECKPOINT_PREFIX}{round_num}'), e,
        kept) from None
