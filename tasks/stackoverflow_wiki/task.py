"""The Stack Overflow + Wikipedia character language model task.

Seed 004 §5.2 and App. C.2.2: a GRU language model (embedding 256, 1024 GRU
units) predicts the next character of 100-character sequences. Clients hold
Stack Overflow posts; the datacentre holds Wikipedia articles. Evaluation is
on a random shuffle of Stack Overflow evaluation-client sequences and
held-out Wikipedia sequences, and on each source alone (the paper's Fig. 4).

Padding (id 0, the tail of a text's last piece) is neither predicted nor
scored: the loss is the mean cross-entropy over real characters and the
accuracy counts real characters only.
"""

import collections
from collections.abc import Callable
from typing import Optional

import numpy as np
import tensorflow as tf

from tasks.common import built_task
from tasks.common import flag_table
from tasks.common import task_runs
from tasks.stackoverflow_wiki import data
from tff_mixed import models
from tff_mixed.task import Task

EMBEDDING_DIM = 256
GRU_UNITS = 1024


class PaddedCrossentropy(tf.keras.losses.Loss):
  """Mean sparse cross-entropy (from logits) over the non-padding targets."""

  def __init__(self, pad_id: int = data.PAD, name: str = 'padded_crossentropy'):
    super().__init__(name=name)
    self.pad_id = pad_id

  def __call__(self, y_true, y_pred, sample_weight=None):
    if sample_weight is not None:
      raise ValueError('PaddedCrossentropy weights targets by padding only; '
                       'sample_weight must be None.')
    losses = tf.keras.losses.sparse_categorical_crossentropy(
        y_true, y_pred, from_logits=True)
    mask = tf.cast(tf.not_equal(y_true, self.pad_id), losses.dtype)
    return tf.math.divide_no_nan(tf.reduce_sum(losses * mask),
                                 tf.reduce_sum(mask))

  def get_config(self):
    return {'pad_id': self.pad_id, 'name': self.name}


class PaddedAccuracy(tf.keras.metrics.Mean):
  """Next-character accuracy over the non-padding targets."""

  def __init__(self, name: str = 'accuracy', dtype=None,
               pad_id: int = data.PAD):
    super().__init__(name=name, dtype=dtype)
    self.pad_id = pad_id

  def update_state(self, y_true, y_pred, sample_weight=None):
    y_true = tf.cast(y_true, tf.int64)
    correct = tf.cast(tf.equal(tf.argmax(y_pred, axis=-1), y_true),
                      self.dtype)
    mask = tf.cast(tf.not_equal(y_true, self.pad_id), self.dtype)
    if sample_weight is not None:
      mask *= tf.cast(sample_weight, self.dtype)
    return super().update_state(correct, sample_weight=mask)

  def get_config(self):
    return {**super().get_config(), 'pad_id': self.pad_id}


def input_spec(length: int = data.SEQUENCE_LENGTH):
  return collections.OrderedDict(
      x=tf.TensorSpec([None, length], tf.int32),
      y=tf.TensorSpec([None, length], tf.int32))


def model_fn_for(embedding_dim: int = EMBEDDING_DIM,
                 gru_units: int = GRU_UNITS,
                 length: int = data.SEQUENCE_LENGTH):
  """No-arg model builder: Embedding -> GRU (all steps) -> Dense(vocabulary)."""

  def keras_model():
    return tf.keras.Sequential([
        tf.keras.layers.InputLayer(input_shape=(length,), dtype=tf.int32),
        tf.keras.layers.Embedding(data.VOCAB_SIZE, embedding_dim),
        tf.keras.layers.GRU(gru_units, return_sequences=True),
        tf.keras.layers.Dense(data.VOCAB_SIZE),
    ])

  # Groups train one client after another (`not_vectorisable` says why:
  # the padded-token loss takes no sample_weight).
  return models.KerasModelFn(
      keras_model, loss=PaddedCrossentropy(), input_spec=input_spec(length),
      metrics=[PaddedAccuracy])


def wikipedia_splits(eval_articles: int) -> tuple[str, str]:
  """TFDS split strings (central, evaluation): the first `eval_articles`
  articles of Wikipedia's only split are held out for evaluation."""
  if eval_articles < 1:
    raise ValueError(f'eval_articles must be >= 1, got {eval_articles}.')
  return f'train[{eval_articles}:]', f'train[:{eval_articles}]'


def create_stackoverflow_wiki_task(
    cache_dir: Optional[str] = None,
    data_dir: Optional[str] = None,
    *,
    batch_size: int = 8,
    eval_batch_size: int = 100,
    eval_clients: int = 1000,
    eval_sequences: int = 10000,
    wikipedia_eval_articles: int = 1000,
    embedding_dim: int = EMBEDDING_DIM,
    gru_units: int = GRU_UNITS,
    seed: int = 0,
    download: bool = True,
) -> tuple[Task, Callable[[], tf.data.Dataset]]:
  """The task (Stack Overflow clients) and its central Wikipedia data.

  Args:
    cache_dir: TFF's cache directory holding `stackoverflow.sqlite`.
    data_dir: TFDS data directory holding `wikipedia/20201201.en`.
    batch_size: Client batch size |B_i| (sequences).
    eval_batch_size: Evaluation batch size.
    eval_clients: Stack Overflow evaluation (test) clients sampled with
      `seed` for evaluation.
    eval_sequences: Sequences taken from each source for evaluation; the
      mixed set shuffles the two (2 x `eval_sequences`).
    wikipedia_eval_articles: The first this many Wikipedia articles are
      evaluation data; the rest are the central training data.
    embedding_dim: Character embedding width (256 in the paper).
    gru_units: GRU width (1024 in the paper).
    seed: Seeds the evaluation sample and its shuffle.
    download: Fetch missing data (Stack Overflow from TFF's bucket,
      Wikipedia through TFDS).

  Returns:
    `(task, central_examples_fn)`: `central_examples_fn()` streams the
    central Wikipedia sequences, unbatched and unshuffled.

  Raises:
    data.DataUnavailableError: If a source is missing (one line).
    ValueError: For a non-positive size.
  """
  for name, value in (('batch_size', batch_size),
                      ('eval_batch_size', eval_batch_size),
                      ('eval_clients', eval_clients),
                      ('eval_sequences', eval_sequences)):
    if value < 1:
      raise ValueError(f'{name} must be >= 1, got {value}.')
  central_split, eval_split = wikipedia_splits(wikipedia_eval_articles)
  train, _, test = data.load_stackoverflow(cache_dir, download=download)
  # Fails now, with the one-line error, rather than inside the first round.
  data.load_wikipedia(data_dir, download=download, split=eval_split)
  rng = np.random.default_rng(seed)
  test_ids = list(test.client_ids)
  chosen = rng.choice(len(test_ids), min(eval_clients, len(test_ids)),
                      replace=False)
  eval_client_ids = [test_ids[i] for i in sorted(chosen)]

  def train_dataset_fn(client_id):
    texts = data.stackoverflow_texts(train.create_tf_dataset_for_client(client_id))
    return data.to_sequences(texts).batch(batch_size)

  def eval_dataset_fn():
    so_posts = tf.data.Dataset.from_tensor_slices(eval_client_ids).flat_map(
        test.serializable_dataset_fn)
    so = data.to_sequences(data.stackoverflow_texts(so_posts)).take(
        eval_sequences)
    wiki = data.to_sequences(data.load_wikipedia(
        data_dir, download=False, split=eval_split)).take(eval_sequences)
    mixed = so.concatenate(wiki).shuffle(
        2 * eval_sequences, seed=seed, reshuffle_each_iteration=False)
    return collections.OrderedDict(
        (name, dataset.batch(eval_batch_size)) for name, dataset in
        (('all', mixed), ('stackoverflow', so), ('wikipedia', wiki)))

  def central_examples_fn():
    return data.to_sequences(
        data.load_wikipedia(data_dir, download=False, split=central_split))

  task = Task(
      name='stackoverflow_wiki',
      model_fn=model_fn_for(embedding_dim, gru_units),
      train_client_ids=list(train.client_ids),
      train_dataset_fn=train_dataset_fn,
      eval_dataset_fn=eval_dataset_fn,
      train_batch_size=batch_size,
  )
  return task, central_examples_fn


def central_batch_size_for(algorithm_name: str) -> int:
  """Seed 004 App. C.2's |B_c| here: 6400 for 1-way GT (the rubric's 12800,
  halved by the paper), 800 else."""
  return 6400 if algorithm_name == 'one_way_gradient_transfer' else 800


def build(algorithm, run, *, cache_dir: Optional[str] = None,
          data_dir: Optional[str] = None, download: bool = True,
          batch_size: int = 8, embedding_dim: int = EMBEDDING_DIM,
          gru_units: int = GRU_UNITS,
          central_batch_size: Optional[int] = None,
          central_shuffle_buffer: int = 10000, eval_clients: int = 1000,
          eval_sequences: int = 10000,
          wikipedia_eval_articles: int = 1000) -> built_task.BuiltTask:
  """The Stack Overflow + Wikipedia task of a run
  (`tasks.common.task_registry`), `create_stackoverflow_wiki_task` from the
  run's seed, and its central Wikipedia sequences shuffled from the seed,
  in batches of `central_batch_size` (default the paper's for the
  algorithm, `central_batch_size_for`)."""
  task, central_examples_fn = create_stackoverflow_wiki_task(
      cache_dir, data_dir, batch_size=batch_size, eval_clients=eval_clients,
      eval_sequences=eval_sequences,
      wikipedia_eval_articles=wikipedia_eval_articles,
      embedding_dim=embedding_dim, gru_units=gru_units, seed=run.seed,
      download=download)
  return built_task.with_central_examples(
      task, central_examples_fn, shuffle_buffer=central_shuffle_buffer,
      batch_size=central_batch_size or central_batch_size_for(
          algorithm.algorithm), seed=run.seed)


def _per_algorithm(values: dict, given: frozenset) -> None:
  """--central_batch_size's default is the paper's for --algorithm; 2-way
  GT's client learning rate is 1.0 unless given (2.0 diverged in the
  paper)."""
  if values['central_batch_size'] is None:
    values['central_batch_size'] = central_batch_size_for(values['algorithm'])
  if (values['algorithm'] == 'two_way_gradient_transfer'
      and 'client_learning_rate' not in given):
    values['client_learning_rate'] = 1.0


def _define_flags(table: flag_table.Table) -> None:
  """The binary's own flags (the task's arguments), in `table`."""
  table.define(flag_table.STRING, 'cache_dir', None,
               'Directory of stackoverflow.sqlite (TFF cache; default '
               '~/.tff).')
  table.define(flag_table.STRING, 'data_dir', None,
               'TFDS data directory with wikipedia/20201201.en (default '
               '~/tensorflow_datasets).')
  table.define(flag_table.BOOL, 'download', True,
               'Download the data if it is missing.')
  task_runs.define_batch_flags(
      table, 8, batch_help='Client batch size |B_i| (sequences).')
  table.define(flag_table.INTEGER, 'embedding_dim', EMBEDDING_DIM,
               'Character embedding width.', lower_bound=1)
  table.define(flag_table.INTEGER, 'gru_units', GRU_UNITS, 'GRU width.',
               lower_bound=1)
  table.define(flag_table.INTEGER, 'central_batch_size', None,
               'Central batch size |B_c| (default: 6400 for 1-way GT, '
               '800 for PT and 2-way GT).', lower_bound=1)
  table.define(flag_table.INTEGER, 'central_shuffle_buffer', 10000,
               'Shuffle buffer of the central Wikipedia sequences.',
               lower_bound=1)
  table.define(flag_table.INTEGER, 'eval_clients', 1000,
               'Stack Overflow evaluation clients sampled (with '
               '--seed) for evaluation.', lower_bound=1)
  table.define(flag_table.INTEGER, 'eval_sequences', 10000,
               'Evaluation sequences from each source; the mixed '
               'evaluation set shuffles both.', lower_bound=1)
  table.define(flag_table.INTEGER, 'wikipedia_eval_articles', 1000,
               'The first this many Wikipedia articles are held out '
               'for evaluation; the rest are central training data.',
               lower_bound=1)


# The binary's defaults (`tasks.common.task_runs`): the paper's, App. C.2;
# 2,000 rounds, Fig. 10's horizon ("similar loss and accuracy by round
# 2000").
RUNS = task_runs.Runs(
    define_flags=_define_flags,
    preset_help='cpu_small: flags you did not set become a small run; paper: '
                'the flags\' defaults are the paper\'s.',
    training_defaults=dict(rounds=2000, clients_per_round=100,
                           num_local_steps=16, client_learning_rate=2.0,
                           federated_weight=0.73, central_weight=0.27,
                           client_learning_rate_help=(
                               '1.0 with --algorithm=two_way_gradient_'
                               'transfer unless set')),
    presets={
        'paper': {},  # The flags' defaults are the paper's.
        'cpu_small': dict(rounds=5, clients_per_round=4, embedding_dim=16,
                          gru_units=32, central_batch_size=32,
                          central_shuffle_buffer=1000, eval_clients=20,
                          eval_sequences=200, wikipedia_eval_articles=100,
                          eval_every=1, checkpoint_every=5),
    },
    preset_durations={'paper': 'weeks: 21-31 minutes a round for 2,000 '
                               'rounds (GRU 1024; docs/mixed_fl.md)'},
    rules=_per_algorithm)
