"""CelebA smile data for mixed FL (seed 004 §5.1, App. C.2.1).

The source is TFF's federated CelebA (`tff.simulation.datasets.celeba`): an
SQLite database of `tf.Example` protos, 8,408 training and 935 evaluation raw
clients (split by clients). As in the paper, three raw training clients
(sorted by id) form one composite client, 2,802 in all (the last incomplete
group is dropped); the federated data are their smiling faces, the central
data the non-smiling faces of all training clients, and evaluation uses both
labels from the evaluation clients. Nothing is held in memory or in a graph
as a constant: every dataset reads the database.
"""

import collections
import os
from collections.abc import Sequence
from typing import Optional

import tensorflow as tf
import tensorflow_federated as tff

from tasks.common import sources

URL = 'https://storage.googleapis.com/tff-datasets-public/celeba.sqlite.lzma'
DATABASE_FILE = 'celeba.sqlite'
GROUP_SIZE = 3
IMAGE_SHAPE = (84, 84, 3)
_SEPARATOR = '+'


DataUnavailableError = sources.DataUnavailableError


def database_path(cache_dir: Optional[str] = None) -> str:
  """Where TFF's loader keeps the decompressed database."""
  cache_dir = cache_dir or os.path.join(os.path.expanduser('~'), '.tff')
  return os.path.join(cache_dir, DATABASE_FILE)


def load_raw(cache_dir: Optional[str] = None, *, download: bool = True):
  """(train, evaluation) `ClientData` of raw clients, split by clients.

  Args:
    cache_dir: TFF's cache directory (default `~/.tff`).
    download: Fetch the database (about 400 MB compressed) if it is missing.

  Raises:
    DataUnavailableError: With a one-line message saying what to fetch and
      where to put it.
  """
  path = database_path(cache_dir)
  return sources.load_tff_database(
      'CelebA', URL, path,
      lambda: tff.simulation.datasets.celeba.load_data(
          split_by_clients=True, cache_dir=os.path.dirname(path)),
      download=download)


def composite_client_ids(raw_ids: Sequence[str],
                         group_size: int = GROUP_SIZE) -> list[str]:
  """Groups sorted raw ids `group_size` at a time; drops an incomplete group."""
  if group_size < 1:
    raise ValueError(f'group_size must be >= 1, got {group_size}.')
  ids = sorted(raw_ids)
  return [_SEPARATOR.join(ids[i:i + group_size])
          for i in range(0, len(ids) - group_size + 1, group_size)]


def members(composite_id: str) -> list[str]:
  return composite_id.split(_SEPARATOR)


def composite_dataset(client_data, composite_id: str) -> tf.data.Dataset:
  """The raw clients' examples of a composite client, one after another."""
  datasets = [client_data.create_tf_dataset_for_client(c)
              for c in members(composite_id)]
  data = datasets[0]
  for more in datasets[1:]:
    data = data.concatenate(more)
  return data


def is_smiling(example) -> tf.Tensor:
  return example['smiling']


def is_not_smiling(example) -> tf.Tensor:
  return tf.logical_not(example['smiling'])


def to_model_input(example) -> collections.OrderedDict:
  """`x`: the image scaled to [0, 1] (84x84x3 float32); `y`: smiling, (1,)."""
  return collections.OrderedDict(
      x=tf.cast(example['image'], tf.float32) / 255.0,
      y=tf.reshape(tf.cast(example['smiling'], tf.float32), [1]),
  )


def element_spec() -> collections.OrderedDict:
  """The unbatched element spec of `to_model_input`'s output."""
  return collections.OrderedDict(
      x=tf.TensorSpec(IMAGE_SHAPE, tf.float32),
      y=tf.TensorSpec([1], tf.float32))
