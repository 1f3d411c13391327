"""MovieLens data on small `ratings.dat` files in GroupLens's format."""

import numpy as np
import pytest
import tensorflow as tf

from tasks.movielens import data
from tasks.movielens import model

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
