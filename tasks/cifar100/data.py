"""CIFAR-100 from TFF's federated CIFAR-100 (500 training clients of 100
images each, a Pachinko-allocation split by label; 100 test clients).

Evaluation images are TFF's preprocessing (`tff.simulation.baselines`
CIFAR-100: centre crop, per-image standardisation). Training images get the
random crop and horizontal flip seed 001 §4.1 applies; TFF's version of
that draws unseeded random numbers, so ours uses stateless ops seeded by
(seed, client, example index): a run repeats from its seed, and a client's
images get the same crop and flip in every round.
"""

import collections
import zlib
from typing import Optional

import tensorflow as tf
import tensorflow_federated as tff
from tensorflow_federated.python.simulation.baselines.cifar100 import (
    image_classification_preprocessing as images)

from tasks.common import sources

DATABASE_FILE = 'cifar100.sqlite'
NUM_CLASSES = 100
CROP_SHAPE = (28, 28, 3)  # Seed 003 §B.1 (seed 001 lost the size).


def load(data_dir: Optional[str] = None, *, download: bool = True):
  """(train, test) `ClientData`."""
  return sources.tff_client_data(
      'CIFAR-100', DATABASE_FILE,
      lambda d: tff.simulation.datasets.cifar100.load_data(cache_dir=d),
      data_dir, download=download)


def client_seed(seed: int, client_id: str) -> int:
  """A 31-bit seed of (seed, client id), the same in every process."""
  return zlib.crc32(f'{seed}:{client_id}'.encode()) & 0x7FFFFFFF


def preprocess_train(dataset: tf.data.Dataset, batch_size: int, seed: int,
                     crop_shape=CROP_SHAPE) -> tf.data.Dataset:
  """Random crop to `crop_shape` and flip, seeded; then standardised."""

  def distort(index, example):
    key = tf.stack([tf.cast(seed, tf.int64), index])
    image = tf.cast(example['image'], tf.float32)
    image = tf.image.stateless_random_crop(image, crop_shape, seed=key)
    image = tf.image.stateless_random_flip_left_right(image, seed=key + 1)
    return collections.OrderedDict(
        x=tf.image.per_image_standardization(image), y=example['label'])

  return dataset.enumerate().map(distort).batch(batch_size)


def preprocess_eval(dataset: tf.data.Dataset, batch_size: int,
                    crop_shape=CROP_SHAPE) -> tf.data.Dataset:
  """TFF's evaluation preprocessing: centre crop, standardised."""
  batches = images.create_preprocess_fn(
      sources.no_shuffle_spec(batch_size), crop_shape=crop_shape)(dataset)
  return batches.map(lambda x, y: collections.OrderedDict(x=x, y=y))
