"""Stack Overflow tag prediction: seed 000's convex task (§4, App. B).

Data: TFF's federated Stack Overflow (`tff.simulation.datasets.stackoverflow`)
with its word and tag counts. As in seed 000 App. B: the 10,000 most frequent
words and 500 most frequent tags; each post (its `tokens` and `title`) is a
bag-of-words vector normalised to sum to 1 (out-of-vocabulary words are not
counted), its tags a multi-hot vector; 1,000 training clients with at most
500 posts each (§4.1; App. B says 250, which cannot give its own total of
331,027 training posts over 1,000 clients), and 10,000 test posts. The preprocessing is TFF's own
(`tff.simulation.baselines` tag prediction's `build_to_ids_fn`); we only
take the first posts instead of shuffling them first, so a run is the same
from its seed.

Model: one-vs-rest logistic regression (10,000 -> 500 sigmoid units,
5,000,500 parameters), binary cross-entropy, top-5 recall.
"""

import collections
import functools
import json
import os
from typing import Optional

import tensorflow as tf
import tensorflow_federated as tff
from tensorflow_federated.python.simulation.baselines.stackoverflow import (
    tag_prediction_preprocessing)

from tasks.common import flops
from tasks.common import sources
from tff_mixed import models
from tff_mixed.task import Task

WORD_VOCAB_SIZE = 10_000
TAG_VOCAB_SIZE = 500
MAX_POSTS_PER_CLIENT = 500  # §4.1 (App. B's 250 is below its own mean).
NUM_TRAIN_CLIENTS = 1_000
NUM_TEST_POSTS = 10_000
DATABASE_FILE = 'stackoverflow.sqlite'
# What TFF's load_word_counts / load_tag_counts extract into
# <cache_dir>/datasets/ (from .tar.bz2 archives keras downloads there).
WORD_COUNTS_FILE = 'stackoverflow.word_count'
TAG_COUNTS_FILE = 'stackoverflow.tag_count'
MODELS = ('logistic_regression',)
# What a binary's --data_dir is.
DATA_HELP = ("TFF's cache directory holding stackoverflow.sqlite and "
             "datasets/stackoverflow.{word,tag}_count (default ~/.tff).")


def _vocabularies(cache_dir: str, word_vocab_size: int, tag_vocab_size: int,
                  download: bool) -> tuple[list[str], list[str]]:
  """The most frequent words and tags. Extracted count files are read as
  TFF's loaders read them; missing ones are fetched by TFF's loaders."""
  counts_dir = os.path.join(cache_dir, 'datasets')
  words_path = os.path.join(counts_dir, WORD_COUNTS_FILE)
  tags_path = os.path.join(counts_dir, TAG_COUNTS_FILE)
  so = tff.simulation.datasets.stackoverflow
  if not (os.path.exists(words_path) and os.path.exists(tags_path)):
    if not download:
      raise sources.DataUnavailableError(
          f'Stack Overflow: {words_path} or {tags_path} not found; allow the '
          'download, or put the extracted stackoverflow.word_count.tar.bz2 and '
          f'stackoverflow.tag_count.tar.bz2 of tff-datasets-public in '
          f'{counts_dir}.')
    try:
      words = list(so.load_word_counts(cache_dir, word_vocab_size))
      tags = list(so.load_tag_counts(cache_dir))[:tag_vocab_size]
    except Exception as e:  # pylint: disable=broad-except
      raise sources.DataUnavailableError(
          f'Stack Overflow: could not fetch the word and tag counts into '
          f'{counts_dir} ({sources.first_line(e)}).') from e
    return words, tags
  with open(words_path) as f:
    words = [line.split()[0] for _, line in zip(range(word_vocab_size), f)]
  with open(tags_path) as f:
    tag_counts = json.load(f)
  tags = sorted(tag_counts, key=lambda t: tag_counts[t], reverse=True)
  return words, tags[:tag_vocab_size]


def load(data_dir: Optional[str] = None, *, download: bool = True,
         word_vocab_size: int = WORD_VOCAB_SIZE,
         tag_vocab_size: int = TAG_VOCAB_SIZE):
  """(train, test `ClientData`, word vocabulary, tag vocabulary).

  Raises:
    sources.DataUnavailableError: One line naming what is missing.
  """
  cache_dir = sources.tff_cache_dir(data_dir)
  train, _, test = sources.tff_client_data(
      'Stack Overflow', DATABASE_FILE,
      lambda d: tff.simulation.datasets.stackoverflow.load_data(cache_dir=d),
      cache_dir, download=download)
  words, tags = _vocabularies(cache_dir, word_vocab_size, tag_vocab_size,
                              download)
  return train, test, words, tags


def preprocess(posts: tf.data.Dataset, words, tags, batch_size: int,
               max_posts: Optional[int] = None) -> tf.data.Dataset:
  """Posts -> batches of `(x, y)`: the normalised bag of words and the
  multi-hot tags (TFF's `build_to_ids_fn`)."""
  to_ids = tag_prediction_preprocessing.build_to_ids_fn(words, tags)
  if max_posts is not None:
    posts = posts.take(max_posts)
  return posts.map(to_ids).map(
      lambda x, y: collections.OrderedDict(x=x, y=y)).batch(batch_size)


def model_fn_for(word_vocab_size: int = WORD_VOCAB_SIZE,
                 tag_vocab_size: int = TAG_VOCAB_SIZE):
  """No-arg builder of the one-vs-rest logistic regression."""
  spec = collections.OrderedDict(
      x=tf.TensorSpec([None, word_vocab_size], tf.float32),
      y=tf.TensorSpec([None, tag_vocab_size], tf.float32))

  def keras_model():
    return tf.keras.Sequential([
        tf.keras.layers.InputLayer(input_shape=(word_vocab_size,)),
        tf.keras.layers.Dense(tag_vocab_size, activation='sigmoid'),
    ])

  return models.KerasModelFn(
      keras_model, loss=tf.keras.losses.BinaryCrossentropy(), input_spec=spec,
      metrics=[functools.partial(tf.keras.metrics.Recall, top_k=5,
                                 name='recall_at_5')])


def create_task(data_dir: Optional[str] = None, *,
                model: str = MODELS[0], batch_size: int = 32,
                max_train_clients: Optional[int] = NUM_TRAIN_CLIENTS,
                download: bool = True, seed: int = 0,
                word_vocab_size: int = WORD_VOCAB_SIZE,
                tag_vocab_size: int = TAG_VOCAB_SIZE,
                num_test_posts: int = NUM_TEST_POSTS,
                flops_convention: str = flops.OURS) -> Task:
  """The task; `data_dir` is TFF's cache directory (default `~/.tff`).

  Training clients are `max_train_clients` drawn at random from `seed`
  (seed 000 uses 1,000 and does not say which), each its first
  `MAX_POSTS_PER_CLIENT` posts; evaluation is the first `num_test_posts`
  posts of the test split.
  """
  if model not in MODELS:
    raise ValueError(f'model must be one of {MODELS}, got {model!r}.')
  train, test, words, tags = load(data_dir, download=download,
                                  word_vocab_size=word_vocab_size,
                                  tag_vocab_size=tag_vocab_size)
  ids = sources.choose_clients(train.client_ids, max_train_clients,
                               seed=seed, name='Stack Overflow')
  return Task(
      name='stackoverflow_tags',
      model_fn=model_fn_for(len(words), len(tags)),
      train_client_ids=ids,
      train_dataset_fn=lambda cid: preprocess(
          train.create_tf_dataset_for_client(cid), words, tags, batch_size,
          MAX_POSTS_PER_CLIENT),
      eval_dataset_fn=lambda: preprocess(
          test.create_tf_dataset_from_all_clients(), words, tags, 256,
          num_test_posts),
      train_batch_size=batch_size,
      data_source=os.path.join(sources.tff_cache_dir(data_dir),
                               DATABASE_FILE),
      # The linear model's multiply-accumulates, counted as
      # `tasks.common.flops` counts a Dense layer's.
      flops_per_example=(6.0 if flops_convention == flops.OURS else 3.0)
      * len(words) * len(tags),
  )


# How long each paper preset takes on a 2-core CPU: the model's steps
# alone (bench/benchmark_round_cost.py; docs/benchmark_tasks.md).
DURATIONS = {
    'paper_000': 'at least 1.3-1.7 hours',
}

# Flag values of seed 000's setting (`tasks.common.benchmark`); see docs/benchmark_tasks.md, "What the presets set".
# paper_000: App. B (1,000 clients, C = 0.01 so 10 a round, B = 32), FedAdam
#   as Alg. 3 (beta_1 0.9, beta_2 0.999, eps 1e-8 inside the root), Table
#   5's K = 10 row: eta = 0.3 (not decayed: "Adam" in the d_eta column),
#   gamma = 1; 4,000 rounds, recall every 40; clients averaged uniformly,
#   as Alg. 3's line 8 prints ((1/M) sum q_t^i; `--client_weighting=
#   dataset_size` gives Alg. 1 line 7's |D_i| weighting instead).
PRESETS = {
    'paper_000': dict(model='logistic_regression', algorithm='fedadam',
                      server_adam='seed000', server_learning_rate=0.3,
                      client_learning_rate=1.0, batch_size=32,
                      max_train_clients=NUM_TRAIN_CLIENTS,
                      clients_per_round=10, num_local_steps=10,
                      client_weighting='uniform', rounds=4000,
                      eval_every=40),
    'cpu_small': dict(model='logistic_regression', algorithm='fedavg',
                      client_learning_rate=1.0, rounds=5, clients_per_round=2,
                      num_local_steps=2, eval_every=1, checkpoint_every=5,
                      max_train_clients=4, batch_size=8),
}
