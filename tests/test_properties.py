"""Properties a mutation trial showed the rest of the suite does not pin.

* Fast mode's vectorised path weights clients by |D_i| under
  `DATASET_SIZE` (not by the examples its K steps processed).
* `Task.cohort_ids` draws each round's cohort from (seed, round).
* `aggregators.gaussian_fixed` draws round t's noise from (seed, t): its
  round counter advances every round.
* The driver checkpoints the last round even when `rounds` is not a
  multiple of `checkpoint_every`.

Each expectation is exact (hand-computed on the tiny linear problem of
`tests/linear.py`, or a documented seed) up to float32 rounding.
"""

import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tasks.quadratic import task as quadratic_task
from tests import linear
from tests import runs
from tff_mixed import aggregators
from tff_mixed import algorithms
from tff_mixed import driver
from tff_mixed import group_data
from tff_mixed import templates
from tff_mixed.task import Task
from tff_mixed.templates import client_groups
from tff_mixed.templates import vectorisable

SGD = tff.learning.optimizers.build_sgdm
GAMMA = 0.1
W0, B0 = np.array([0.5, -0.25]), 0.1


def _rows(client):
  x, y = client
  return [([xi], [yi]) for xi, yi in zip(x, y)]


def _unpack(process, state):
  return linear.unpack(process.get_model_weights(state))


# --------------------------------- 1. |D_i| weighting in vectorised groups
# Batch 1, K = 2: every client processes 2 examples (C's one example is
# cycled), but A holds 3, B 2 and C 1.
CLIENT_C = ([[0.5, -1.0]], [3.0])
DATASET_SIZE_COHORT = (linear.CLIENT_A, linear.CLIENT_B, CLIENT_C)


@pytest.fixture(scope='module')
def vectorised_dataset_size_fed_avg():
  assert vectorisable.not_vectorisable(linear.keras_model_fn) is None
  return algorithms.build_fed_avg(
      linear.keras_model_fn, SGD(GAMMA), num_local_steps=2,
      client_weighting=templates.DATASET_SIZE,
      client_groups=client_groups.ClientGroups())


@pytest.mark.parametrize('num_groups', [1, 2])
def test_vectorised_groups_weight_clients_by_dataset_size(
    vectorised_dataset_size_fed_avg, num_groups):
  """Property: in fast mode's vectorised path, `DATASET_SIZE` weights each
  client by |D_i| (3, 2, 1), not by the examples processed in its K steps
  (2, 2, 2): the new model is the |D_i|-weighted mean of the clients' NumPy
  SGD end points, whether the clients share a group or not."""
  process = vectorised_dataset_size_fed_avg
  assert client_groups.takes_groups(process)
  cohort = [linear.dataset(*c, batch_size=1) for c in DATASET_SIZE_COHORT]
  state = process.set_model_weights(process.initialize(),
                                    linear.weights(W0, B0))
  state = process.next(
      state, group_data.group_datasets(cohort, num_groups)).state
  ends = [linear.sgd(W0, B0, _rows(c), 2, GAMMA) for c in DATASET_SIZE_COHORT]
  p = np.array([3.0, 2.0, 1.0]) / 6.0
  got_w, got_b = _unpack(process, state)
  np.testing.assert_allclose(got_w, sum(pi * e[0] for pi, e in zip(p, ends)),
                             rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(got_b, sum(pi * e[1] for pi, e in zip(p, ends)),
                             rtol=1e-5, atol=1e-7)


# --------------------------------------------- 2. cohorts by (seed, round)
def _id_task(num_clients=20, sampler=None):
  """Client i's one example is x = [i, 0] (so a dataset names its client)."""
  ids = [f'c{i}' for i in range(num_clients)]
  return Task(
      name='ids', model_fn=linear.model_fn, train_client_ids=ids,
      train_dataset_fn=lambda cid: linear.dataset([[float(cid[1:]), 0.0]],
                                                  [0.0]),
      client_sampler=sampler, client_shuffle='none')


def _dataset_ids(datasets):
  return [f'c{int(b["x"][0, 0])}' for d in datasets
          for b in d.as_numpy_iterator()]


def test_each_round_draws_its_own_reproducible_cohort():
  """Property: round r's cohort of run `seed` is drawn by
  `np.random.default_rng([seed, r])` (`Task.cohort_ids`): it changes from
  round to round, is the same for the same (seed, round) in any task
  object, changes with the seed, and is what `cohort` and `cohort_groups`
  (the driver's data) hold; a task's own sampler gets the same rng."""
  task, again = _id_task(), _id_task()
  seed, n, rounds = 3, 5, range(1, 7)
  cohorts = [task.cohort_ids(seed, r, n) for r in rounds]
  # Six rounds, six different cohorts (as sets), well beyond 5 clients.
  assert len({frozenset(ids) for ids in cohorts}) == len(cohorts), (
      f'the same cohort in several rounds: {cohorts}')
  assert len(set().union(*cohorts)) > 2 * n
  for r, ids in zip(rounds, cohorts):
    expected = np.random.default_rng([seed, r]).choice(20, n, replace=False)
    assert ids == [f'c{i}' for i in expected]
    assert again.cohort_ids(seed, r, n) == ids
    assert len(set(ids)) == n
  assert task.cohort_ids(seed + 1, 1, n) != cohorts[0]
  # What the rounds train on.
  assert _dataset_ids(task.cohort(seed, 2, n)) == cohorts[1]
  groups = task.cohort_groups(seed, 4, n, 2)
  examples = np.concatenate([group_data.group_contents(g)[
      group_data.EXAMPLES]['x'][:, 0] for g in groups])
  assert [f'c{int(i)}' for i in examples] == cohorts[3]
  # A custom sampler is handed the (seed, round) rng.
  seen = []

  def sampler(rng, num):
    seen.append(int(rng.integers(2**31)))
    return [f'c{i}' for i in range(num)]

  custom = _id_task(sampler=sampler)
  custom.cohort_ids(seed, 1, 2)
  custom.cohort_ids(seed, 2, 2)
  assert seen == [int(np.random.default_rng([seed, r]).integers(2**31))
                  for r in (1, 2)]
  # The quadratic task's own sampler: other clients every round.
  quadratic = quadratic_task.create_quadratic_task(num_eval_points=None)
  draws = [quadratic.cohort_ids(seed, r, 4) for r in rounds]
  assert len({tuple(d) for d in draws}) == len(draws)
  assert draws[0] == quadratic.cohort_ids(seed, 1, 4)


# ------------------------------------------ 3. DP noise from (seed, round)
DP_CLIP, DP_CLIENTS, DP_Z, DP_SEED = 0.05, 2, 2.0, 7


def _dp_fed_avg(noise_multiplier):
  return algorithms.build_fed_avg(
      linear.model_fn, SGD(GAMMA), num_local_steps=3,
      model_aggregator=aggregators.gaussian_fixed(
          noise_multiplier, DP_CLIENTS, DP_CLIP, seed=DP_SEED))


@pytest.fixture(scope='module')
def dp_pair():
  return _dp_fed_avg(DP_Z), _dp_fed_avg(0.0)


def _trainable(process, state):
  return [np.asarray(t, np.float64)
          for t in process.get_model_weights(state).trainable]


def test_dp_noise_is_drawn_from_seed_and_round_every_round(dp_pair):
  """Property: `gaussian_fixed`'s round counter advances, so round t's
  noise is `stateless_normal(seed=[seed, (t - 1) * L + i])` for the model's
  i-th of L tensors, times -z C / n (server SGD at rate 1): two rounds, two
  different draws, each the one its (seed, round) gives. The noise-free
  twin, started each round from the same model, isolates the noise."""
  noisy, free = dp_pair
  cohort = [linear.dataset(*linear.CLIENT_A, batch_size=2),
            linear.dataset(*linear.CLIENT_B)]
  state = noisy.set_model_weights(noisy.initialize(), linear.weights(W0, B0))
  free_state = free.initialize()
  noises = []
  for round_index in range(2):
    weights = noisy.get_model_weights(state)
    free_state = free.next(free.set_model_weights(free_state, weights),
                           cohort).state
    state = noisy.next(state, cohort).state
    noise = [a - b for a, b in zip(_trainable(noisy, state),
                                   _trainable(free, free_state))]
    for i, part in enumerate(noise):
      draw = tf.random.stateless_normal(
          part.shape, seed=[DP_SEED, round_index * len(noise) + i],
          dtype=tf.float32).numpy()
      np.testing.assert_allclose(
          part, -DP_Z * DP_CLIP * draw / DP_CLIENTS, rtol=1e-4, atol=1e-6,
          err_msg=f'the noise of round {round_index + 1}, tensor {i}')
    noises.append(noise)
  for first, second in zip(*noises):
    assert np.max(np.abs(first - second)) > 1e-3


# ------------------------------------------- 4. the last round checkpointed
@pytest.fixture(scope='module')
def quadratic():
  task = quadratic_task.create_quadratic_task(num_eval_points=50)
  process = algorithms.build_fed_avg(
      task.model_fn, SGD(0.1), SGD(0.5, momentum=0.9), num_local_steps=3)
  return task, process


def test_the_last_round_is_checkpointed_off_the_period(quadratic, tmp_path,
                                                       capsys):
  """Property: with rounds=5 and checkpoint_every=2 the run checkpoints
  rounds 2, 4 and 5 (the last, off the period), so calling it again with
  rounds=5 resumes from round 5 and trains nothing."""
  task, process = quadratic
  out = str(tmp_path / 'run')

  def run():
    return runs.experiment(task, process, out, rounds=5, clients_per_round=3,
                           seed=7, eval_every=0, checkpoint_every=2)

  first = run()
  assert sorted(os.listdir(os.path.join(out, driver.CHECKPOINT_DIR))) == [
      'round_2', 'round_4', 'round_5']
  capsys.readouterr()
  again = run()
  assert (f'{out}: already complete (5 rounds); nothing to train.'
          in capsys.readouterr().err)
  assert first.resumed_from == 0 and again.resumed_from == 5
  assert [r['round'] for r in again.history] == [1, 2, 3, 4, 5]
  np.testing.assert_array_equal(
      process.get_model_weights(first.state).trainable,
      process.get_model_weights(again.state).trainable)
