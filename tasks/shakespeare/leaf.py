"""LEAF's Shakespeare: one next-character target per 80-character window.

LEAF's `data/shakespeare/preprocess.sh` writes `<data_dir>/train/*.json`
and `<data_dir>/test/*.json`, each `{"users": [...], "num_samples": [...],
"user_data": {user: {"x": [...], "y": [...]}}}` in which every `x` is 80
characters of one speaker's lines and its `y` the character that follows:
one sample at every position of the text (seed 003: 3,678,451 training and
356,921 test samples, 5,573 a client on average). This is the task both
seeds ran; TFF's Shakespeare (`tasks.shakespeare.data`) cuts each line into
chunks instead, ~60-80x fewer sequences with a target at every position.

Characters are ids of LEAF's 80-character alphabet (`LETTERS`, the one its
own models index); any other character is `OOV`, so the model has 81 ids.
"""

import collections
from collections.abc import Mapping, Sequence

import numpy as np
import tensorflow as tf

from tasks.common import sources
from tff_mixed import checks

LETTERS = ('\n !"&\'(),-.0123456789:;>?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]'
           'abcdefghijklmnopqrstuvwxyz}')
OOV = len(LETTERS)
VOCAB_SIZE = len(LETTERS) + 1
WINDOW = 80
DEFAULT_DIR = 'leaf/data/shakespeare/data'
_IDS = {c: i for i, c in enumerate(LETTERS)}
MAKE = ("LEAF's data/shakespeare/preprocess.sh (e.g. `-s niid --sf 1.0 -k 0 "
        "-t sample -tf 0.8`)")


def to_ids(text: str) -> list[int]:
  return [_IDS.get(c, OOV) for c in text]


def _record(path, user, index, x, y):
  if not (isinstance(x, str) and len(x) == WINDOW and isinstance(y, str)
          and len(y) == 1):
    raise sources.BadDataError(
        f'Shakespeare (LEAF): {path}: user {user!r}, record {index}: not '
        f'{WINDOW} characters and the next one (x {_shown(x)}, y '
        f'{_shown(y)}).')
  return to_ids(x), to_ids(y)[0]


def _shown(value) -> str:
  if isinstance(value, str):
    return f'of {len(value)} character{"" if len(value) == 1 else "s"}'
  return checks.a_kind(value)


def read_split(data_dir: str, split: str
               ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
  """`{user: (x int32 [n, 80], y int32 [n])}` of `<data_dir>/<split>/`.

  Raises:
    sources.DataUnavailableError: No files there, one is not LEAF's JSON, a
      record is not 80 characters and one (the file, the user and the
      record's index named), or the files hold no sample.
  """
  records = sources.read_leaf_split('Shakespeare (LEAF)', data_dir, split,
                                    MAKE, _record, what='sample')
  return {user: (np.array([x for x, _ in r], np.int32).reshape(-1, WINDOW),
                 np.array([y for _, y in r], np.int32))
          for user, r in records.items()}


def arrays(x: np.ndarray, y: np.ndarray) -> collections.OrderedDict:
  return collections.OrderedDict(x=x, y=y)


def dataset(x: np.ndarray, y: np.ndarray, batch_size: int) -> tf.data.Dataset:
  return tf.data.Dataset.from_tensor_slices(arrays(x, y)).batch(batch_size)


def pooled(users: Mapping[str, tuple[np.ndarray, np.ndarray]],
           ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
  """Every sample of `ids`' users, one user after another."""
  xs = [users[u][0] for u in ids if u in users]
  ys = [users[u][1] for u in ids if u in users]
  if not xs:
    return (np.zeros((0, WINDOW), np.int32), np.zeros((0,), np.int32))
  return np.concatenate(xs), np.concatenate(ys)
