"""Per-round client shuffling (`Task.client_shuffle`, issue 27).

Every round each sampled client's examples are reshuffled from (run seed,
round, client id) and batched again; the processes train on that order.
Faithful mode = fast mode = two workers under shuffling is in
`test_client_groups.py` (its cohorts are reshuffled), and resume after a
kill is exact in `test_driver.py` and `test_run_faults.py` (their digits
tasks shuffle by default).
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tasks.common import run_spec
from tasks.common import training_flags
from tasks.digits import task as digits_task
from tests import linear
from tff_mixed import algorithms
from tff_mixed import group_data
from tff_mixed import task as task_lib
from tff_mixed.task import Task

B, K = 3, 2
N = 4 * K * B  # 24 examples: K·B is a quarter of the client.


def _client(n=N):
  x = np.stack([np.arange(n), np.arange(n) % 5], axis=1).astype(np.float32)
  return x, x @ [0.5, -1.0] + 0.25


def _task(client_shuffle=task_lib.PER_ROUND, n=N):
  x, y = _client(n)
  return Task(name='linear', model_fn=linear.model_fn,
              train_client_ids=['a', 'b'],
              train_dataset_fn=lambda cid: linear.dataset(x, y, batch_size=B),
              train_batch_size=B, client_shuffle=client_shuffle)


def _ids(dataset):
  """The examples' ids (their first feature), batch by batch."""
  return [b['x'][:, 0].astype(int).tolist() for b in dataset.as_numpy_iterator()]


def test_a_round_is_a_permutation_in_the_same_batches():
  task = _task(n=N + 2)  # A short last batch.
  plain = _ids(task.train_dataset_fn('a'))
  got = _ids(task.client_dataset('a', seed=0, round_num=1))
  assert [len(b) for b in got] == [len(b) for b in plain] == [B] * 8 + [2]
  assert sorted(sum(got, [])) == list(range(N + 2))
  assert got != plain
  data = task.client_dataset('a', seed=0, round_num=1)
  assert int(data.cardinality()) == 9
  assert _ids(data.repeat(2)) == got + got  # Cycled to K steps as it is.


def test_the_order_is_a_function_of_seed_round_and_client():
  task = _task()
  order = lambda *args: _ids(task.client_dataset(*args))
  assert order('a', 0, 1) == order('a', 0, 1)
  assert order('a', 0, 1) != order('a', 0, 2)
  assert order('a', 0, 1) != order('b', 0, 1)
  assert order('a', 0, 1) != order('a', 1, 1)
  assert task_lib.client_seed(3, 7, 'a') == task_lib.client_seed(3, 7, 'a')
  assert 0 <= task_lib.client_seed(2**40, 10**6, 'x' * 99) < 2**63


def test_a_client_reads_every_example_within_a_few_rounds():
  """K·B = |D_i| / 4: in a fixed order a client never reads beyond its
  first K·B examples; reshuffled, it has read all of them by round 20
  (each example is missed in a round with probability 3/4)."""
  def read_by(task, rounds):
    seen = set()
    for r in range(1, rounds + 1):
      seen.update(sum(_ids(task.client_dataset('a', 0, r).take(K)), []))
    return seen
  assert read_by(_task(task_lib.NO_SHUFFLE), 20) == set(range(K * B))
  assert read_by(_task(), 20) == set(range(N))


def test_fed_avg_trains_on_the_round_s_order():
  """One client, server rate 1: the new model is K NumPy SGD steps over the
  first K batches of that round's reshuffled data, not the fixed ones."""
  task = _task()
  process = algorithms.build_fed_avg(
      linear.model_fn, tff.learning.optimizers.build_sgdm(learning_rate=0.01),
      tff.learning.optimizers.build_sgdm(learning_rate=1.0),
      num_local_steps=K)
  state = process.initialize()
  cohort = task.cohort(seed=5, round_num=1, num_clients=1)
  got = process.get_model_weights(process.next(state, cohort).state)
  x, y = _client()
  batches = [(b['x'], b['y']) for b in cohort[0].as_numpy_iterator()]
  w, b = linear.sgd(np.zeros(2), 0.0, batches, K, 0.01)
  np.testing.assert_allclose(got.trainable[0].ravel(), w, rtol=1e-5)
  np.testing.assert_allclose(got.trainable[1], [b], rtol=1e-5)
  fixed = [(x[i:i + B], y[i:i + B]) for i in range(0, N, B)]
  w_fixed, _ = linear.sgd(np.zeros(2), 0.0, fixed, K, 0.01)
  assert not np.allclose(w, w_fixed)


def test_digits_permutes_at_the_source():
  """Digits permutes its arrays (`Task.train_arrays_fn`): the client's
  examples in a seeded order, in the same batch sizes; fast mode's groups
  hold the same batches."""
  task = digits_task.create_digits_task(num_clients=10, seed=0)
  cid = task.train_client_ids[0]
  rows = lambda d: [b['x'].tolist() for b in d.as_numpy_iterator()]
  plain, got = rows(task.train_dataset_fn(cid)), rows(
      task.client_dataset(cid, 0, 1))
  assert [len(b) for b in got] == [len(b) for b in plain]
  assert sorted(sum(got, [])) == sorted(sum(plain, [])) and got != plain
  assert rows(task.client_dataset(cid, 0, 1)) == got
  assert rows(task.client_dataset(cid, 0, 2)) != got
  cohort = task.cohort(0, 1, 4)
  [group] = task.cohort_groups(0, 1, 4, 1)
  group = group_data.group_contents(group)
  np.testing.assert_array_equal(
      group[group_data.EXAMPLES]['x'],
      np.concatenate([b['x'] for d in cohort for b in d.as_numpy_iterator()]))
  assert list(group[group_data.BATCH_SIZES]) == [
      len(b['x']) for d in cohort for b in d.as_numpy_iterator()]


def test_misuse_is_one_line():
  x, y = _client()
  unbatched = lambda cid: linear.dataset(x, y, batch_size=B)
  with pytest.raises(ValueError, match=(
      r"Task 'linear': client_shuffle='per_round' \(the default\) rebatches "
      r"each client's reshuffled examples, so it needs train_batch_size")):
    Task(name='linear', model_fn=linear.model_fn, train_client_ids=['a'],
         train_dataset_fn=unbatched)
  with pytest.raises(ValueError, match=(
      r"client_shuffle must be one of \('per_round', 'none'\), got 'each'")):
    _task(client_shuffle='each')
  static = lambda cid: tf.data.Dataset.from_tensor_slices(
      {'x': x, 'y': y.reshape(-1, 1).astype(np.float32)}).batch(
          4, drop_remainder=True)
  task = Task(name='linear', model_fn=linear.model_fn, train_client_ids=['a'],
              train_dataset_fn=static)
  assert task.train_batch_size == 4  # Read from the element spec.
  with pytest.raises(ValueError, match=(
      'train_batch_size=3 but the client batches have a fixed size of 4')):
    Task(name='linear', model_fn=linear.model_fn, train_client_ids=['a'],
         train_dataset_fn=static, train_batch_size=3)


def test_the_flag_chooses_and_is_recorded():
  _, run, _ = training_flags.config_from_values(client_shuffle='none')
  assert run.client_shuffle == 'none'
  assert run_spec.record(run_spec.RunSpec(
      'digits', run=run))['spec']['run']['client_shuffle'] == 'none'
  assert training_flags.config_from_values()[1].client_shuffle is None
