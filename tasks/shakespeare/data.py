"""Shakespeare from TFF's federated Shakespeare (one client per speaking
part of a play, LEAF's preprocessing).

Sequences are TFF's character prediction preprocessing
(`tff.simulation.baselines` Shakespeare): each snippet becomes
`[bos] chars [eos]`, padded with 0 to a multiple of `sequence_length + 1`,
cut into pieces, and x / y are a piece without its last / first character.
The vocabulary is TFF's 86 characters plus pad (0), out-of-vocabulary, bos
and eos: 90 ids. The data's order is kept (TFF's shuffle takes no seed).
"""

import collections
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff
from tensorflow_federated.python.simulation.baselines.shakespeare import (
    char_prediction_preprocessing as chars)

from tasks.common import sources

DATABASE_FILE = 'shakespeare.sqlite'
SEQUENCE_LENGTH = 80
VOCAB_SIZE = len(chars.CHAR_VOCAB) + 4  # pad, the characters, oov, bos, eos
PAD = chars.get_special_tokens()[0]


def load(data_dir: Optional[str] = None, *, download: bool = True):
  """(train, test) `ClientData`."""
  return sources.tff_client_data(
      'Shakespeare', DATABASE_FILE,
      lambda d: tff.simulation.datasets.shakespeare.load_data(cache_dir=d),
      data_dir, download=download)


def num_characters(snippets: tf.data.Dataset) -> int:
  """The characters of a client's snippets (TFF's `{'snippets': text}`)."""
  return int(snippets.reduce(
      np.int64(0), lambda n, e: n + tf.cast(
          tf.strings.length(e['snippets']), tf.int64)))


def preprocess(dataset: tf.data.Dataset, batch_size: int,
               sequence_length: int = SEQUENCE_LENGTH,
               max_elements: Optional[int] = None) -> tf.data.Dataset:
  """Snippets -> batches of `{x, y}`, int32 `[B, sequence_length]`."""
  batches = chars.create_preprocess_fn(
      sources.no_shuffle_spec(batch_size, max_elements),
      sequence_length=sequence_length)(dataset)
  return batches.map(lambda x, y: collections.OrderedDict(
      x=tf.cast(x, tf.int32), y=tf.cast(y, tf.int32)))
