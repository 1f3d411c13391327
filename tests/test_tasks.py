"""The embedded tasks: seed 000's quadratic problem and the digits split."""

import collections
import dataclasses
import math

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tasks.digits import task as digits_task
from tasks.quadratic import task as quadratic_task
from tff_mixed import algorithms
from tff_mixed import group_data
from tff_mixed.task import Task


def test_true_minimiser_matches_the_paper_and_the_integral():
  x_star = quadratic_task.true_minimiser()
  assert x_star == pytest.approx(0.523, abs=5e-4)  # Seed 000 §3.
  # f'(x*) = E_p[z x* - 1] = 0.
  assert quadratic_task._expect(lambda z: z * x_star - 1.0) == pytest.approx(0.0, abs=1e-12)


def test_surrogate_minimiser_is_true_at_k1_and_moves_away_with_k():
  x_star = quadratic_task.true_minimiser()
  assert quadratic_task.surrogate_minimiser(0.1, 1) == pytest.approx(x_star, rel=1e-12)
  gaps = [abs(quadratic_task.surrogate_minimiser(0.1, k) - x_star) for k in (1, 3, 10)]
  assert gaps[0] < gaps[1] < gaps[2]
  # Hand check at K = 2: phi(z) = 2 gamma z - gamma^2 z^2.
  g = 0.1
  num = quadratic_task._expect(lambda z: 2 * g - g * g * z)
  den = quadratic_task._expect(lambda z: 2 * g * z - g * g * z * z)
  assert quadratic_task.surrogate_minimiser(g, 2) == pytest.approx(num / den, rel=1e-12)


def test_sampler_draws_from_z_to_the_minus_half():
  z = quadratic_task.sample_z(np.random.default_rng(0), 200_000)
  assert z.min() >= 1.0 and z.max() <= 3.0
  # E_p[z] = (2/3)(3^1.5 - 1) / (2 (sqrt3 - 1)).
  mean = (2 / 3) * (3**1.5 - 1) / (2 * (math.sqrt(3) - 1))
  assert z.mean() == pytest.approx(mean, abs=5e-3)


def test_quadratic_fixed_point_is_the_surrogate_minimiser():
  """FedAvg started at x*(gamma, K) stays there in expectation: one round
  with the whole (quantile-discretised) population moves it by ~0."""
  g, k = 0.1, 10
  task = quadratic_task.create_quadratic_task(
      initial_x=quadratic_task.surrogate_minimiser(g, k), num_eval_points=None
  )
  process = algorithms.build_fed_avg(
      task.model_fn, tff.learning.optimizers.build_sgdm(g), num_local_steps=k
  )
  state = process.initialize()
  x0 = float(process.get_model_weights(state).trainable[0])
  zs = quadratic_task.z_quantiles(200)
  state = process.next(
      state, [task.train_dataset_fn(quadratic_task.client_id(z)) for z in zs]
  ).state
  x1 = float(process.get_model_weights(state).trainable[0])
  assert abs(x1 - x0) < 1e-5
  # ...whereas the true minimiser is not a fixed point for K = 10.
  assert abs(x0 - quadratic_task.true_minimiser()) > 0.02


def test_dirichlet_partition_is_a_partition():
  labels = np.repeat(np.arange(10), 30)
  parts = digits_task.dirichlet_partition(labels, 7, 0.3, np.random.default_rng(1))
  assert len(parts) == 7
  merged = np.sort(np.concatenate(parts))
  np.testing.assert_array_equal(merged, np.arange(300))


def test_small_alpha_gives_fewer_labels_per_client():
  labels = np.repeat(np.arange(10), 100)
  def labels_per_client(alpha):
    parts = digits_task.dirichlet_partition(labels, 20, alpha, np.random.default_rng(0))
    return np.mean([len(np.unique(labels[p])) for p in parts if len(p)])
  assert labels_per_client(0.05) < labels_per_client(100.0)
  assert labels_per_client(100.0) == 10


def test_digits_task_shapes_and_label_skew():
  task = digits_task.create_digits_task(num_clients=20, seed=3, client_labels=[0, 1, 2])
  total = 0
  for cid in task.train_client_ids:
    for batch in task.train_dataset_fn(cid):
      assert batch['x'].shape[1] == 64
      assert set(batch['y'].numpy()) <= {0, 1, 2}
      total += batch['x'].shape[0]
  x_train, y_train, x_eval, y_eval = digits_task.load_digits(3)
  assert total == np.isin(y_train, [0, 1, 2]).sum()
  assert len(x_train) + len(x_eval) == 1797
  eval_labels = np.concatenate([b['y'].numpy() for b in task.eval_dataset_fn()])
  assert set(eval_labels) == set(range(10))  # Evaluation covers all labels.


def test_task_rejects_data_the_model_cannot_consume():
  def bad_dataset(cid):
    del cid
    return tf.data.Dataset.from_tensors(
        collections.OrderedDict(x=tf.zeros([1, 63]), y=tf.zeros([1], tf.int32))
    )
  with pytest.raises(ValueError, match="does not match the model's input spec"):
    Task(name='bad', model_fn=digits_task.model_fn_for(8),
         train_client_ids=['a'], train_dataset_fn=bad_dataset)


def test_uniform_sampling_is_seeded_and_without_replacement():
  task = digits_task.create_digits_task(num_clients=30)
  a = task.sample_clients(np.random.default_rng([0, 5]), 10)
  b = task.sample_clients(np.random.default_rng([0, 5]), 10)
  assert a == b and len(set(a)) == 10
  with pytest.raises(ValueError, match='clients_per_round=31'):
    task.sample_clients(np.random.default_rng(0), 31)


def _elements(dataset):
  return [tf.nest.map_structure(lambda t: t.numpy(), e) for e in dataset]


@pytest.mark.parametrize('arrays', [True, False])
def test_a_named_cohort_reads_as_the_cohort_and_its_groups(arrays):
  """`Task.named_cohort` (what Ray's actors build data from, each item on
  its own) read item by item: each sampled client's `client_dataset`, and
  with groups the groups of the whole cohort (`group_data`), element for
  element, for a task with client arrays and one with datasets only."""
  task = digits_task.create_digits_task(num_clients=20, seed=3)
  if not arrays:
    task = dataclasses.replace(task, train_arrays_fn=None)
  ids = task.cohort_ids(7, 2, 5)
  named = task.named_cohort(7, 2, 5)
  assert named.members == tuple((cid,) for cid in ids)
  for x, cid in zip(named, ids):
    np.testing.assert_equal(_elements(x),
                            _elements(task.client_dataset(cid, 7, 2)))
  grouped = task.named_cohort(7, 2, 5, 2)
  assert grouped.members == (tuple(ids[:3]), tuple(ids[3:]))
  if arrays:
    groups = group_data.group_arrays(
        [task.client_arrays(c, 7, 2) for c in ids], task.train_batch_size, 2)
  else:
    groups = group_data.group_datasets(
        [task.client_dataset(c, 7, 2) for c in ids], 2)
  assert len(grouped[:]) == len(groups) == 2
  for x, y in zip(grouped, groups):
    np.testing.assert_equal(_elements(x), _elements(y))
