"""The Shakespeare task: next-character prediction, one client per part.

Two sources (the model's name picks it):
* LEAF's (`leaf_` models, `tasks.shakespeare.leaf`), the seeds' task: every
  80-character window of a speaker's text is one sample whose target is
  the next character; LEAF's 80-character alphabet and an out-of-alphabet
  id, 81 ids. The paper presets use it.
* TFF's (`tff.simulation.datasets.shakespeare`): each line cut into chunks
  of 80 with a target at every position, ~60-80x fewer sequences; 86
  characters plus padding, out-of-vocabulary, begin and end, 90 ids.
  Padding is neither predicted nor scored (the loss and accuracy of
  `tasks.stackoverflow_wiki.task`).

Models (`MODELS`), Embedding 8 then two GRUs then a Dense layer over the
characters (its softmax in the loss):
* `gru256` / `leaf_gru256`, seed 000 App. B Table 3.
* `gru128` / `leaf_gru128`, seeds 001 §4.1 and 003 App. B Table 7 (seed
  001's embedding width was lost in its extraction; we use seed 003's 8).
On LEAF's windows the second GRU's last state predicts; on TFF's chunks
every position does. The seeds count 77 (seed 000) and 79 (seed 003)
characters where LEAF's alphabet has 80. Evaluation pools the test samples
of every part.
"""

import collections
import functools
from typing import Optional

import tensorflow as tf

from tasks.common import flops
from tasks.common import sources
from tasks.shakespeare import data
from tasks.shakespeare import leaf
from tasks.stackoverflow_wiki import task as char_lm
from tff_mixed import models
from tff_mixed.task import Task

MODELS = ('gru128', 'gru256', 'leaf_gru128', 'leaf_gru256')
_UNITS = {'gru128': 128, 'gru256': 256}
LEAF_PREFIX = 'leaf_'
# What a binary's --data_dir is.
DATA_HELP = ("TFF's cache directory holding shakespeare.sqlite (default "
             "~/.tff); for the leaf_ models, LEAF's data/shakespeare/data "
             f"directory (its train/ and test/ JSON files; default "
             f"{leaf.DEFAULT_DIR}).")
EMBEDDING_DIM = 8


def is_leaf(model: str) -> bool:
  """Whether `model` reads LEAF's windows (one target each), not TFF's
  chunks (a target at every position)."""
  return model.startswith(LEAF_PREFIX)


def keras_model(model: str = 'gru128',
                sequence_length: int = data.SEQUENCE_LENGTH) -> tf.keras.Model:
  """The GRU of `model`: on LEAF's windows its last state predicts the next
  character; on TFF's chunks every position predicts the next."""
  units = _UNITS.get(model.removeprefix(LEAF_PREFIX))
  if units is None or model not in MODELS:
    raise ValueError(f'model must be one of {MODELS}, got {model!r}.')
  layers = tf.keras.layers
  if is_leaf(model):
    return tf.keras.Sequential([
        layers.InputLayer(input_shape=(leaf.WINDOW,), dtype=tf.int32),
        layers.Embedding(leaf.VOCAB_SIZE, EMBEDDING_DIM),
        layers.GRU(units, return_sequences=True),
        layers.GRU(units),
        layers.Dense(leaf.VOCAB_SIZE),  # Logits.
    ])
  return tf.keras.Sequential([
      layers.InputLayer(input_shape=(sequence_length,), dtype=tf.int32),
      layers.Embedding(data.VOCAB_SIZE, EMBEDDING_DIM),
      layers.GRU(units, return_sequences=True),
      layers.GRU(units, return_sequences=True),
      layers.Dense(data.VOCAB_SIZE),  # Logits: the loss applies the softmax.
  ])


def model_fn_for(model: str = 'gru128',
                 sequence_length: int = data.SEQUENCE_LENGTH):
  keras_model(model, sequence_length)  # Checks the name now.
  if is_leaf(model):
    return models.KerasModelFn(
        functools.partial(keras_model, model),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        input_spec=collections.OrderedDict(
            x=tf.TensorSpec([None, leaf.WINDOW], tf.int32),
            y=tf.TensorSpec([None], tf.int32)),
        metrics=[functools.partial(tf.keras.metrics.SparseCategoricalAccuracy,
                                   name='accuracy')])
  spec = char_lm.input_spec(sequence_length)

  # A KerasModelFn says why its groups train one client after another (the
  # padded-token loss takes no sample_weight): `not_vectorisable`.
  return models.KerasModelFn(
      functools.partial(keras_model, model, sequence_length),
      loss=char_lm.PaddedCrossentropy(pad_id=data.PAD), input_spec=spec,
      metrics=[functools.partial(char_lm.PaddedAccuracy, pad_id=data.PAD)])


def create_task(data_dir: Optional[str] = None, *, model: str = 'gru128',
                batch_size: int = 32, max_train_clients: Optional[int] = None,
                download: bool = True, seed: int = 0,
                sequence_length: int = data.SEQUENCE_LENGTH,
                flops_convention: str = flops.OURS) -> Task:
  """The task; `data_dir` is TFF's cache directory (default `~/.tff`), or
  for a `leaf_` model LEAF's data directory (`leaf.read_split`).

  Seed 000 takes the 1,000 parts with the most samples (§4.1); seed 003
  keeps 660 (those with at least 2 lines, App. B.4); TFF's split has 715.
  `max_train_clients` takes the parts with the most samples (LEAF's) or
  characters (TFF's chunks; LEAF's samples are one a character): seed 000's
  rule, which also drops the smallest parts as seed 003's does.
  """
  del seed  # Nothing random: the largest clients, data in order.
  model_fn = model_fn_for(model, sequence_length)
  fb = flops.flops_per_example(keras_model(model, sequence_length),
                               flops_convention)
  if is_leaf(model):
    return _leaf_task(data_dir or leaf.DEFAULT_DIR, model_fn, batch_size,
                      max_train_clients, fb)
  train, test = data.load(data_dir, download=download)
  ids = sources.choose_clients(
      train.client_ids, max_train_clients, how=sources.LARGEST,
      size_fn=lambda c: data.num_characters(
          train.create_tf_dataset_for_client(c)),
      name='Shakespeare (TFF)')
  return Task(
      name='shakespeare',
      model_fn=model_fn,
      train_client_ids=ids,
      train_dataset_fn=lambda cid: data.preprocess(
          train.create_tf_dataset_for_client(cid), batch_size,
          sequence_length),
      eval_dataset_fn=lambda: data.preprocess(
          test.create_tf_dataset_from_all_clients(), 128, sequence_length),
      train_batch_size=batch_size,
      flops_per_example=fb,
  )


def _leaf_task(data_dir, model_fn, batch_size, max_train_clients,
               flops_per_example) -> Task:
  """LEAF's windows: clients held as arrays (`Task.train_arrays_fn`), the
  kept users' test samples pooled for evaluation."""
  train = leaf.read_split(data_dir, 'train')
  test = leaf.read_split(data_dir, 'test')
  ids = sources.choose_clients(list(train), max_train_clients,
                               how=sources.LARGEST,
                               size_fn=lambda c: len(train[c][1]),
                               name=f'Shakespeare (LEAF, {data_dir})')
  test_x, test_y = leaf.pooled(test, sorted(test))
  return Task(
      name='shakespeare',
      model_fn=model_fn,
      train_client_ids=ids,
      train_dataset_fn=lambda cid: leaf.dataset(*train[cid], batch_size),
      train_arrays_fn=lambda cid: leaf.arrays(*train[cid]),
      eval_dataset_fn=lambda: leaf.dataset(test_x, test_y, 256),
      train_batch_size=batch_size,
      flops_per_example=flops_per_example,
  )


# How long each paper preset takes on a 2-core CPU: the model's steps
# alone (bench/benchmark_round_cost.py; docs/benchmark_tasks.md).
DURATIONS = {
    'paper_000': 'at least 21-28 hours',
    'paper_001': 'at least 190 hours (8 days)',
    'paper_003': 'at least 8-9 hours',
}

# Flag values of each paper's setting (`tasks.common.benchmark`); see docs/benchmark_tasks.md, "What the presets set".
# Every paper preset reads LEAF's windows (the seeds' task; --model=gru128
# or gru256 reads TFF's chunks instead) and takes the parts with the most
# samples.
# paper_000: App. B (C = 0.01 of 1,000 parts, 10 a round; §4.1 takes the
#   1,000 with the most samples); B = 32; Table 5's K = 10 row: eta_0 = 1
#   decayed by 0.9996, gamma = 1; 4,000 rounds, every 40; |D_i|
#   weighting (Alg. 1 line 7).
# paper_001: §4.1 and Table 1 (660 parts, 10 a round, K = 80, gamma = 0.1
#   from Table 1's two unlabelled columns). The batch size was lost: B = 32
#   (seed 003). 10,000 rounds; Table 2's 1.5 s minibatch. Table 1's model
#   size (5.21 Mb) is this model with 79 characters (ours, 81 ids: 5.22).
#   Clients weighted by examples processed (the seed does not say).
# paper_003: App. B.4 (660 parts, 7 a round, B = 32), FedGBO with SGDm at
#   K = 10: Table 8's {eta, beta} = {1, 0.9}; 5,000 rounds.
#   Clients averaged uniformly (FedGBO's default: §2's server averages
#   the client models). FLOPs counted as seed 003 counts them (Table 4's
#   118 x 10^8 for FedAvg: tests/test_flops.py).
PRESETS = {
    'paper_000': dict(model='leaf_gru256', algorithm='fedavg', batch_size=32,
                      max_train_clients=1000, clients_per_round=10,
                      num_local_steps=10, client_learning_rate=1.0,
                      server_learning_rate=1.0,
                      server_lr_schedule='exponential',
                      server_lr_decay_rate=0.9996,
                      client_weighting='dataset_size', rounds=4000,
                      eval_every=40),
    'paper_001': dict(model='leaf_gru128', algorithm='fedavg', batch_size=32,
                      max_train_clients=660, clients_per_round=10,
                      num_local_steps=80, client_learning_rate=0.1,
                      rounds=10000, eval_every=100, minibatch_seconds=1.5),
    'paper_003': dict(model='leaf_gru128', algorithm='fed_gbo',
                      optimizer='sgdm', client_learning_rate=1.0, beta=0.9,
                      batch_size=32, max_train_clients=660,
                      clients_per_round=7, num_local_steps=10, rounds=5000,
                      eval_every=50, flops_convention='seed_003'),
    'cpu_small': dict(model='leaf_gru128', algorithm='fedavg',
                      client_learning_rate=1.0, rounds=5, clients_per_round=2,
                      num_local_steps=2, eval_every=1, checkpoint_every=5,
                      max_train_clients=4, batch_size=8),
}
