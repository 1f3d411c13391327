"""Seed 004 §5's oracle: centralised SGD on the pooled data."""


import numpy as np
import pytest

from tasks.common import oracle
from tasks.common import registry
from tests import linear
from tff_mixed.task import Task

CENTRAL = ([[0.5, 0.5], [2.0, -1.0], [1.0, 3.0], [0.0, 0.0]], [1.0, 0.0, 4.0, 0.5])


def _task():
  clients = {'a': linear.CLIENT_A, 'b': linear.CLIENT_B}
  return Task(name='linear', model_fn=linear.model_fn,
              train_client_ids=list(clients),
              train_dataset_fn=lambda c: linear.dataset(*clients[c], batch_size=2),
              train_batch_size=2)


def _central():
  return linear.dataset(*CENTRAL, batch_size=3)


def test_pooled_task_holds_every_example_once_in_cohort_sized_batches():
  pooled = oracle.pooled_task(_task(), _central, clients_per_round=2)
  assert pooled.train_client_ids == ['pooled:0']
  cohort = pooled.sample_clients(np.random.default_rng(0), 1)
  batches = list(pooled.train_dataset_fn(cohort[0]).as_numpy_iterator())
  # B = 2 (the largest client batch), so batches of 2 x 2 = 4 examples.
  assert [len(b['y']) for b in batches] == [4, 4, 1]
  got = sorted(map(tuple, np.concatenate(
      [np.column_stack([b['x'], b['y']]) for b in batches])))
  rows = [(*x, y) for x, y in zip(*[np.concatenate(v) for v in zip(
      linear.CLIENT_A, linear.CLIENT_B, CENTRAL)])]
  assert got == sorted(tuple(np.float32(v) for v in r) for r in rows)
  again = list(pooled.train_dataset_fn(cohort[0]).as_numpy_iterator())
  np.testing.assert_array_equal(batches[0]['x'], again[0]['x'])


def test_oracle_is_centralised_sgd_on_the_pooled_batches():
  """One round of `--algorithm=oracle` = K SGD steps on the pooled batches
  (cycled), at the client learning rate, applied as they are."""
  k, lr = 5, 0.05
  pooled = oracle.pooled_task(_task(), _central, clients_per_round=2)
  config = registry.AlgorithmConfig(
      algorithm='oracle', num_local_steps=k,
      client=registry.OptimizerSpec(learning_rate=lr))
  process = registry.build_process(config, linear.model_fn)
  w0, b0 = np.array([0.3, -0.2]), 0.1
  state = process.set_model_weights(process.initialize(),
                                    linear.weights(w0, b0))
  dataset = pooled.train_dataset_fn('pooled:11')
  state = process.next(state, [dataset]).state
  batches = [(b['x'], b['y']) for b in dataset.as_numpy_iterator()]
  want_w, want_b = linear.sgd(w0, b0, batches, k, lr)
  got_w, got_b = linear.unpack(process.get_model_weights(state))
  np.testing.assert_allclose(got_w, want_w, rtol=1e-5)
  np.testing.assert_allclose(got_b, want_b, rtol=1e-5)


def test_nothing_to_pool_is_an_error():
  empty = Task(name='empty', model_fn=linear.model_fn, train_client_ids=['a'],
               train_dataset_fn=lambda c: linear.dataset(*linear.CLIENT_A).take(0),
               client_shuffle='none')
  with pytest.raises(ValueError, match='no training examples to pool'):
    oracle.pooled_task(empty, None, 1)


def test_the_oracle_s_dp_epsilon_is_of_the_task_s_clients():
  """DP's epsilon columns count the task's clients (10 of 100 a round), not
  the oracle's one pooled client (a sampling rate of 10 / 1 has no
  epsilon): the columns a grid checks and the run writes."""
  from tasks.common import run as run_lib  # pylint: disable=g-import-not-at-top
  from tasks.common import task_registry  # pylint: disable=g-import-not-at-top
  from tff_mixed import aggregators  # pylint: disable=g-import-not-at-top
  spec = task_registry.spec('digits', algorithm='oracle', aggregator='dp',
                            clip=1.0, noise_multiplier=1.0, client_groups=0,
                            rounds=2, progress=False)
  _, _, round_columns = run_lib._built(spec)  # pylint: disable=protected-access
  assert round_columns(2) == aggregators.epsilon_columns(1.0, 10 / 100,
                                                         1 / 100)(2)
  assert 'dp/epsilon' in run_lib.columns(spec)
