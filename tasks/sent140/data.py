"""LEAF's Sent140 JSON files as per-user token ids.

LEAF's `preprocess.sh` writes `<data_dir>/train/*.json` and
`<data_dir>/test/*.json` (`-t sample`: every user's tweets split between the
two), each file `{"users": [...], "num_samples": [...], "user_data": {user:
{"x": [[id, date, query, user, text], ...], "y": [0 or 1, ...]}}}`. We read
every file of both directories, lower-case each tweet and split it into
words and punctuation marks the way LEAF's own Sent140 models do; the
vocabulary is the most frequent words of the tweets given.
"""

import collections
import re
from collections.abc import Mapping, Sequence
from typing import Optional

import numpy as np

from tasks.common import sources
from tff_mixed import checks

TEXT = 4  # Index of the tweet's text in an `x` entry.
FIELDS = 5  # An `x` entry: [id, date, query, user, text].
LABELS = (0, 1)  # Negative, positive.
_WORDS = re.compile(r"[\w']+|[.,!?;]")
PAD = -1  # Token-id padding (not a word).


def tokens(text: str) -> list[str]:
  return _WORDS.findall(text.lower())


def read_split(data_dir: str, split: str) -> dict[str, tuple[list, list]]:
  """`{user: (texts, labels)}` of every JSON file in `<data_dir>/<split>/`.

  Raises:
    sources.DataUnavailableError: No files there, one is not LEAF's JSON, a
      record is not a tweet with a label in `LABELS` (the file, the user
      and the record's index named), or the files hold no tweet.
  """
  def record(path, user, index, x, y):
    return (_checked_text(_checked_entry(x, path, user, index)[TEXT], path,
                          user, index),
            _checked_label(y, path, user, index))

  records = sources.read_leaf_split(
      'Sent140', data_dir, split, "LEAF's data/sent140/preprocess.sh (e.g. "
      '`-s niid --sf 1.0 -k 0 -t sample`)', record, what='tweet')
  return {user: ([text for text, _ in r], [label for _, label in r])
          for user, r in records.items()}


def _checked_entry(x, path: str, user: str, index: int) -> list:
  """`x`, if it is LEAF's entry [id, date, query, user, tweet]."""
  if not isinstance(x, list) or len(x) != FIELDS:
    shown = (f'a list of {len(x)}' if isinstance(x, list)
             else checks.a_kind(x))
    raise sources.BadDataError(
        f'Sent140: {path}: user {user!r}, record {index}: the entry is '
        f"{shown}, not LEAF's {FIELDS} fields [id, date, query, user, "
        'tweet].')
  return x


def _checked_text(text, path: str, user: str, index: int) -> str:
  if not isinstance(text, str):
    raise sources.BadDataError(
        f'Sent140: {path}: user {user!r}, record {index}: the tweet is '
        f'{checks.a_kind(text)}, not text.')
  return text


def _checked_label(label, path: str, user: str, index: int) -> int:
  if isinstance(label, bool) or label not in LABELS:
    raise sources.BadDataError(
        f'Sent140: {path}: user {user!r}, record {index}: label {label!r} is '
        f'not one of {LABELS}.')
  return int(label)


def vocabulary(splits: Sequence[Mapping[str, tuple[list, list]]],
               size: int) -> list[str]:
  """The `size` most frequent words of the tweets of every user of every
  split (ties by word)."""
  counts = collections.Counter(
      w for users in splits for texts, _ in users.values()
      for text in texts for w in tokens(text))
  return [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
          ][:size]


def to_ids(texts: Sequence[str], vocab: Mapping[str, int],
           length: Optional[int] = None) -> np.ndarray:
  """Tweets -> an int32 array [n, length] of in-vocabulary word ids, padded
  with `PAD` (out-of-vocabulary words are dropped)."""
  ids = [[vocab[w] for w in tokens(t) if w in vocab] for t in texts]
  length = length or max([len(i) for i in ids] + [1])
  out = np.full((len(ids), length), PAD, np.int32)
  for row, i in zip(out, ids):
    row[:min(len(i), length)] = i[:length]
  return out
