"""Handwritten digits (scikit-learn's bundled copy of UCI optdigits) as clients.

1,797 8x8 images, 10 classes, shipped inside scikit-learn, so the task needs no
download. A stratified 20% goes to evaluation; the rest is split over clients
non-IID: for each label, its examples are divided among the clients in
proportions drawn from Dirichlet(alpha) (small alpha: each client sees few
labels). Everything is a deterministic function of `seed`.
"""

import collections
from collections.abc import Sequence
import dataclasses
import functools
from typing import Optional

import numpy as np
from sklearn import datasets as sk_datasets
from sklearn import model_selection
import tensorflow as tf

from tasks.common import flag_table
from tasks.common import task_runs
from tasks.common.built_task import BuiltTask
from tff_mixed import models
from tff_mixed.task import Task

NUM_CLASSES = 10
NUM_FEATURES = 64
EVAL_FRACTION = 0.2


def load_digits(seed: int = 0):
  """Returns `(x_train, y_train, x_eval, y_eval)`, pixels scaled to [0, 1]."""
  digits = sk_datasets.load_digits()
  x = (digits.data / 16.0).astype(np.float32)
  y = digits.target.astype(np.int32)
  x_train, x_eval, y_train, y_eval = model_selection.train_test_split(
      x, y, test_size=EVAL_FRACTION, stratify=y, random_state=seed
  )
  return x_train, y_train, x_eval, y_eval


def dirichlet_partition(
    labels: np.ndarray,
    num_clients: int,
    alpha: float,
    rng: np.random.Generator,
) -> list[np.ndarray]:
  """Splits example indices over clients, label by label, Dirichlet(alpha)."""
  if num_clients < 1:
    raise ValueError(f'num_clients must be >= 1, got {num_clients}.')
  if alpha <= 0:
    raise ValueError(f'dirichlet_alpha must be > 0, got {alpha}.')
  parts = [[] for _ in range(num_clients)]
  for label in np.unique(labels):
    indices = rng.permutation(np.flatnonzero(labels == label))
    proportions = rng.dirichlet(np.full(num_clients, alpha))
    cuts = (np.cumsum(proportions)[:-1] * len(indices)).astype(int)
    for client, chunk in enumerate(np.split(indices, cuts)):
      parts[client].extend(chunk.tolist())
  return [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]


def create_model(hidden_units: int = 32) -> tf.keras.Model:
  return tf.keras.Sequential([
      tf.keras.layers.InputLayer(input_shape=(NUM_FEATURES,)),
      tf.keras.layers.Dense(hidden_units, activation='relu'),
      tf.keras.layers.Dense(NUM_CLASSES),
  ])


def flops_per_example(hidden_units: int = 32) -> float:
  """Forward plus backward FLOPs of one example of the dense classifier.

  2 FLOPs per multiply-accumulate of the two dense layers, and the backward
  pass twice the forward (the usual 3x of seed 003 §B.6). Seed 003 counts
  Thop's multiply-accumulates, half of this.
  """
  macs = NUM_FEATURES * hidden_units + hidden_units * NUM_CLASSES
  return 3.0 * 2.0 * macs


def input_spec():
  return collections.OrderedDict(
      x=tf.TensorSpec([None, NUM_FEATURES], tf.float32),
      y=tf.TensorSpec([None], tf.int32),
  )


def model_fn_for(hidden_units: int = 32) -> models.KerasModelFn:
  """A no-arg `model_fn` for the dense classifier (whose client groups
  train at once: `tff_mixed.models.KerasModelFn`)."""
  return models.KerasModelFn(
      functools.partial(create_model, hidden_units),
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      input_spec=input_spec(),
      metrics=[functools.partial(tf.keras.metrics.SparseCategoricalAccuracy,
                                 name='accuracy')])


def _dataset(x, y, batch_size):
  return tf.data.Dataset.from_tensor_slices(
      collections.OrderedDict(x=x, y=y)
  ).batch(batch_size)


def validation_split(parts: Sequence[np.ndarray], fraction: float,
                     seed: int) -> tuple[list[np.ndarray], np.ndarray]:
  """Holds out floor(fraction * n_i) of each client's example indices, drawn
  with `seed`: (the clients' remaining indices, the held-out ones pooled)."""
  rng = np.random.default_rng([seed, 1])  # A stream apart from the split's.
  kept, held = [], []
  for idx in parts:
    order = rng.permutation(np.asarray(idx))
    count = int(fraction * len(order))
    held.append(np.sort(order[:count]))
    kept.append(np.sort(order[count:]))
  return kept, np.concatenate(held).astype(np.int64) if held else np.zeros(
      0, np.int64)


def create_central_dataset_fn(
    client_labels: Sequence[int], *, batch_size: int = 10, seed: int = 0
):
  """The datacentre's data for label skew: training examples of the labels
  the clients do not hold (seed 004 §5.1's setting, on digits), reshuffled
  from `seed` at every pass (mixed FL reads it as one stream over the
  rounds, so a resumed run reads the batches an uninterrupted one does)."""
  x_train, y_train, _, _ = load_digits(seed)
  keep = ~np.isin(y_train, np.asarray(client_labels))
  if not keep.any():
    raise ValueError('client_labels covers every label: no central data left.')
  x, y = x_train[keep], y_train[keep]
  return lambda: tf.data.Dataset.from_tensor_slices(
      collections.OrderedDict(x=x, y=y)).shuffle(
          len(x), seed=seed, reshuffle_each_iteration=True).batch(batch_size)


def label_group_eval_fn(client_labels: Sequence[int], seed: int = 0):
  """The evaluation data by label group for label skew: `all`, `clients`
  (the labels the clients hold) and `central` (the others), logged as
  `eval/<group>/<metric>`."""
  _, _, x_eval, y_eval = load_digits(seed)
  held = np.isin(y_eval, np.asarray(client_labels))
  return lambda: collections.OrderedDict(
      all=_dataset(x_eval, y_eval, 256),
      clients=_dataset(x_eval[held], y_eval[held], 256),
      central=_dataset(x_eval[~held], y_eval[~held], 256))


def create_digits_task(
    *,
    num_clients: int = 100,
    dirichlet_alpha: float = 0.5,
    batch_size: int = 10,
    hidden_units: int = 32,
    seed: int = 0,
    client_labels: Optional[Sequence[int]] = None,
    validation_fraction: float = 0.0,
) -> Task:
  """The digits task.

  Args:
    num_clients: Number of training clients.
    dirichlet_alpha: Concentration of the per-label Dirichlet split.
    batch_size: Client batch size.
    hidden_units: Width of the hidden layer.
    seed: Seeds the evaluation split and the client partition.
    client_labels: If given, clients hold only these labels (label skew).
    validation_fraction: Each client's examples held out for the validation
      split (`Task.validation_dataset_fn`): floor(fraction * n_i) of client
      i's, chosen with `seed`; the clients train on the rest.
  """
  if batch_size < 1:
    raise ValueError(f'batch_size must be >= 1, got {batch_size}.')
  if not 0.0 <= validation_fraction < 1.0:
    raise ValueError(f'validation_fraction must be in [0, 1), got '
                     f'{validation_fraction}.')
  x_train, y_train, x_eval, y_eval = load_digits(seed)
  if client_labels is not None:
    keep = np.isin(y_train, np.asarray(client_labels))
    x_train, y_train = x_train[keep], y_train[keep]
  rng = np.random.default_rng(seed)
  parts = dirichlet_partition(y_train, num_clients, dirichlet_alpha, rng)
  parts, held_out = validation_split(parts, validation_fraction, seed)
  ids = [f'client_{i:04d}' for i in range(num_clients)]
  by_id = dict(zip(ids, parts))
  validation_fn = None
  if len(held_out):
    validation_fn = lambda: _dataset(x_train[held_out], y_train[held_out], 256)

  def train_arrays_fn(cid):
    idx = by_id[cid]
    return collections.OrderedDict(x=x_train[idx], y=y_train[idx])

  def train_dataset_fn(cid):
    return tf.data.Dataset.from_tensor_slices(train_arrays_fn(cid)).batch(
        batch_size)

  return Task(
      name='digits',
      model_fn=model_fn_for(hidden_units),
      train_client_ids=ids,
      train_dataset_fn=train_dataset_fn,
      eval_dataset_fn=lambda: _dataset(x_eval, y_eval, 256),
      validation_dataset_fn=validation_fn,
      train_batch_size=batch_size,
      train_arrays_fn=train_arrays_fn,
      flops_per_example=flops_per_example(hidden_units),
  )


def build(algorithm, run, *, num_clients: int = 100,
          dirichlet_alpha: float = 0.5, batch_size: int = 10,
          hidden_units: int = 32, client_labels: Sequence = (),
          central_batch_size: int = 10,
          validation_fraction: float = 0.0) -> BuiltTask:
  """The digits task of a run (`tasks.common.task_registry`): as
  `create_digits_task` from the run's seed; with `client_labels` (digits,
  as ints or strings), label skew: the central data holds the other labels
  (batches of `central_batch_size`) and evaluation is by label group."""
  del algorithm  # The same task for every algorithm.
  labels = skewed_labels(client_labels) or None
  task = create_digits_task(
      num_clients=num_clients, dirichlet_alpha=dirichlet_alpha,
      batch_size=batch_size, hidden_units=hidden_units, seed=run.seed,
      client_labels=labels, validation_fraction=validation_fraction)
  if not labels:
    return BuiltTask(task)
  # Accuracy on all labels and on each side of the skew.
  return BuiltTask(
      dataclasses.replace(task, eval_dataset_fn=label_group_eval_fn(
          labels, run.seed)),
      central_data_fn=create_central_dataset_fn(
          labels, batch_size=central_batch_size, seed=run.seed))


def skewed_labels(client_labels: Sequence) -> list[int]:
  """`--client_labels` (digits as ints or strings) as ints.

  Raises:
    ValueError: For labels that are not distinct digits 0-9, or all ten.
  """
  digits = [str(x) for x in client_labels]
  if not (all(len(x) == 1 and x in '0123456789' for x in digits)
          and len(set(digits)) == len(digits) < 10):
    raise ValueError('--client_labels must be distinct digits 0-9, not all '
                     f'ten; got {",".join(digits)}.')
  return [int(x) for x in digits]


def _check_cohort(values: dict, given: frozenset) -> None:
  """The binary's rules: a label skew of distinct digits, not all ten; a
  cohort no larger than the clients."""
  del given
  skewed_labels(values['client_labels'])
  if values['clients_per_round'] > values['num_clients']:
    raise ValueError('--clients_per_round must not exceed --num_clients.')


def _define_flags(table: flag_table.Table) -> None:
  """The binary's own flags (the task's arguments), in `table`."""
  table.define(flag_table.LIST, 'client_labels', [],
               'Label skew: clients hold only these digits (e.g. '
               '0,1,2,3,4) and the central data the rest (reshuffled '
               'every pass from --seed); evaluated as eval/all/..., '
               'eval/clients/... and eval/central/... . Empty: clients '
               'hold all.')
  table.define(flag_table.INTEGER, 'central_batch_size', 10,
               'Central batch size |B_c|.', lower_bound=1)
  table.define(flag_table.INTEGER, 'num_clients', 100,
               'Number of training clients.', lower_bound=1)
  table.define(flag_table.FLOAT, 'dirichlet_alpha', 0.5,
               'Dirichlet concentration of the label split (small: '
               'more non-IID).', lower_bound=1e-6)
  task_runs.define_batch_flags(table, 10, batch_help='Client batch size.',
                               synthetic_data=False)
  table.define(flag_table.INTEGER, 'hidden_units', 32, 'Hidden layer width.',
               lower_bound=1)
  table.define(flag_table.FLOAT, 'validation_fraction', 0.0,
               "Each client's examples held out as the validation "
               'split (validation/<metric> columns; '
               '--k_monitor=validation/loss); the test data stays for '
               'eval/<metric>.', lower_bound=0.0, upper_bound=0.9)


# The binary's defaults (`tasks.common.task_runs`).
RUNS = task_runs.Runs(
    define_flags=_define_flags,
    training_defaults=dict(rounds=50, clients_per_round=10,
                           num_local_steps=10, client_learning_rate=0.1),
    rules=_check_cohort)
