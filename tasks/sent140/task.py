"""The Sent140 task: tweet sentiment with a linear model, one client per
Twitter user (seeds 001 §4.1 and 003 App. B.2).

As both seeds describe it: each tweet is a bag of its words over the 5,000
most frequent words, normalised to sum to 1; a tweet with none of them is
dropped (seed 003); the model is linear with a softmax
over the two sentiments (10,002 parameters), cross-entropy loss. Users with
fewer than `min_samples` tweets in both splits together are dropped, as
seed 003 drops them before the split (10; LEAF's `preprocess.sh -k` does the
same when it makes the files). Evaluation pools the kept users' test
tweets. Data: LEAF's JSON files (`data.read_split`).

The 5,000 words are counted over the kept users' training and test tweets
together, as seed 003 §B.2 counts them ("the top 5k most common tokens in
the whole dataset"); `vocabulary='train'` counts the training tweets alone
(no word chosen by the evaluation set), which runs recorded before the
argument existed used.
"""

import collections
from typing import Optional

import numpy as np
import tensorflow as tf

from tasks.common import flag_table
from tasks.common import flops
from tasks.common import keras_models
from tasks.common import sources
from tasks.sent140 import data
from tff_mixed.task import Task

MODELS = ('linear',)
# What a binary's --data_dir is.
DATA_HELP = ("LEAF's data/sent140/data directory (its train/ and test/ JSON "
             "files; default leaf/data/sent140/data).")
VOCAB_SIZE = 5_000
MIN_SAMPLES = 10
# Which tweets choose the vocabulary: both splits (seed 003) or training.
VOCABULARIES = ('all', 'train')
# `create_task` arguments a run spec sets beyond the benchmark tasks' own
# (`tasks.common.task_registry`), and what a run recorded before one existed
# used (such a record is read with it).
EXTRA_ARGUMENTS = ('vocabulary',)
ARGUMENTS_BEFORE = {'vocabulary': 'train'}


def define_flags(table: flag_table.Table) -> None:
  """Sent140's flag beside every benchmark task's (`tasks.common.benchmark`)."""
  table.define(
      flag_table.ENUM, 'vocabulary', 'all', list(VOCABULARIES),
      'Which tweets choose the 5,000 words: all (the kept users\' training '
      'and test tweets, seed 003 §B.2\'s "whole dataset") or train (the '
      'training tweets alone).')


def keras_model(model: str = 'linear',
                vocab_size: int = VOCAB_SIZE) -> tf.keras.Model:
  if model not in MODELS:
    raise ValueError(f'model must be one of {MODELS}, got {model!r}.')
  return tf.keras.Sequential([
      tf.keras.layers.InputLayer(input_shape=(vocab_size,)),
      tf.keras.layers.Dense(2, activation='softmax')])


def model_fn_for(model: str = 'linear', vocab_size: int = VOCAB_SIZE):
  return keras_models.sparse_classifier(
      lambda: keras_model(model, vocab_size),
      collections.OrderedDict(x=tf.TensorSpec([None, vocab_size], tf.float32),
                              y=tf.TensorSpec([None], tf.int32)))


def bag_of_words(ids: np.ndarray, labels: np.ndarray, vocab_size: int,
                 batch_size: int) -> tf.data.Dataset:
  """Padded word ids [n, L] -> batches of `{x: normalised counts, y}`."""

  def to_bag(word_ids, label):
    counts = tf.reduce_sum(tf.one_hot(word_ids, vocab_size), axis=0)
    return collections.OrderedDict(
        x=tf.math.divide_no_nan(counts, tf.reduce_sum(counts)), y=label)

  return tf.data.Dataset.from_tensor_slices(
      (ids, labels.astype(np.int32))).map(to_bag).batch(batch_size)


def _encoded(users, vocab):
  """{user: (ids [n, L], labels [n])} without tweets that have no word of
  `vocab`; users left without tweets are dropped."""
  out = {}
  for user, (texts, labels) in users.items():
    ids = data.to_ids(texts, vocab)
    keep = (ids != data.PAD).any(axis=1)
    if keep.any():
      out[user] = (ids[keep], np.asarray(labels)[keep])
  return out


def create_task(data_dir: Optional[str] = None, *, model: str = 'linear',
                batch_size: int = 8, max_train_clients: Optional[int] = None,
                download: bool = True, seed: int = 0,
                vocab_size: int = VOCAB_SIZE,
                min_samples: int = MIN_SAMPLES,
                flops_convention: str = flops.OURS,
                vocabulary: str = 'all') -> Task:
  """The task; `data_dir` is LEAF's `data/sent140/data` directory (its
  `train/` and `test/` JSON files).

  Raises:
    sources.DataUnavailableError: The files are missing or not LEAF's.
  """
  del download, seed  # LEAF's files are made by its own scripts; no randomness.
  if vocabulary not in VOCABULARIES:
    raise ValueError(f'vocabulary must be one of {VOCABULARIES}, got '
                     f'{vocabulary!r}.')
  model_fn = model_fn_for(model, vocab_size)
  data_dir = data_dir or 'leaf/data/sent140/data'
  train_split = data.read_split(data_dir, 'train')
  test_split = data.read_split(data_dir, 'test')
  # Seed 003 §B.2 drops users with fewer than 10 tweets before LEAF's 80/20
  # split, so a user's tweets on both sides count.
  counts = collections.Counter()
  for split in (train_split, test_split):
    counts.update({u: len(labels) for u, (_, labels) in split.items()})
  kept = {u for u, n in counts.items() if n >= min_samples}
  train_users = {u: v for u, v in train_split.items() if u in kept}
  counted = [train_users]
  if vocabulary == 'all':
    counted.append({u: v for u, v in test_split.items() if u in kept})
  words = data.vocabulary(counted, vocab_size)
  vocab = {w: i for i, w in enumerate(words)}
  train = _encoded(train_users, vocab)
  test_texts, test_labels = [], []
  for user, (texts, labels) in test_split.items():
    if user in kept:
      test_texts.extend(texts)
      test_labels.extend(labels)
  test_ids = data.to_ids(test_texts, vocab)
  keep = (test_ids != data.PAD).any(axis=1)
  test_ids, test_labels = test_ids[keep], np.asarray(test_labels)[keep]
  sources.warn_if_fewer('Sent140', max_train_clients, len(train))
  ids = sorted(train)[:max_train_clients]
  if not ids:
    raise sources.DataUnavailableError(
        f'Sent140 in {data_dir}: no user has {min_samples} tweets and a '
        'training tweet with a vocabulary word.')
  return Task(
      name='sent140',
      model_fn=model_fn,
      train_client_ids=ids,
      train_dataset_fn=lambda cid: bag_of_words(*train[cid], vocab_size,
                                                batch_size),
      eval_dataset_fn=lambda: bag_of_words(test_ids, test_labels,
                                           vocab_size, 256),
      train_batch_size=batch_size,
      flops_per_example=flops.flops_per_example(
          keras_model(model, vocab_size), flops_convention),
  )


# How long each paper preset takes on a 2-core CPU: the model's steps
# alone (bench/benchmark_round_cost.py; docs/benchmark_tasks.md).
DURATIONS = {
    'paper_001': 'at least 6 hours',
    'paper_003': 'at least 12-18 minutes',
}

# Flag values of each paper's setting (`tasks.common.benchmark`); see docs/benchmark_tasks.md, "What the presets set".
# paper_001: §4.1 and Table 1 (21,876 users, 50 a round, K = 60, gamma =
#   3 from Table 1's two unlabelled columns). The batch size and the
#   minimum tweets per user were lost: B = 8 and 10 (seed 003); 10,000
#   rounds. Table 2's Sent140 minibatch time was lost too: the simulated
#   wall-clock keeps --minibatch_seconds' default, FEMNIST's 0.017 s.
#   Clients weighted by examples processed (the seed does not say).
# paper_003: App. B.2 (21,876 users, 22 a round, B = 8), FedGBO with SGDm
#   at K = 10: Table 8's {eta, beta} = {10, 0.99}; 5,000 rounds.
#   Clients averaged uniformly (FedGBO's default: §2's server averages
#   the client models). FLOPs counted as seed 003 counts them.
PRESETS = {
    'paper_001': dict(model='linear', algorithm='fedavg', batch_size=8,
                      clients_per_round=50, num_local_steps=60,
                      client_learning_rate=3.0, rounds=10000,
                      eval_every=100),
    'paper_003': dict(model='linear', algorithm='fed_gbo', optimizer='sgdm',
                      client_learning_rate=10.0, beta=0.99, batch_size=8,
                      clients_per_round=22, num_local_steps=10, rounds=5000,
                      eval_every=50, flops_convention='seed_003'),
    'cpu_small': dict(model='linear', algorithm='fedavg',
                      client_learning_rate=1.0, rounds=5, clients_per_round=2,
                      num_local_steps=2, eval_every=1, checkpoint_every=5,
                      max_train_clients=4, batch_size=8),
}
