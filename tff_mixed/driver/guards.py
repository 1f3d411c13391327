"""What a run checks: its first cohort's data before anything is written,
then after every round a finite state, and Ctrl-C."""

import contextlib
import re
import signal
import threading
from collections.abc import Mapping
from typing import Any, Optional

import numpy as np
import tensorflow as tf

from tff_mixed import keys
from tff_mixed import schedules
from tff_mixed.driver.errors import CohortError
from tff_mixed.driver.errors import DataError
from tff_mixed.driver.errors import NonFiniteStateError
from tff_mixed.task import Task

# `tff_mixed.schedules` state keys of losses not yet observed (on_plateau's
# best starts at +inf, loss_ratio's reference at NaN).
_UNOBSERVED_LOSSES = (schedules.BEST, schedules.REFERENCE)


def _leaves(structure, prefix=''):
  """(path, leaf) of a state: mappings, named tuples, lists, attrs."""
  if isinstance(structure, Mapping):
    items = structure.items()
  elif hasattr(structure, '_asdict'):
    items = structure._asdict().items()
  elif isinstance(structure, (list, tuple)):
    items = enumerate(structure)
  elif hasattr(structure, '__attrs_attrs__'):
    items = ((a.name, getattr(structure, a.name))
             for a in structure.__attrs_attrs__)
  else:
    yield prefix.rstrip(keys.SEPARATOR), structure
    return
  for key, value in items:
    yield from _leaves(value, f'{prefix}{key}{keys.SEPARATOR}')


def non_finite_parts(state: Any) -> dict[str, list[str]]:
  """The parts of a process state holding NaN or infinity: part -> paths.

  Parts are named for what a researcher tunes (`'the server optimizer'`,
  `'the central step'`, `'the merge'`, `'the global model'`, ...); paths
  are the state's keys, e.g. `finalizer/accumulator/0`. Not checked: the
  losses a loss-driven schedule compares against, which are +inf or NaN
  until its window fills (a non-finite loss is never recorded there).
  """
  parts = {}
  for path, leaf in _leaves(state):
    value = np.asarray(leaf)
    if value.dtype.kind not in 'fc' or np.all(np.isfinite(value)):
      continue
    if path.rsplit(keys.SEPARATOR, 1)[-1] in _UNOBSERVED_LOSSES:
      continue
    part = next((name for prefix, name in keys.STATE_PARTS
                 if path == prefix or path.startswith(prefix + keys.SEPARATOR)
                 or path.startswith(prefix + '_')), 'the state')
    parts.setdefault(part, []).append(path)
  return parts


def check_finite_state(state: Any, round_num: int) -> None:
  """Raises `NonFiniteStateError` unless every float in `state` is finite.

  The guard the driver applies after every round, for any loop: e.g.
  `check_finite_state(output.state, round_num)` after `process.next`.
  """
  parts = non_finite_parts(state)
  if parts:
    order = [name for _, name in keys.STATE_PARTS]
    named = sorted(parts.items(), key=lambda item: (
        order.index(item[0]) if item[0] in order else len(order)))
    raise NonFiniteStateError(
        f'round {round_num}: the new state is not finite in '
        + ', '.join(f'{part} ({", ".join(paths[:3])}'
                    f'{", ..." if len(paths) > 3 else ""})'
                    for part, paths in named)
        + '.')


@contextlib.contextmanager
def remembering_interrupts():
  """Yields an event set by every Ctrl-C (SIGINT) while the rounds run.

  Ctrl-C still raises `KeyboardInterrupt` at once. But Python swallows an
  exception raised inside a finalizer or `__del__` (printing "Exception
  ignored"), and TF and TFF run many (TFF disposes of remote values in
  `weakref.finalize`): a Ctrl-C landing in one would be lost and the run would
  go on. The round loop checks the event after each round. Only Python's
  default handler is replaced, only from the main thread, and it is restored
  afterwards.
  """
  requested = threading.Event()
  if (threading.current_thread() is not threading.main_thread() or
      signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
    yield requested
    return

  def handler(signum, frame):
    requested.set()
    signal.default_int_handler(signum, frame)

  signal.signal(signal.SIGINT, handler)
  try:
    yield requested
  finally:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _first_line(error) -> str:
  """An error's first line, without TF's '{{function_node ...}}' and op."""
  line = (getattr(error, 'message', None) or str(error)).splitlines()[0]
  line = re.sub(r'\{\{[^}]*\}\}\s*', '', line)
  return re.sub(r'\s*\[Op:\w+\].*$', '', line)


def _unreadable_client(task: Task, ids) -> Optional[str]:
  """What is wrong with the first client of `ids` whose data does not read
  (None if all read)."""
  for cid in ids:
    try:
      for _ in task.train_dataset_fn(cid):
        pass
    except (tf.errors.OpError, ValueError, TypeError) as e:
      where = f' in {task.data_source}' if task.data_source else ''
      return (f'task {task.name}: the data of client {cid!r}{where} does '
              f'not read ({_first_line(e)})')
  return None


def unreadable_cohort(task: Task, seed: int, round_num: int,
                      clients_per_round: int) -> Optional[str]:
  """Why round `round_num`'s cohort does not read, if it does not: what a
  round that failed mid-run is checked for (round 1's is checked first,
  `check_first_cohort`)."""
  try:
    ids = task.cohort_ids(seed, round_num, clients_per_round)
  except ValueError:
    return None
  return _unreadable_client(task, ids)


def check_first_cohort(task: Task, seed: int, clients_per_round: int) -> None:
  """Reads round 1's cohort and the start of the evaluation data once, so
  that data which does not read (a bad record) or is empty is one line
  naming the task and the client before anything is written or built.

  Raises:
    CohortError: If the task cannot give `clients_per_round` clients.
    DataError: For a client whose data does not read, or an evaluation
      set that is empty or does not read.
  """
  try:
    ids = task.cohort_ids(seed, 1, clients_per_round)
  except ValueError as e:
    raise CohortError(str(e)) from None
  unreadable = _unreadable_client(task, ids)
  if unreadable:
    raise DataError(f'{unreadable}.')
  if task.eval_dataset_fn is None:
    return
  data = task.eval_dataset_fn()
  for name, dataset in (data.items() if isinstance(data, Mapping)
                        else [('', data)]):
    what = f'evaluation data {name!r}' if name else 'evaluation data'
    try:
      empty = next(iter(dataset), None) is None
    except (tf.errors.OpError, ValueError, TypeError) as e:
      raise DataError(f'task {task.name}: the {what} does not read '
                      f'({_first_line(e)}).') from None
    if empty:
      raise DataError(f'task {task.name}: the {what} is empty.')
