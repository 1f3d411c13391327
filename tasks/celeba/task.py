"""The CelebA smile task: model, federated/central/evaluation data.

Seed 004 App. C.2.1: a fully connected network with one hidden layer of 64
ReLU units and a sigmoid output, binary cross-entropy; metrics AUC of the ROC
and accuracy, reported on all evaluation data and per label.
"""

import collections
import functools
from typing import Callable, Optional

import tensorflow as tf

from tasks.celeba import data
from tasks.common import built_task
from tasks.common import flag_table
from tasks.common import task_runs
from tff_mixed import models
from tff_mixed.task import Task

HIDDEN_UNITS = 64


def input_spec() -> collections.OrderedDict:
  return collections.OrderedDict(
      x=tf.TensorSpec((None, *data.IMAGE_SHAPE), tf.float32),
      y=tf.TensorSpec((None, 1), tf.float32))


class AUC(tf.keras.metrics.AUC):
  """Keras's ROC AUC, but NaN where it is undefined: over examples of one
  label only (the `smiling` and `not_smiling` evaluation subsets), Keras
  reports 0.0, which reads as the worst possible ranking."""

  def update_state(self, y_true, y_pred, sample_weight=None):
    # Keras compiles a subclass's update_state, which must not return the
    # op Keras's AUC returns.
    super().update_state(y_true, y_pred, sample_weight)

  def result(self):
    positives = self.true_positives[0] + self.false_negatives[0]
    negatives = self.false_positives[0] + self.true_negatives[0]
    defined = tf.logical_and(positives > 0, negatives > 0)
    return tf.where(defined, super().result(), float('nan'))


def model_fn_for(hidden_units: int = HIDDEN_UNITS):
  """No-arg model builder: 84x84x3 -> Dense(hidden, relu) -> Dense(1, sigmoid)."""

  def keras_model():
    return tf.keras.Sequential([
        tf.keras.layers.InputLayer(input_shape=data.IMAGE_SHAPE),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(hidden_units, activation='relu'),
        tf.keras.layers.Dense(1, activation='sigmoid'),
    ])

  return models.KerasModelFn(
      keras_model, loss=tf.keras.losses.BinaryCrossentropy(),
      input_spec=input_spec(),
      metrics=[functools.partial(AUC, name='auc'),
               functools.partial(tf.keras.metrics.BinaryAccuracy,
                                 name='accuracy')])


def create_celeba_task(
    cache_dir: Optional[str] = None,
    *,
    batch_size: int = 20,
    eval_batch_size: int = 100,
    hidden_units: int = HIDDEN_UNITS,
    download: bool = True,
) -> tuple[Task, Callable[[], tf.data.Dataset]]:
  """The task (smiling faces on composite clients) and its central data.

  Args:
    cache_dir: TFF's cache directory holding `celeba.sqlite`.
    batch_size: Client batch size |B_i|.
    eval_batch_size: Evaluation batch size.
    hidden_units: Width of the hidden layer (64 in the paper).
    download: Fetch the database if it is missing.

  Returns:
    `(task, central_examples_fn)`: `central_examples_fn()` streams the
    non-smiling faces of every training client, unbatched (mixed FL batches
    them with its own central batch size).

  Raises:
    data.DataUnavailableError: If the database is missing (one line).
  """
  train, test = data.load_raw(cache_dir, download=download)

  def train_dataset_fn(composite_id):
    return (data.composite_dataset(train, composite_id)
            .filter(data.is_smiling).map(data.to_model_input)
            .batch(batch_size))

  def eval_dataset_fn():
    examples = test.create_tf_dataset_from_all_clients()
    prepare = lambda d: d.map(data.to_model_input).batch(eval_batch_size)
    return collections.OrderedDict(
        all=prepare(examples),
        smiling=prepare(examples.filter(data.is_smiling)),
        not_smiling=prepare(examples.filter(data.is_not_smiling)))

  def central_examples_fn():
    return (train.create_tf_dataset_from_all_clients()
            .filter(data.is_not_smiling).map(data.to_model_input))

  task = Task(
      name='celeba',
      model_fn=model_fn_for(hidden_units),
      train_client_ids=data.composite_client_ids(train.client_ids),
      train_dataset_fn=train_dataset_fn,
      eval_dataset_fn=eval_dataset_fn,
      train_batch_size=batch_size,
  )
  return task, central_examples_fn


def central_batch_size_for(algorithm_name: str) -> int:
  """Seed 004 App. C.2's |B_c| for CelebA: 1000 for 1-way GT, 500 else."""
  return 1000 if algorithm_name == 'one_way_gradient_transfer' else 500


def build(algorithm, run, *, cache_dir: Optional[str] = None,
          download: bool = True, batch_size: int = 5,
          hidden_units: int = HIDDEN_UNITS,
          central_batch_size: Optional[int] = None,
          central_shuffle_buffer: int = 1000) -> built_task.BuiltTask:
  """The CelebA task of a run (`tasks.common.task_registry`) and its
  central data: the non-smiling faces shuffled from the run's seed, in
  batches of `central_batch_size` (default the paper's for the
  algorithm, `central_batch_size_for`)."""
  task, central_examples_fn = create_celeba_task(
      cache_dir, batch_size=batch_size, hidden_units=hidden_units,
      download=download)
  return built_task.with_central_examples(
      task, central_examples_fn, shuffle_buffer=central_shuffle_buffer,
      batch_size=central_batch_size or central_batch_size_for(
          algorithm.algorithm), seed=run.seed)


def _central_batch_size(values: dict, given: frozenset) -> None:
  """--central_batch_size's default is the paper's for --algorithm."""
  del given
  if values['central_batch_size'] is None:
    values['central_batch_size'] = central_batch_size_for(values['algorithm'])


def _define_flags(table: flag_table.Table) -> None:
  """The binary's own flags (the task's arguments), in `table`."""
  table.define(flag_table.STRING, 'cache_dir', None,
               'Directory of celeba.sqlite (TFF cache; default ~/.tff).')
  table.define(flag_table.BOOL, 'download', True,
               'Download the data if it is missing.')
  task_runs.define_batch_flags(table, 5)
  table.define(flag_table.INTEGER, 'hidden_units', HIDDEN_UNITS,
               'Hidden layer width.', lower_bound=1)
  table.define(flag_table.INTEGER, 'central_batch_size', None,
               'Central batch size |B_c| (default: 1000 for 1-way GT, '
               '500 for PT and 2-way GT).', lower_bound=1)
  table.define(flag_table.INTEGER, 'central_shuffle_buffer', 1000,
               'Shuffle buffer of the central examples (stored by '
               'client).', lower_bound=1)


# The binary's defaults (`tasks.common.task_runs`): the paper's, App. C.2.
RUNS = task_runs.Runs(
    define_flags=_define_flags,
    preset_help='cpu_small: flags you did not set become a small run; paper: '
                'the flags\' defaults are the paper\'s.',
    training_defaults=dict(rounds=1000, clients_per_round=100,
                           num_local_steps=2, client_learning_rate=0.01),
    presets={
        'paper': {},  # The flags' defaults are the paper's.
        'cpu_small': dict(rounds=5, clients_per_round=4,
                          central_batch_size=20, central_shuffle_buffer=100,
                          eval_every=1, checkpoint_every=5),
    },
    preset_durations={
        'paper': 'at least 15 minutes for 1,000 rounds of 100 clients (the '
                 'model\'s work is about 0.9 s a round; TFF\'s per-client '
                 'overhead and reading the database come on top; '
                 'docs/mixed_fl.md)'},
    rules=_central_batch_size)
