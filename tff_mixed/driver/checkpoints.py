"""Checkpoints through `tff.program.FileProgramStateManager`: the newest one
that loads is resumed from; a damaged one is moved aside."""

import asyncio
import concurrent.futures
import logging
import os
import shutil
import sys
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed.driver import layout
from tff_mixed.driver.errors import OutputDirError

KEEP_TOTAL = 3


def run_sync(coroutine) -> Any:
  """`coroutine`'s result, run to completion from synchronous code: by
  `asyncio.run`, or where an event loop already runs in this thread (a
  Jupyter kernel's, where `asyncio.run` refuses) on a fresh loop in a
  helper thread. TFF's program state managers are coroutines."""
  try:
    asyncio.get_running_loop()
  except RuntimeError:
    return asyncio.run(coroutine)
  with concurrent.futures.ThreadPoolExecutor(1) as pool:
    return pool.submit(asyncio.run, coroutine).result()


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


def newest_saved_round(directory: str) -> int:
  """The round of the newest checkpoint renamed into place in `directory`
  (0 if none): what a resume starts from unless it does not load."""
  if not os.path.isdir(directory):
    return 0
  rounds = [int(entry[len(layout.CHECKPOINT_PREFIX):])
            for entry in os.listdir(directory)
            if entry.startswith(layout.CHECKPOINT_PREFIX)
            and entry[len(layout.CHECKPOINT_PREFIX):].isdigit()]
  return max(rounds, default=0)


def _saved_shapes(path: str) -> list[tuple[int, ...]]:
  """The shapes of the values a checkpoint holds, sorted (containers may
  come back as other types, in another order).

  Reads the SavedModel the way `tff.program.FileProgramStateManager` does;
  whatever fails here (a truncated file, flipped bits: `DecodeError`,
  `KeyError`, `RuntimeError`, an `OpError`, ...) is damage.
  """
  module = tf.saved_model.load(path)
  return sorted(tuple(np.shape(value)) for value in tf.nest.flatten(module()))


def load_latest_good(manager: tff.program.FileProgramStateManager,
                     directory: str, structure: Any) -> tuple[Any, int]:
  """(state, round) of the newest checkpoint in `directory` that loads, or
  (None, 0) if none does.

  A checkpoint that cannot be read, whatever the error (truncated,
  garbage, flipped bits, an empty directory), is reported in one line and
  renamed `<name>.corrupt` (kept for a post-mortem, invisible to the state
  manager); the next older one is tried. One that reads but holds values of
  other shapes than this process's state (told by comparing them, not by
  an exception's type) was written by another process: that stops the run
  (`OutputDirError`) and nothing is moved.
  """
  expected = sorted(tuple(np.shape(value))
                    for value in tf.nest.flatten(structure))
  versions = run_sync(manager.get_versions()) or []
  for version in reversed(versions):
    path = os.path.join(directory, f'{layout.CHECKPOINT_PREFIX}{version}')
    try:
      saved = _saved_shapes(path)
    except Exception as e:  # pylint: disable=broad-except
      _move_aside(path, e)
      continue
    if saved != expected:
      raise OutputDirError(
          f'checkpoint {path} does not fit this process\'s state (it holds '
          f'{len(saved)} values, the process {len(expected)}'
          + (', of other shapes' if len(saved) == len(expected) else '')
          + '); was it written by another version of the code, or for '
          'another algorithm?')
    try:
      return run_sync(manager.load(version, structure)), version
    except Exception as e:  # pylint: disable=broad-except
      _move_aside(path, e)
  return None, 0


def _move_aside(path: str, error: Exception) -> None:
  aside = path + '.corrupt'
  suffix = 1
  while os.path.exists(aside):
    aside, suffix = f'{path}.corrupt{suffix}', suffix + 1
  os.rename(path, aside)
  print(f'Warning: checkpoint {path} does not load ({type(error).__name__});'
        f' moved to {aside}, resuming from the one before.', file=sys.stderr)


def save(manager: tff.program.FileProgramStateManager, state: Any,
         round_num: int, directory: str, kept: str) -> None:
  """Saves round `round_num`'s state; a failed write (a full disk, a file
  size limit) is a one-line `WriteError` naming the checkpoint and saying
  what is `kept`; TFF writes a checkpoint aside and renames it into place,
  so no checkpoint is left half-written."""
  logger = tf.get_logger()  # TF logs every saved model's assets at INFO.
  level = logger.level
  logger.setLevel(max(level, logging.WARNING))
  try:
    run_sync(manager.save(state, round_num))
  except (OSError, tf.errors.OpError) as e:
    remove_temporary_checkpoints(directory)
    raise layout.write_error(
        os.path.join(directory, f'{layout.CHECKPOINT_PREFIX}{round_num}'), e,
        kept) from None
  finally:
    logger.setLevel(level)
