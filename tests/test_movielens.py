"""MovieLens data on small `ratings.dat` files in GroupLens's format."""

import csv
import os

import numpy as np
import pytest
import tensorflow as tf

from tasks.common import fixtures
from tasks.common import registry
from tasks.common import saved_run
from tasks.movielens import data
from tasks.movielens import model
from tasks.movielens import task as task_lib
from tests import binaries
from tests import runs
from tff_mixed.algorithms import mixed_fl

# user, movie, rating, timestamp; user 2's lines are out of time order.
RATINGS = [
    (1, 10, 5, 100), (1, 20, 3, 101), (1, 30, 4, 102), (1, 40, 2, 103),
    (2, 50, 4, 300), (2, 10, 5, 200), (2, 60, 1, 250),
    (3, 3952, 3, 10),
]


def write_ratings(directory, rows=RATINGS):
  path = directory / data.RATINGS_FILE
  path.write_text(''.join('::'.join(map(str, r)) + '\n' for r in rows))
  return str(path)


def test_read_ratings(tmp_path):
  ratings = data.read_ratings(write_ratings(tmp_path))
  np.testing.assert_array_equal(ratings, RATINGS)


@pytest.mark.parametrize('line, problem', [
    ('1::10::5', 'expected UserID::MovieID::Rating::Timestamp'),
    ('1::ten::5::100', 'expected UserID::MovieID::Rating::Timestamp'),
    ('1::3953::5::100', 'MovieID 3953 is outside 1..3952'),
    ('1::0::5::100', 'MovieID 0 is outside')])
def test_bad_line_names_file_and_line(tmp_path, line, problem):
  path = tmp_path / data.RATINGS_FILE
  path.write_text('1::10::5::99\n' + line + '\n')
  with pytest.raises(data.RatingsFormatError) as info:
    data.read_ratings(str(path))
  assert str(info.value).startswith(f'{path}:2: ') and problem in str(info.value)


def test_missing_file_is_one_line_saying_where_to_get_it(tmp_path):
  with pytest.raises(data.DataUnavailableError) as info:
    data.read_ratings(str(tmp_path / data.RATINGS_FILE))
  message = str(info.value)
  assert '\n' not in message and data.URL in message and 'ratings.dat' in message


def test_examples_are_next_movie_in_time_order_with_bag_context(tmp_path):
  ratings = data.read_ratings(write_ratings(tmp_path))
  examples = data.user_examples(ratings, context_length=2)
  p = data.PAD
  # Rows are movie id - 1. User 1: 10, 20, 30, 40.
  np.testing.assert_array_equal(examples[1].context,
                                [[9, p], [9, 19], [19, 29]])
  np.testing.assert_array_equal(examples[1].label, [19, 29, 39])
  # User 2 in time order: 10 (t=200), 60 (250), 50 (300).
  np.testing.assert_array_equal(examples[2].context, [[9, p], [9, 59]])
  np.testing.assert_array_equal(examples[2].label, [59, 49])
  assert len(examples[3]) == 0  # One rating: no next movie.
  spec = data.element_spec(context_length=2)
  assert examples[1].dataset().element_spec == spec


def test_split_users_matches_the_papers_counts_and_is_seeded():
  users = range(1, 6041)
  split = data.split_users(users, seed=0)
  sizes = {k: len(v) for k, v in split.items()}
  assert sizes == {'central': 1209, 'train': 3865, 'validation': 483,
                   'test': 483}
  assert sorted(u for v in split.values() for u in v) == list(users)
  assert data.split_users(users, seed=0) == split
  assert data.split_users(users, seed=1)['train'] != split['train']


def test_central_examples_are_shuffled_together():
  a = data.Examples(np.array([[0], [1]], np.int32), np.array([1, 2], np.int32))
  b = data.Examples(np.array([[5]], np.int32), np.array([6], np.int32))
  joined = data.concatenate([a, b], shuffle_seed=3)
  assert sorted(joined.label.tolist()) == [1, 2, 6]
  # Each context stays with its label.
  assert {(int(c[0]), int(l)) for c, l in zip(joined.context, joined.label)} == {
      (0, 1), (1, 2), (5, 6)}


def test_spreadout_is_the_off_diagonal_frobenius_norm():
  rng = np.random.default_rng(0)
  table = rng.normal(size=(7, 3)).astype(np.float32)
  table[4] = 0.0  # A zero row contributes nothing.
  unit = table / np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-12)
  cosines = unit @ unit.T
  np.fill_diagonal(cosines, 0.0)
  expected = np.sqrt((cosines.astype(np.float64) ** 2).sum())
  np.testing.assert_allclose(float(model.spreadout(tf.constant(table))),
                             expected, rtol=1e-5)


def _tiny_model(**kwargs):
  """N = 4 movies, d = 2; context layer = identity, so left = relu(bag)."""
  m = model.DualEncoder(num_movies=4, dim=2, context_length=2, **kwargs)
  m.trainable_variables[0].assign([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0],
                                   [-1.0, 0.0]])
  m.trainable_variables[1].assign(np.eye(2, dtype=np.float32))
  return m


def test_hinge_loss_by_hand():
  m = _tiny_model()
  batch = {'context': tf.constant([[0, data.PAD], [0, 2]]),
           'label': tf.constant([1, 3])}
  output = m.forward_pass(batch, training=True)
  # Example 1: left = e0 = (1, 0), right = (0.6, 0.8): cos 0.6.
  # Example 2: left = mean(e0, e2) = (0.5, 0.5) -> (1, 1)/sqrt2, right = (-1, 0):
  # cos = -1/sqrt2.
  cos = np.array([0.6, -1 / np.sqrt(2)])
  expected = np.mean(np.maximum(0.0, 0.9 - cos) ** 2)
  np.testing.assert_allclose(float(output.loss), expected, rtol=1e-6)
  np.testing.assert_allclose(output.predictions, cos, rtol=1e-6)


def test_recall_at_k_ranks_every_row():
  m = _tiny_model(recall_k=2)
  batch = {'context': tf.constant([[0, data.PAD], [0, data.PAD]]),
           'label': tf.constant([1, 2])}
  m.forward_pass(batch, training=False)
  # left = (1, 0): similarities e0 1, e1 0.6, e2 0, e3 -1. Label 1 is 2nd
  # (a hit at k = 2), label 2 is 3rd (a miss).
  metrics = m.report_local_unfinalized_metrics()
  assert [float(v) for v in metrics['recall_at_2']] == [1.0, 2.0]
  m.forward_pass(batch, training=True)  # Training does not score the table.
  assert float(m.report_local_unfinalized_metrics()['recall_at_2'][1]) == 2.0


@pytest.mark.parametrize('spreadout_weight', [0.0, 0.5])
def test_only_the_batch_rows_get_gradient_without_spreadout(spreadout_weight):
  m = _tiny_model(spreadout_weight=spreadout_weight)
  batch = {'context': tf.constant([[1, data.PAD]]), 'label': tf.constant([0])}
  with tf.GradientTape() as tape:
    loss = m.forward_pass(batch).loss
  table_gradient = tf.convert_to_tensor(
      tape.gradient(loss, m.trainable_variables[0])).numpy()
  touched = np.abs(table_gradient).sum(axis=1) > 0
  if spreadout_weight:
    assert touched.all()  # The regulariser reaches every row.
  else:
    assert touched.tolist() == [True, True, False, False]


def test_central_loss_is_the_weighted_spreadout():
  m = _tiny_model()
  loss = model.spreadout_loss_fn(0.25)(m, None)
  np.testing.assert_allclose(
      float(loss), 0.25 * float(model.spreadout(m.trainable_variables[0])))


@pytest.fixture(scope='module')
def movielens(tmp_path_factory):
  directory = tmp_path_factory.mktemp('ml-1m')
  write_ratings(directory, fixtures.movielens_ratings())
  return task_lib.load(str(directory), context_length=3)


def test_task_on_the_fixture(movielens):
  sizes = {k: len(v) for k, v in movielens.split.items()}
  # 8 central; of 32 clients 25 / 3 / 3 and the one left over is central.
  assert sizes == {'central': 9, 'train': 25, 'validation': 3, 'test': 3}
  task = task_lib.create_movielens_task(movielens, batch_size=4)
  assert len(task.train_client_ids) == 25
  batch = next(iter(task.train_dataset_fn(task.train_client_ids[0])))
  assert batch['context'].shape[1] == 3
  eval_data = task.eval_dataset_fn()
  test_examples = sum(len(movielens.examples[u])
                      for u in movielens.split['test'])
  assert sum(int(b['label'].shape[0]) for b in eval_data['test']) == (
      test_examples)
  central = movielens.central_examples(seed=1)
  assert len(central) == sum(len(movielens.examples[u])
                             for u in movielens.split['central'])


def test_row_bound_holds_for_every_client(movielens):
  k, b = 3, 4
  bound = task_lib.max_rows_per_client(k, b, movielens.context_length)
  assert bound == k * b + 3
  for user in movielens.split['train']:
    examples = movielens.examples[user]
    batches = list(examples.dataset().batch(b).repeat().take(k))
    read = set()
    for batch in batches:
      ids = task_lib.row_ids(batch).numpy()
      read |= set(ids[ids >= 0].tolist())
    assert len(read) <= bound


def _recall_at_10(table, kernel, bias, dataset):
  """Module doc's recall@10 in NumPy: the label among the 10 rows whose
  normalised embeddings score highest against the normalised context tower
  (relu of the mean context row, times the kernel, plus the bias)."""
  unit = lambda v: v / np.linalg.norm(v, axis=-1, keepdims=True)
  hits = total = 0
  for batch in dataset.as_numpy_iterator():
    for context, label in zip(batch['context'], batch['label']):
      bag = table[context[context >= 0]].mean(axis=0)
      left = unit(np.maximum(bag @ kernel + bias, 0.0))
      scores = unit(table) @ left
      hits += int((scores > scores[label]).sum() < 10)
      total += 1
  return hits / total


@pytest.mark.parametrize('setting', ['baseline', *mixed_fl.MIXINGS])
def test_rounds_of_each_setting_and_the_loss_falls(movielens, setting,
                                                   tmp_path):
  baseline = setting == 'baseline'
  task = task_lib.create_movielens_task(
      movielens, batch_size=4, embedding_dim=8,
      spreadout_weight=0.001 if baseline else 0.0)
  if baseline:
    process = registry.build_process(
        registry.AlgorithmConfig(
            num_local_steps=3,
            client=registry.OptimizerSpec(learning_rate=0.5)),
        task.model_fn, flops_per_step=task.flops_per_step)
  else:
    process = task_lib.build_mixed_fl(
        task, mixing=setting, batch_size=4, context_length=3,
        spreadout_weight=0.001, client_learning_rate=0.5, num_local_steps=3)
  result = runs.experiment(task, process, tmp_path, rounds=3,
                           clients_per_round=8, eval_every=0)
  rows = result.history
  assert all(np.isfinite(v) for r in rows for v in r.values())
  losses = [r['client_work/train/loss'] for r in rows]
  assert losses[-1] < losses[0]
  # The final evaluation's recall@10 is the trained model's, by hand.
  table, kernel, bias = [np.asarray(w) for w in result.process.get_model_weights(
      result.state).trainable]
  for part in ('validation', 'test'):
    np.testing.assert_allclose(
        result.final_eval[f'{part}/recall_at_10'],
        _recall_at_10(table, kernel, bias, task.eval_dataset_fn()[part]),
        atol=1e-6)
  if not baseline:
    n = rows[0]['client_work/rows_per_client']
    assert 0 < n <= task_lib.max_rows_per_client(3, 4, 3)


_binary = binaries.run  # python -m MODULE FLAGS..., forked.


def test_binary_helpfull_lists_the_paper_defaults():
  out = ' '.join(_binary('tasks.movielens.train', '--helpfull').stdout.split())
  for expected in ("--batch_size: Client batch size |B_i|. (default: '16')",
                   "SGD steps every client takes per round. (default: '10')",
                   "--client_learning_rate: Client learning rate "
                   "(default: '0.5')",
                   "--rounds: Number of rounds. (default: '2000')",
                   "--clients_per_round: Clients sampled per round. "
                   "(default: '100')"):
    assert expected in out, expected


@pytest.mark.parametrize('module', ['tasks.movielens.train',
                                    'tasks.movielens.table'])
def test_binaries_without_data_exit_with_one_line(tmp_path, module):
  result = _binary(module, f'--data_dir={tmp_path}',
                   f'--output_dir={tmp_path / "out"}')
  assert result.returncode == 1
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith('Error: MovieLens: ') and data.URL in last
  assert not os.path.exists(tmp_path / 'out')


def test_binary_rejects_flags_the_sparse_process_ignores(tmp_path):
  result = _binary('tasks.movielens.train', '--algorithm=parallel_training',
                   '--k_schedule=exponential', f'--data_dir={tmp_path}',
                   f'--output_dir={tmp_path / "out"}')
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1].endswith(
      '--k_schedule is not supported with --algorithm=parallel_training '
      '(selected rows).')


def test_binary_runs_fig_11_server_adam_on_the_fixture(tmp_path):
  """Seed 004 Fig. 11's preset: 1-way GT with Adam at the server."""
  out = tmp_path / 'fig11'
  result = _binary('tasks.movielens.train', '--preset=paper_fig11',
                   '--use_synthetic_data', '--rounds=2', '--eval_every=2',
                   '--clients_per_round=3', '--noprogress',
                   f'--output_dir={out}')
  assert result.returncode == 0, result.stderr[-2000:]
  algorithm = saved_run.read_spec(str(out)).algorithm
  assert (algorithm.algorithm, algorithm.server.name,
          algorithm.server.learning_rate) == (
              'one_way_gradient_transfer', 'adam', 0.01)
  with open(out / 'metrics.csv') as f:
    rows = list(csv.DictReader(f))
  assert len(rows) == 2 and all(np.isfinite(float(r['client_work/train/loss']))
                                for r in rows)


def test_table_binary_on_the_fixture(tmp_path):
  write_ratings(tmp_path, fixtures.movielens_ratings())
  result = _binary('tasks.movielens.table', '--preset=cpu_small',
                   f'--data_dir={tmp_path}', '--eval_every=0',
                   f'--output_dir={tmp_path / "out"}')
  assert result.returncode == 0, result.stderr[-2000:]
  rows = [line.split('|')[1:-1] for line in result.stdout.splitlines()
          if line.startswith('| ') and 'setting' not in line]
  assert [r[0].strip() for r in rows] == ['Baseline', 'PT', '1-w GT', '2-w GT']
  mflop = {r[0].strip(): float(r[1]) for r in rows}
  # App. C.3: the spreadout dominates a baseline step; mixed FL's clients
  # skip it (99.9% and more of their computation).
  assert mflop['PT'] < 0.001 * mflop['Baseline']
  table_kib = {r[0].strip(): float(r[2]) for r in rows}
  assert table_kib['Baseline'] == round(2 * 3952 * 16 * 4 / 1024, 1)
  # Each run's config.json is its spec, which reads back as the run.
  spec = saved_run.read_spec(str(tmp_path / 'out' / 'parallel_training'))
  assert (spec.task, spec.algorithm.algorithm) == ('movielens',
                                                   'parallel_training')
  assert spec.task_args == {  # The task's arguments, its defaults filled.
      'data_dir': str(tmp_path), 'use_synthetic_data': False,
      'batch_size': 16, 'embedding_dim': 16, 'spreadout_weight': 0.001,
      'context_length': data.CONTEXT_LENGTH}
  assert (spec.algorithm.num_local_steps, spec.algorithm.client.learning_rate,
          spec.algorithm.federated_weight) == (10, 0.5, 0.5)
  for name in ('PT', '1-w GT', '2-w GT'):  # Measured == Table 5 at measured n.
    assert float(rows[[r[0].strip() for r in rows].index(name)][3]) == (
        table_kib[name])
  assert table_kib['1-w GT'] > table_kib['PT']


def test_train_binary_cpu_small_on_the_fixture(tmp_path):
  write_ratings(tmp_path, fixtures.movielens_ratings())
  result = _binary('tasks.movielens.train', '--preset=cpu_small',
                   '--rounds=2', '--algorithm=two_way_gradient_transfer',
                   f'--data_dir={tmp_path}', '--noprogress',
                   f'--output_dir={tmp_path / "out"}')
  assert result.returncode == 0, result.stderr[-2000:]
  with open(tmp_path / 'out' / 'metrics.csv') as f:
    rows = list(csv.DictReader(f))
  assert len(rows) == 2 and float(rows[-1]['client_work/rows_per_client']) > 0
  assert 0.0 <= float(rows[-1]['eval/test/recall_at_10']) <= 1.0
