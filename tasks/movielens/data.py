"""MovieLens 1M next-movie data for the dual encoder (seed 004 App. C.2.3).

The source is GroupLens's `ratings.dat` (`UserID::MovieID::Rating::Timestamp`,
6,040 users, movie ids 1..3,952). Each user's ratings in time order give one
example per rating after the first: the context is the bag of the user's
previous `context_length` movies (padded with -1), the label is the next
movie. Movie id m is embedding row m - 1, so the table has 3,952 rows (the N
behind the paper's 494 KB = 2 N d x 4 bytes at d = 16).

Users are split as in the paper: a seeded 20% are the datacentre's (their
examples shuffled together), the rest are clients, split 3,865 / 483 / 483
into train / validation / test for the full dataset (80 / 10 / 10 of the
clients, rounded down; the users left over by the rounding go to the
datacentre).
"""

import collections
import dataclasses
import os
from collections.abc import Mapping, Sequence

import numpy as np
import tensorflow as tf

from tasks.common import sources

URL = 'https://files.grouplens.org/datasets/movielens/ml-1m.zip'
RATINGS_FILE = 'ratings.dat'
NUM_MOVIES = 3952
CONTEXT_LENGTH = 10
PAD = -1
CENTRAL_FRACTION = 0.2

DataUnavailableError = sources.DataUnavailableError


class RatingsFormatError(sources.BadDataError, ValueError):
  """`ratings.dat` has a line that is not `user::movie::rating::timestamp`."""


# GroupLens's `ratings.dat` is read here rather than through TFDS's
# `movielens/1m-ratings`, which TFDS downloads and prepares itself into its
# own format; reading the file as distributed needs no preparation step and
# gives a one-line error naming the line that is not a rating.
def read_ratings(path: str, num_movies: int = NUM_MOVIES) -> np.ndarray:
  """`ratings.dat` as an int64 array [ratings, 4] (user, movie, rating, time).

  Raises:
    DataUnavailableError: If the file is missing (one line: where to get it).
    RatingsFormatError: Naming the file and the first bad line.
  """
  if not os.path.isfile(path):
    raise DataUnavailableError(
        f'MovieLens: {path} not found; download {URL}, unzip it and point '
        f'--data_dir at the ml-1m directory holding {RATINGS_FILE}.')
  with open(path, encoding='latin-1') as f:
    lines = f.read().splitlines()
  rows = np.zeros([len(lines), 4], np.int64)
  for number, line in enumerate(lines, start=1):
    fields = line.split('::')
    try:
      if len(fields) != 4:
        raise ValueError
      rows[number - 1] = [int(field) for field in fields]
    except ValueError:
      raise RatingsFormatError(
          f'{path}:{number}: expected UserID::MovieID::Rating::Timestamp, got '
          f'{line[:80]!r}.') from None
    if not 1 <= rows[number - 1, 1] <= num_movies:
      raise RatingsFormatError(
          f'{path}:{number}: MovieID {rows[number - 1, 1]} is outside '
          f'1..{num_movies}.')
  if not len(rows):
    raise RatingsFormatError(f'{path}: no ratings.')
  return rows


@dataclasses.dataclass(frozen=True)
class Examples:
  """Next-movie examples: `context` [n, L] rows (PAD-padded), `label` [n]."""

  context: np.ndarray
  label: np.ndarray

  def __len__(self) -> int:
    return len(self.label)

  def dataset(self) -> tf.data.Dataset:
    return tf.data.Dataset.from_tensor_slices(collections.OrderedDict(
        context=self.context, label=self.label))


def user_examples(ratings: np.ndarray,
                  context_length: int = CONTEXT_LENGTH) -> dict[int, Examples]:
  """Each user's examples in time order (ties keep the file's order)."""
  if context_length < 1:
    raise ValueError(f'context_length must be >= 1, got {context_length}.')
  order = np.lexsort((np.arange(len(ratings)), ratings[:, 3], ratings[:, 0]))
  ratings = ratings[order]
  users, starts = np.unique(ratings[:, 0], return_index=True)
  examples = {}
  for user, start, end in zip(users, starts, [*starts[1:], len(ratings)]):
    movies = (ratings[start:end, 1] - 1).astype(np.int32)
    n = len(movies) - 1
    context = np.full([max(n, 0), context_length], PAD, np.int32)
    for j in range(1, len(movies)):
      previous = movies[max(0, j - context_length):j]
      context[j - 1, :len(previous)] = previous
    examples[int(user)] = Examples(context, movies[1:])
  return examples


def split_users(user_ids: Sequence[int], seed: int = 0,
                central_fraction: float = CENTRAL_FRACTION
                ) -> Mapping[str, list[int]]:
  """Seeded split into central / train / validation / test users.

  `round(central_fraction * U)` users are central; of the rest, 80% (rounded
  down) train and 10% (rounded down) each validation and test; the one or
  two users the rounding leaves go to the datacentre.
  """
  if not 0.0 <= central_fraction < 1.0:
    raise ValueError(
        f'central_fraction must be in [0, 1), got {central_fraction}.')
  shuffled = [int(u) for u in np.random.default_rng(seed).permutation(
      sorted(user_ids))]
  num_central = round(central_fraction * len(shuffled))
  rest = len(shuffled) - num_central
  num_train, num_eval = int(0.8 * rest), int(0.1 * rest)
  clients = shuffled[num_central:]
  return collections.OrderedDict(
      central=sorted(shuffled[:num_central]
                     + clients[num_train + 2 * num_eval:]),
      train=sorted(clients[:num_train]),
      validation=sorted(clients[num_train:num_train + num_eval]),
      test=sorted(clients[num_train + num_eval:num_train + 2 * num_eval]),
  )


def concatenate(examples: Sequence[Examples], shuffle_seed=None) -> Examples:
  """All `examples` together, shuffled if `shuffle_seed` is given."""
  context = np.concatenate([e.context for e in examples])
  label = np.concatenate([e.label for e in examples])
  if shuffle_seed is not None:
    order = np.random.default_rng(shuffle_seed).permutation(len(label))
    context, label = context[order], label[order]
  return Examples(context, label)


def element_spec(context_length: int = CONTEXT_LENGTH):
  return collections.OrderedDict(
      context=tf.TensorSpec([context_length], tf.int32),
      label=tf.TensorSpec([], tf.int32))
