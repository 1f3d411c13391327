"""A run's history: `metrics.csv` (one row a round) and its TensorBoard copy.

Both are rewritten on resume from the rows up to the resumed checkpoint, so
no round appears twice.
"""

import csv
import io
import os
import shutil
import sys
from collections.abc import Mapping
from typing import Any, Union

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed.driver import layout
from tff_mixed.driver.errors import OutputDirError

Row = dict[str, float]


def flatten_metrics(metrics: Any, prefix: str = '') -> dict[str, float]:
  """Flattens nested metric mappings to `{'a/b/c': float}`."""
  flat = {}
  if isinstance(metrics, Mapping):
    for key, value in metrics.items():
      flat.update(flatten_metrics(value, f'{prefix}{key}/'))
  elif isinstance(metrics, (list, tuple)) and not isinstance(metrics, str):
    for i, value in enumerate(metrics):
      flat.update(flatten_metrics(value, f'{prefix}{i}/'))
  else:
    value = np.asarray(metrics)
    if value.size == 1 and value.dtype.kind in 'biuf':
      flat[prefix.rstrip('/')] = value.item()
  return flat


def metric_columns(type_: tff.Type) -> list[str]:
  """The keys `flatten_metrics` gives a value of TFF type `type_` (a
  placement looked through): its scalar numbers, `a/b/c` by name or index."""
  if isinstance(type_, tff.FederatedType):
    type_ = type_.member
  if isinstance(type_, tff.StructType):
    return [f'{name or i}{"/" + leaf if leaf else ""}'
            for i, (name, element) in enumerate(
                tff.structure.iter_elements(type_))
            for leaf in metric_columns(element)]
  if (isinstance(type_, tff.TensorType)
      and all(n == 1 for n in (type_.shape or ()))
      and np.dtype(type_.dtype).kind in 'biuf'):
    return ['']
  return []


def read_history(path: str, last_round: int) -> list[Row]:
  """Rows of an earlier run up to `last_round` (later rows were not saved).

  Raises:
    OutputDirError: If the file is not a metrics table.
  """
  if not os.path.exists(path):
    return []
  try:
    with open(path, newline='') as f:
      text = f.read()
    # A row a kill cut short (rows are appended every round) is dropped; it
    # lies past the last checkpoint anyway.
    text = text[:text.rfind('\n') + 1]
    rows = [
        {k: csv_read(v) for k, v in row.items() if v not in ('', None)}
        for row in csv.DictReader(io.StringIO(text, newline=''))
    ]
    if any('round' not in row or None in row for row in rows):
      raise ValueError('a row without a round, or with extra fields')
  except (OSError, ValueError, TypeError) as e:
    raise OutputDirError(
        f'{path} is unreadable ({e}); restore it or choose another '
        'output_dir.') from None
  return [row for row in rows if row['round'] <= last_round]


def csv_value(value: float) -> Union[int, float, str]:
  """A metric as `metrics.csv` writes it, the same whether the row was just
  measured or read back on resume.

  Counts and rounds are integers (`764`, not `764.0`). Most metrics are
  float32 in TF: a float32 value is written in its shortest form (a learning
  rate of 0.1 as `0.1`, not its float64 expansion `0.10000000149011612`), and
  `csv_read` gives the float32 value back exactly. Other floats (seconds,
  sums of float64s) are written to 12 significant digits, as Python writes
  the float they round to (`9.2795808`, not `9.279580800000002`); one whose
  short form also reads as a float32's (a float64 0.1) is read back as that
  float32, within half a float32 unit.
  """
  if not isinstance(value, float):
    return value
  if value.is_integer() and abs(value) < 2**53:
    return int(value)
  with np.errstate(over='ignore'):  # Beyond float32's range: not float32.
    as_float32 = np.float32(value)
  if float(as_float32) == value:
    return str(as_float32)
  return float(f'{value:.12g}')


def csv_read(text: str) -> float:
  """The value `csv_value` wrote as `text`."""
  value = float(text)
  with np.errstate(over='ignore'):  # Beyond float32's range: not float32.
    as_float32 = np.float32(value)
  return float(as_float32) if str(as_float32) == text else value


# metrics.csv is written here rather than by TFF's
# `tff.program.CSVFileReleaseManager` (which also appends, and drops rows past a
# key on resume) for what this adds: counts as integers and float32 metrics in
# their shortest form (TFF's writes float64 expansions), a row torn by a kill
# dropped on read, and a synchronous write before the round's checkpoint.
def append_history(path: str, history: list[Row], columns: list[str]) -> None:
  """Appends `history`'s last row to `path`, which holds the rows before it
  under `columns`; rewrites the file when the row brings a new column."""
  row = history[-1]
  if not columns or any(key not in columns for key in row):
    write_history(path, history)
    columns[:] = list(dict.fromkeys(k for r in history for k in r))
    return
  text = io.StringIO(newline='')
  csv.DictWriter(text, fieldnames=columns).writerow(
      {k: csv_value(v) for k, v in row.items()})
  with open(path, 'ab', buffering=0) as f:
    size = f.seek(0, os.SEEK_END)
    try:
      data = text.getvalue().encode()
      while data:  # Unbuffered: a short write is retried, a refused one
        data = data[f.write(data):]  # raises here.
    except OSError:
      # A refused write (a full disk, a size limit) leaves no part of the
      # row: the file ends with the round before, whole.
      os.ftruncate(f.fileno(), size)
      raise


def write_history(path: str, history: list[Row]) -> None:
  """Writes `history` as metrics.csv at `path`, atomically: one column per
  key any row has (in first-seen order), a row per round."""
  keys = list(dict.fromkeys(k for row in history for k in row))

  def write(f):
    writer = csv.DictWriter(f, fieldnames=keys)
    writer.writeheader()
    writer.writerows({k: csv_value(v) for k, v in row.items()}
                     for row in history)

  layout.write_atomically(path, write, newline='')


# TensorBoard is written with `tf.summary` rather than TFF's
# `tff.program.TensorBoardReleaseManager` because a resumed run rewrites the
# event files up to its checkpoint: releasing again would add a second value
# at every step replayed after a kill.
class TensorBoard:
  """A run's TensorBoard events, a copy of metrics.csv for viewing.

  Made fresh from the rows kept (`history`, a resumed run's), so TensorBoard
  never shows a round twice. A write the system refuses (a full disk: the
  event file is the likeliest first victim, written every round) is one
  warning line, and the run goes on without events; metrics.csv, whose
  writes stop the run when refused, has every round.
  """

  def __init__(self, directory: str, history: list[Row]):
    self._directory = directory
    self._writer = None
    self._guarded(self._rewrite, history)

  def _rewrite(self, history):
    if os.path.isdir(self._directory):
      shutil.rmtree(self._directory)
    self._writer = tf.summary.create_file_writer(self._directory)
    for row in history:
      summarize(self._writer, row)

  def write(self, row: Mapping[str, float]) -> None:
    """Adds round `row`'s values (a warning and no more events if refused)."""
    if self._writer is not None:
      self._guarded(summarize, self._writer, row)

  def flush(self) -> None:
    """Flushes the events to disk (a warning if refused)."""
    if self._writer is not None:
      self._guarded(self._writer.flush)

  def _guarded(self, fn, *args) -> None:
    try:
      fn(*args)
    except (tf.errors.OpError, OSError) as e:
      self._writer = None
      print(f'Warning: TensorBoard events in {self._directory} could not be '
            f'written ({layout.reason(e)}); metrics.csv has every round, and '
            'this run writes no more events.', file=sys.stderr)


def summarize(writer, row: Mapping[str, float]) -> None:
  """Writes `row`'s values as scalars at step `row['round']`."""
  with writer.as_default(step=int(row['round'])):
    for key, value in row.items():
      if key != 'round':
        tf.summary.scalar(key, value)
