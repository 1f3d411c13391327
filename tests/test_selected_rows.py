"""Mixed FL with per-client row selection (tff.federated_select)."""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tasks.movielens import cost
from tasks.movielens import data
from tasks.movielens import model as movielens_model
from tests import runs
from tests import table_model
from tff_mixed import algorithms
from tff_mixed import schedules
from tff_mixed.algorithms import mixed_fl
from tff_mixed.algorithms import selected_rows
from tff_mixed.templates import mixed_fl_step
from tff_mixed.templates import row_selection

N, D, L, K, ETA = 12, 4, 2, 2, 0.5
P = data.PAD
# Client 1 reads movies {0, 1, 2}; client 2 reads {2, 5, 7}: rows 3, 4, 6,
# 8..11 are read by nobody.
CLIENTS = [
    ([[0, P], [0, 1]], [1, 2]),
    ([[5, P], [5, 7], [7, 2]], [7, 2, 5]),
]
READ = [{0, 1, 2}, {2, 5, 7}]
MODEL_FN = movielens_model.model_fn_for(num_movies=N, dim=D, context_length=L)
CENTRAL_LOSS = movielens_model.spreadout_loss_fn(0.1)


def _datasets():
  return [tf.data.Dataset.from_tensor_slices(collections.OrderedDict(
      context=np.array(c, np.int32), label=np.array(l, np.int32))).batch(2)
          for c, l in CLIENTS]


def _row_ids(batch):
  return tf.concat([tf.reshape(batch['context'], [-1]), batch['label']], 0)


def _all_rows(unused_batch):
  return tf.range(N)


def _sparse(mixing, row_ids_fn=_row_ids, max_rows=5, **kwargs):
  return selected_rows.build_selected_rows_mixed_fl(
      MODEL_FN, tff.learning.optimizers.build_sgdm(learning_rate=ETA),
      row_ids_fn=row_ids_fn, central_loss_fn=CENTRAL_LOSS, mixing=mixing,
      num_local_steps=K, max_rows_per_client=max_rows, **kwargs)


def _dense(mixing, **kwargs):
  return algorithms.build_mixed_fl(
      MODEL_FN, central_data_fn=None, central_loss_fn=CENTRAL_LOSS, mixing=mixing,
      client_optimizer_fn=tff.learning.optimizers.build_sgdm(
          learning_rate=ETA),
      num_local_steps=K, **kwargs)


def _weights(process, state):
  return [np.asarray(w) for w in process.get_model_weights(state).trainable]


def _trained(process, rounds=2):
  """The trainable weights after `rounds` rounds on the two clients."""
  return _weights(process, runs.rounds(process, _datasets(), rounds)[-1].state)


@pytest.mark.parametrize('mixing', mixed_fl.MIXINGS)
def test_with_every_row_selected_it_is_mixed_fl(mixing):
  sparse = _trained(_sparse(mixing, _all_rows, max_rows=N))
  dense = _trained(_dense(mixing))
  for s, d in zip(sparse, dense):
    np.testing.assert_allclose(s, d, rtol=1e-5, atol=1e-7)


def test_a_client_rate_schedule_with_every_row_selected_is_mixed_fl():
  """eta, then eta / 2: the same schedule in both processes; it moves the
  second round (the constant rate gives another model)."""
  decay = schedules.exponential_decay(ETA, 0.5)
  mixing = mixed_fl.ONE_WAY_GRADIENT_TRANSFER
  sparse = _trained(_sparse(
      mixing, _all_rows, max_rows=N, client_learning_rate=decay))
  dense = _trained(_dense(mixing, client_learning_rate=decay))
  constant = _trained(_dense(mixing))
  for s, d, c in zip(sparse, dense, constant):
    np.testing.assert_allclose(s, d, rtol=1e-5, atol=1e-7)
  assert not all(np.allclose(d, c, rtol=1e-4) for d, c in zip(dense, constant))


ADAPTIVE_CLIENTS = {
    'adam': lambda: tff.learning.optimizers.build_adam(learning_rate=0.05),
    'adagrad': lambda: tff.learning.optimizers.build_adagrad(
        learning_rate=0.1),
    'sgdm': lambda: tff.learning.optimizers.build_sgdm(learning_rate=ETA,
                                                       momentum=0.9),
}


@pytest.mark.parametrize('client', sorted(ADAPTIVE_CLIENTS))
def test_any_client_optimizer_with_selected_rows_is_dense_training(client):
  """A client's optimizer starts each round from its initial state (as in
  `tff.learning`), so on a row the client does not read its gradient and
  its state stay zero and no `tff.learning.optimizers` optimizer moves it:
  Parallel Training with row selection equals dense mixed FL with the same
  optimizers (the server's Adam too, seed 004 Fig. 11's server side) for
  any client optimizer."""
  server = lambda: tff.learning.optimizers.build_adam(learning_rate=0.01)
  sparse = selected_rows.build_selected_rows_mixed_fl(
      MODEL_FN, ADAPTIVE_CLIENTS[client](), server(), row_ids_fn=_row_ids,
      central_loss_fn=CENTRAL_LOSS, mixing='parallel_training',
      num_local_steps=K, max_rows_per_client=5)
  dense = algorithms.build_mixed_fl(
      MODEL_FN, ADAPTIVE_CLIENTS[client](), server(), central_data_fn=None,
      central_loss_fn=CENTRAL_LOSS, mixing='parallel_training',
      num_local_steps=K)
  x0 = _weights(sparse, sparse.initialize())
  moved = False
  for s, d, start in zip(_trained(sparse), _trained(dense), x0):
    np.testing.assert_allclose(s, d, rtol=1e-5, atol=1e-7)
    moved = moved or not np.allclose(s, start)
  assert moved


class TestParallelTraining:

  @pytest.fixture(scope='class')
  def run(self):
    process = _sparse('parallel_training')
    return process, runs.rounds(process, _datasets(), 1)

  def test_equals_dense_mixed_fl(self, run):
    # Without GT, a client's unread rows have zero gradient, so moving only
    # the read rows changes nothing.
    process, (output,) = run
    for s, d in zip(_weights(process, output.state),
                    _trained(_dense('parallel_training'), rounds=1)):
      np.testing.assert_allclose(s, d, rtol=1e-5, atol=1e-7)

  def test_unread_rows_move_only_by_the_central_step(self, run):
    process, (output,) = run
    x0 = _weights(process, process.initialize())
    # The server's regulariser step alone: J = K SGD steps of w_c grad at
    # eta_c = eta x eta_s.
    update = mixed_fl_step.build_central_update(
        MODEL_FN, lambda m, unused: CENTRAL_LOSS(m, None), loss_weight=0.5)
    weights = tff.learning.models.ModelWeights(trainable=x0, non_trainable=[])
    central_sgd = tff.learning.optimizers.build_sgdm(learning_rate=ETA)
    hparams = central_sgd.get_hparams(
        central_sgd.initialize(tf.TensorSpec((), tf.float32)))
    central_delta, _, _ = update(central_sgd, hparams, weights,
                                 tf.data.Dataset.range(K).map(lambda _: 0), [
                                     np.zeros_like(x) for x in x0])
    unread = sorted(set(range(N)) - READ[0] - READ[1])
    table = _weights(process, output.state)[0]
    np.testing.assert_allclose(
        table[unread] - x0[0][unread],
        np.asarray(central_delta[0])[unread], atol=1e-6)
    read = sorted(READ[0] | READ[1])
    assert not np.allclose(table[read] - x0[0][read],
                           np.asarray(central_delta[0])[read], atol=1e-6)

  def test_costs_count_the_selected_rows(self, run):
    _, (output,) = run
    costs = output.metrics['client_work']
    n = np.mean([len(r) for r in READ])  # 3 rows each.
    assert costs['rows_per_client'] == n
    rest = (D * D + D) * 4  # Context kernel and bias.
    assert costs['bytes_downloaded_per_client'] == n * D * 4 + rest
    assert costs['bytes_uploaded_per_client'] == n * D * 4 + rest + n * 4
    table5 = cost.table5(num_movies=N, dim=D, n=n, num_local_steps=K)
    assert costs['embedding_bytes_per_client'] == (
        table5['parallel_training'].communicated_elements * 4)


def test_one_way_gradient_transfer_leaves_unread_rows_alone():
  process = _sparse('one_way_gradient_transfer')
  (output,) = runs.rounds(process, _datasets(), 1)
  x0 = _weights(process, process.initialize())[0]
  table = _weights(process, output.state)[0]
  unread = sorted(set(range(N)) - READ[0] - READ[1])
  np.testing.assert_array_equal(table[unread], x0[unread])
  assert not np.allclose(table[sorted(READ[0])], x0[sorted(READ[0])])
  costs = output.metrics['client_work']
  table5 = cost.table5(num_movies=N, dim=D, n=3, num_local_steps=K)
  assert costs['embedding_bytes_per_client'] == (
      table5['one_way_gradient_transfer'].communicated_elements * 4)
  assert costs['bytes_downloaded_per_client'] == 2 * (3 * D + D * D + D) * 4


def test_client_flops_follow_the_step_count():
  process = _sparse('parallel_training',
                    flops_per_step=lambda b: cost.step_flops(b, D))
  (output,) = runs.rounds(process, _datasets(), 1)
  costs = output.metrics['client_work']
  # Client 1: 2 steps of a 2-example batch; client 2: batches of 2 and 1.
  expected = np.mean([2 * cost.step_flops(2.0, D),
                      2 * cost.step_flops(1.5, D)])
  np.testing.assert_allclose(costs['client_flops_per_client'], expected,
                             rtol=1e-6)


def test_too_many_rows_fails_naming_the_argument():
  process = _sparse('parallel_training', max_rows=2)
  with pytest.raises(Exception, match='max_rows_per_client=2'):
    process.next(process.initialize(), _datasets())


@pytest.mark.parametrize('kwargs, message', [
    (dict(mixing='fedavg'), 'mixing must be one of'),
    (dict(max_rows=N + 1), f'exceeds the table.s {N} rows'),
    (dict(table_index=2), 'table_index=2 is not a 2-D'),  # The bias.
    (dict(central_weight=0.0), 'central_weight must be a finite number > 0'),
])
def test_an_argument_the_builder_cannot_honour_is_refused_naming_it(
    kwargs, message):
  kwargs = dict(kwargs)
  mixing = kwargs.pop('mixing', 'parallel_training')
  with pytest.raises(ValueError, match=message):
    _sparse(mixing, **kwargs)


def test_a_client_downloads_exactly_the_rows_of_its_movies():
  data_type = tff.SequenceType(tff.types.tensorflow_to_type(
      _datasets()[0].element_spec))
  table_type = tff.TensorType(np.float32, [N, D])
  download = row_selection.RowDownload(
      data_type, _row_ids, table_type=table_type, max_rows_per_client=5)

  @tff.federated_computation(tff.FederatedType(table_type, tff.SERVER),
                             tff.FederatedType(data_type, tff.CLIENTS))
  def received(table, client_data):
    k = tff.federated_broadcast(tff.federated_value(np.int32(K), tff.SERVER))
    return download(table, client_data, k)

  table = np.arange(N * D, dtype=np.float32).reshape(N, D)
  keys, counts, rows = received(table, _datasets())
  for client, read in enumerate(READ):
    assert counts[client] == len(read)
    # Sorted ids, padded with the first; one row per key, in key order.
    assert list(keys[client]) == sorted(read) + [min(read)] * (5 - len(read))
    np.testing.assert_array_equal(np.stack(list(rows[client])),
                                  table[keys[client]])


class TestTwoWayGradientTransferOnPartlyHeldRows:
  """2-way GT against a NumPy transcription of seed 004 App. A.2.

  Row 0 is read by every client, 1 by A only, 2 by B only, 3 by C only
  (and C's third batch, past its K = 2 steps, reads row 4), 4 and 5 by
  nobody: g~_c reaches only the rows a client holds, and g~_f of a row is
  the mean over all client steps of the federated gradient, 0 where nobody
  held it.
  """
  ETA, ETA_S, ETA_M, ETA_C = 0.3, 0.9, 0.8, 0.2
  W_F, W_C, COEFFICIENT, K, J = 0.6, 0.4, 0.5, 2, 3
  BATCHES = {
      'A': [([0, 1], [[1.0, 0.0], [0.5, 0.5]]), ([1], [[-1.0, 2.0]])],
      'B': [([2, 0, 2], [[0.0, 1.0], [1.0, 1.0], [2.0, -1.0]])],
      'C': [([3], [[0.3, 0.3]]), ([0, 3], [[1.0, -1.0], [0.0, 0.5]]),
            ([4], [[9.0, 9.0]])],
  }
  HELD = {'A': [0, 1], 'B': [0, 2], 'C': [0, 3]}
  ROUNDS = 3

  def reference(self):
    """Seed 004 Algorithm 1 (2-way GT) with App. A.2's inferred g~_f."""
    table, bias = (table_model.TABLE0.astype(np.float64),
                   table_model.BIAS0.astype(np.float64))
    gc_t, gc_b = np.zeros_like(table), np.zeros_like(bias)
    gf_t, gf_b = np.zeros_like(table), np.zeros_like(bias)
    history = []
    for _ in range(self.ROUNDS):
      central_t, central_b = table.copy(), bias.copy()
      for _ in range(self.J):
        central_t = central_t - self.ETA_C * (
            self.W_C * self.COEFFICIENT * central_t + gf_t)
        central_b = central_b - self.ETA_C * gf_b
      dc_t, dc_b = central_t - table, central_b - bias
      sum_t, sum_b = np.zeros_like(table), np.zeros_like(bias)
      weighted_t, weighted_b, weight = 0.0, 0.0, 0.0
      row_steps = np.zeros(table_model.NUM_ROWS)
      for name, batches in self.BATCHES.items():
        held = np.zeros((table_model.NUM_ROWS, 1))
        held[self.HELD[name]] = 1.0
        t, b, examples = table.copy(), bias.copy(), 0
        for k in range(self.K):
          ids, y = batches[k % len(batches)]
          g_t, g_b = table_model.grad(t, b, ids, y)
          t = t - self.ETA * (self.W_F * g_t + held * gc_t)
          b = b - self.ETA * (self.W_F * g_b + gc_b)
          examples += len(ids)
        sum_t, sum_b = sum_t + (table - t), sum_b + (bias - b)
        weighted_t = weighted_t + examples * (table - t)
        weighted_b = weighted_b + examples * (bias - b)
        weight += examples
        row_steps += self.K * held[:, 0]
      x_f_t = table - self.ETA_S * weighted_t / weight
      x_f_b = bias - self.ETA_S * weighted_b / weight
      new_table = table + self.ETA_M * (dc_t + x_f_t - table)
      new_bias = bias + self.ETA_M * (dc_b + x_f_b - bias)
      steps = self.K * len(self.BATCHES)
      new_gc_t = -dc_t / (self.ETA_C * self.J) - gf_t
      new_gc_b = -dc_b / (self.ETA_C * self.J) - gf_b
      gf_t = (sum_t - self.ETA * row_steps[:, None] * gc_t) / (
          self.ETA * steps)
      gf_b = (sum_b - self.ETA * steps * gc_b) / (self.ETA * steps)
      gc_t, gc_b = new_gc_t, new_gc_b
      table, bias = new_table, new_bias
      history.append((table, bias, gf_t, gf_b, gc_t, gc_b))
    return history

  @pytest.fixture(scope='class')
  def run(self):
    sgd = tff.learning.optimizers.build_sgdm
    process = selected_rows.build_selected_rows_mixed_fl(
        table_model.TableModel, sgd(self.ETA), sgd(self.ETA_S),
        row_ids_fn=table_model.row_ids,
        central_loss_fn=table_model.l2_loss_fn(self.COEFFICIENT),
        mixing='two_way_gradient_transfer', num_local_steps=self.K,
        max_rows_per_client=3, merge_optimizer_fn=sgd(self.ETA_M),
        central_optimizer_fn=sgd(self.ETA_C), num_central_steps=self.J,
        federated_weight=self.W_F, central_weight=self.W_C)
    data = [table_model.dataset(b) for b in self.BATCHES.values()]
    outputs = runs.rounds(process, data, self.ROUNDS)
    return process, [output.state for output in outputs]

  def test_every_round_matches_the_reference(self, run):
    process, states = run
    for state, expected in zip(states, self.reference()):
      table, bias, gf_t, gf_b, gc_t, gc_b = expected
      actual = process.get_model_weights(state).trainable
      np.testing.assert_allclose(actual[0], table, rtol=1e-5, atol=1e-6)
      np.testing.assert_allclose(actual[1], bias, rtol=1e-5, atol=1e-6)
      np.testing.assert_allclose(state['server']['federated_gradient'][0], gf_t,
                                 rtol=1e-4, atol=1e-5)
      np.testing.assert_allclose(state['server']['federated_gradient'][1], gf_b,
                                 rtol=1e-4, atol=1e-5)
      np.testing.assert_allclose(state['client_work']['augmenting_gradient'][0], gc_t,
                                 rtol=1e-4, atol=1e-5)
      np.testing.assert_allclose(state['client_work']['augmenting_gradient'][1], gc_b,
                                 rtol=1e-4, atol=1e-5)

  def test_rows_nobody_held_get_no_federated_gradient(self, run):
    _, states = run
    for state in states:
      np.testing.assert_array_equal(state['server']['federated_gradient'][0][4:], 0.0)
      # Every held row gets one.
      assert np.all(np.abs(state['server']['federated_gradient'][0][:4]) > 1e-4)
