"""FEMNIST from TFF's federated EMNIST (62 classes, split by writer).

`tff.simulation.datasets.emnist.load_data(only_digits=False)`: 3,400
writers, each with training and test examples (LEAF's preprocessing:
28x28 float pixels, 1.0 the background). Batches are TFF's character
recognition preprocessing (`tff.simulation.baselines` EMNIST, pixels
`[28, 28, 1]`), without its unseeded shuffle and with its batches mapped in
order.
"""

import collections
from typing import Optional

import tensorflow as tf
import tensorflow_federated as tff
from tensorflow_federated.python.simulation.baselines.emnist import (
    emnist_preprocessing)

from tasks.common import sources

DATABASE_FILE = 'emnist_all.sqlite'
NUM_CLASSES = 62
IMAGE_SHAPE = (28, 28, 1)


def load(data_dir: Optional[str] = None, *, download: bool = True):
  """(train, test) `ClientData` of the 62-class split."""
  return sources.tff_client_data(
      'FEMNIST', DATABASE_FILE,
      lambda d: tff.simulation.datasets.emnist.load_data(
          only_digits=False, cache_dir=d),
      data_dir, download=download)


def preprocess(dataset: tf.data.Dataset, batch_size: int,
               max_elements: Optional[int] = None) -> tf.data.Dataset:
  """Examples -> batches of `{x: [B, 28, 28, 1], y: [B]}`."""
  # Without a `debug_seed`, TFF's map may emit the batches out of order on a
  # busy machine (`deterministic=False`), and a run would not repeat from its
  # seed; with one, it keeps their order (the spec's buffer of 1 means the
  # seed shuffles nothing).
  batches = emnist_preprocessing.create_preprocess_fn(
      sources.no_shuffle_spec(batch_size, max_elements), debug_seed=0)(dataset)
  return batches.map(lambda x, y: collections.OrderedDict(x=x, y=y))
