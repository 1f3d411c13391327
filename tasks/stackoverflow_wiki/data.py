"""Stack Overflow (federated) and Wikipedia (central) as character sequences.

Seed 004 §5.2 and App. C.2.2: clients are TFF's federated Stack Overflow
users (`tff.simulation.datasets.stackoverflow.load_data`, the `tokens` text of
each post), the datacentre holds TFDS `wikipedia/20201201.en` articles, and
both become 100-character sequences over one shared character vocabulary for
next-character prediction. Evaluation mixes Stack Overflow evaluation clients
and Wikipedia at random, and also reports each source alone.

Vocabulary (this project's choice; the paper does not list one): id 0 pads,
1 is out-of-vocabulary, 2 is a newline and 3..97 are the printable ASCII
characters ' '..'~'. Ids are computed from the UTF-8 bytes with arithmetic
only (no lookup table, so the datasets serialise into TFF computations); a
non-ASCII character becomes one OOV id per byte.
"""

import collections
import os
from typing import Optional

import tensorflow as tf
import tensorflow_federated as tff

from tasks.common import sources

SEQUENCE_LENGTH = 100
PAD, OOV, NEWLINE = 0, 1, 2
_FIRST_PRINTABLE, _LAST_PRINTABLE = 32, 126  # ' ' .. '~'
VOCAB_SIZE = 3 + _LAST_PRINTABLE - _FIRST_PRINTABLE + 1  # 98

STACKOVERFLOW_URL = (
    'https://storage.googleapis.com/tff-datasets-public/'
    'stackoverflow.sqlite.lzma')
STACKOVERFLOW_FILE = 'stackoverflow.sqlite'
WIKIPEDIA = 'wikipedia/20201201.en'


DataUnavailableError = sources.DataUnavailableError


def vocabulary() -> list[str]:
  """The character of each id ('' for padding and OOV)."""
  return ['', '', '\n'] + [chr(c) for c in range(_FIRST_PRINTABLE,
                                                  _LAST_PRINTABLE + 1)]


def char_ids(text: tf.Tensor) -> tf.Tensor:
  """A scalar string -> int32 ids, one per byte (see the module docstring)."""
  codes = tf.cast(tf.io.decode_raw(text, tf.uint8), tf.int32)
  printable = tf.logical_and(codes >= _FIRST_PRINTABLE,
                             codes <= _LAST_PRINTABLE)
  ids = tf.where(printable, codes - _FIRST_PRINTABLE + 3, OOV)
  return tf.where(tf.equal(codes, 10), NEWLINE, ids)


def to_sequences(texts: tf.data.Dataset,
                 length: int = SEQUENCE_LENGTH) -> tf.data.Dataset:
  """Strings -> `{x, y}` pairs of `length` ids, y = x shifted by one.

  Each text is cut into consecutive pieces of `length + 1` ids (the last one
  padded with 0); x is a piece without its last id, y without its first.
  """

  def pieces(text):
    ids = char_ids(text)
    size = length + 1
    padding = (size - tf.shape(ids)[0] % size) % size
    ids = tf.pad(ids, [[0, padding]], constant_values=PAD)
    return tf.data.Dataset.from_tensor_slices(tf.reshape(ids, [-1, size]))

  def split(piece):
    return collections.OrderedDict(x=piece[:-1], y=piece[1:])

  return texts.flat_map(pieces).map(split)


def element_spec(length: int = SEQUENCE_LENGTH) -> collections.OrderedDict:
  return collections.OrderedDict(
      x=tf.TensorSpec([length], tf.int32), y=tf.TensorSpec([length], tf.int32))


def load_stackoverflow(cache_dir: Optional[str] = None, *,
                       download: bool = True):
  """TFF's (train, heldout, test) Stack Overflow `ClientData`.

  Raises:
    DataUnavailableError: One line saying what to fetch and where.
  """
  cache_dir = cache_dir or os.path.join(os.path.expanduser('~'), '.tff')
  return sources.load_tff_database(
      'Stack Overflow', STACKOVERFLOW_URL,
      os.path.join(cache_dir, STACKOVERFLOW_FILE),
      lambda: tff.simulation.datasets.stackoverflow.load_data(
          cache_dir=cache_dir),
      download=download)


def stackoverflow_texts(client_dataset: tf.data.Dataset) -> tf.data.Dataset:
  """A client's posts as strings (the `tokens` field)."""
  return client_dataset.map(lambda example: example['tokens'])


def load_wikipedia(data_dir: Optional[str] = None, *, download: bool = True,
                   split: str = 'train') -> tf.data.Dataset:
  """TFDS `wikipedia/20201201.en` article texts, streamed from TFDS's files.

  Raises:
    DataUnavailableError: One line saying what is missing and how to get it.
  """
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  try:
    articles = tfds.load(WIKIPEDIA, split=split, data_dir=data_dir,
                         download=download, shuffle_files=False)
  except Exception as e:  # pylint: disable=broad-except
    raise DataUnavailableError(
        f'Wikipedia: TFDS {WIKIPEDIA} is not prepared in '
        f'{data_dir or "~/tensorflow_datasets"} ({sources.first_line(e)}); run '
        f'`tfds build {WIKIPEDIA}` (needs apache-beam) or allow the '
        'download.') from e
  return articles.map(lambda article: article['text'])
