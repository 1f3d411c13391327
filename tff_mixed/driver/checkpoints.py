"""Checkpoints through `tff.program.FileProgramStateManager`: the newest one
that loads is resumed from; a damaged one is moved aside.

TFF writes a checkpoint as a SavedModel whose function returns the state,
and reads it by loading that model and calling the function: a crafted
checkpoint would run whatever TensorFlow ops its author put there (write
files, read them). Reading here is data only (`read`): the state's values
are read from the SavedModel's variables by name, each checked against the
process's state (its names, shapes and dtypes), and the model's graph is
parsed as a protocol buffer (a damaged one is seen) but never loaded or run.
"""

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
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_federated.python.common_libs import serializable
from tensorflow_federated.python.program import structure_utils

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


class NotThisState(ValueError):
  """A checkpoint that reads but does not hold this process's state."""


def read(path: str, structure: Any) -> Any:
  """The state the checkpoint at `path` holds, as `structure` (the
  process's state, e.g. `process.initialize()`) holds it, read as data:
  nothing stored in the checkpoint is run (module docstring). Gives what
  `tff.program.FileProgramStateManager.load` gives (numpy values).

  Raises:
    NotThisState: One line, for a checkpoint whose values are not this
      state's (names, shapes or dtypes).
    Exception: Whatever a damaged checkpoint raises as it is read (a
      truncated file, flipped bits: `DecodeError`, an `OpError`, ...).
  """
  graph = saved_model_pb2.SavedModel()  # Parsed (damage shows), never run.
  with open(os.path.join(path, 'saved_model.pb'), 'rb') as f:
    graph.ParseFromString(f.read())
  reader = tf.train.load_checkpoint(os.path.join(path, 'variables',
                                                 'variables'))
  shapes = reader.get_variable_to_shape_map()
  dtypes = reader.get_variable_to_dtype_map()
  stored = {key for key in shapes if key.startswith('_value')}
  leaves = []
  for name, expected in structure_utils.flatten_with_name(structure):
    key = '/'.join(['_value', *([name] if name else []),
                    '.ATTRIBUTES/VARIABLE_VALUE'])
    if key not in shapes:
      if expected is None:  # TFF stores no variable for a None.
        leaves.append(None)
        continue
      raise NotThisState(f'it holds no value {name or "(the state)"}')
    stored.discard(key)
    if isinstance(expected, serializable.Serializable):
      leaves.append(type(expected).from_bytes(reader.get_tensor(key)))
      continue
    want = np.asarray(expected)
    if (tuple(shapes[key]), _dtype_name(dtypes[key].as_numpy_dtype)) != (
        want.shape, _dtype_name(want.dtype)):
      raise NotThisState(
          f'its {name or "state"} is {_dtype_name(dtypes[key].as_numpy_dtype)}'
          f'{list(shapes[key])}, the process\'s {_dtype_name(want.dtype)}'
          f'{list(want.shape)}')
    value = reader.get_tensor(key)
    leaves.append(value[()] if isinstance(value, np.ndarray)
                  and value.ndim == 0 else value)
  if stored:
    raise NotThisState(f'it holds {len(stored)} value(s) the process\'s '
                       f'state has not ({sorted(stored)[0]})')
  return structure_utils.unflatten_as(structure, leaves)


def _dtype_name(dtype) -> str:
  """A dtype's name, every kind of string being 'string' (TensorFlow's)."""
  dtype = np.dtype(dtype)
  return 'string' if dtype.kind in 'SUO' else dtype.name


def load_latest_good(manager: tff.program.FileProgramStateManager,
                     directory: str, structure: Any) -> tuple[Any, int]:
  """(state, round) of the newest checkpoint in `directory` that loads, or
  (None, 0) if none does; read as data (`read`).

  A checkpoint that cannot be read, whatever the error (truncated,
  garbage, flipped bits, an empty directory), is reported in one line and
  renamed `<name>.corrupt` (kept for a post-mortem, invisible to the state
  manager); the next older one is tried. One that reads but holds other
  values than this process's state (told by comparing them, not by an
  exception's type) was written by another process: that stops the run
  (`OutputDirError`) and nothing is moved.
  """
  versions = run_sync(manager.get_versions()) or []
  for version in reversed(versions):
    path = os.path.join(directory, f'{layout.CHECKPOINT_PREFIX}{version}')
    try:
      return read(path, structure), version
    except NotThisState as e:
      raise OutputDirError(
          f'checkpoint {path} does not fit this process\'s state ({e}); was '
          'it written by another version of the code, or for another '
          'algorithm?') from None
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
