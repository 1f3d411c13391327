"""FedAvg / FedSGD / FedAdam against hand-computed updates."""

import asyncio

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import linear
from tests import runs
from tff_mixed import algorithms
from tff_mixed import execution
from tff_mixed import group_data
from tff_mixed import schedules
from tff_mixed import templates
from tff_mixed.templates import client_groups

W0, B0 = np.array([0.5, -0.25]), 0.1
GAMMA = 0.1


def _set(process, state, w, b):
  return process.set_model_weights(state, linear.weights(w, b))


def _full_batch(client):
  return linear.dataset(*client)


@pytest.fixture(scope='module')
def fed_avg_k3():
  return algorithms.build_fed_avg(
      linear.model_fn,
      tff.learning.optimizers.build_sgdm(learning_rate=GAMMA),
      num_local_steps=3,
  )


def test_full_batch_fed_avg_equals_hand_computed_local_gd(fed_avg_k3):
  """Two rounds, two clients, one full batch each: K local GD steps."""
  start = _set(fed_avg_k3, fed_avg_k3.initialize(), W0, B0)
  state = runs.rounds(
      fed_avg_k3, [_full_batch(linear.CLIENT_A), _full_batch(linear.CLIENT_B)],
      2, state=start)[-1].state
  w, b = W0, B0
  sizes = [len(linear.CLIENT_A[1]), len(linear.CLIENT_B[1])]
  for _ in range(2):
    ends = [linear.sgd(w, b, [c], 3, GAMMA) for c in (linear.CLIENT_A, linear.CLIENT_B)]
    # Weights: examples processed = 3 * dataset size.
    p = np.array(sizes, np.float64) * 3
    w = sum(pi * e[0] for pi, e in zip(p, ends)) / p.sum()
    b = sum(pi * e[1] for pi, e in zip(p, ends)) / p.sum()
  got_w, got_b = linear.unpack(fed_avg_k3.get_model_weights(state))
  np.testing.assert_allclose(got_w, w, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(got_b, b, rtol=1e-5, atol=1e-6)


def test_client_datasets_built_on_the_worker_from_ids(fed_avg_k3):
  """TFF's `compose_dataset_computation_with_learning_process` works as is:
  a round sends client ids and the worker builds their datasets, with the
  model of the run that sent datasets."""
  def arrays(client):
    x, y = client
    return {'x': np.asarray(x, np.float32),
            'y': np.asarray(y, np.float32).reshape(-1, 1)}
  client_data = tff.simulation.datasets.TestClientData(
      {'a': arrays(linear.CLIENT_A), 'b': arrays(linear.CLIENT_B)}
  ).preprocess(lambda ds: ds.batch(1000))
  from_ids = tff.simulation.compose_dataset_computation_with_learning_process(
      client_data.dataset_computation, fed_avg_k3)
  by_ids = runs.rounds(
      from_ids, ['a', 'b'], 2,
      state=_set(from_ids, from_ids.initialize(), W0, B0))[-1].state
  by_datasets = runs.rounds(
      fed_avg_k3, [_full_batch(linear.CLIENT_A), _full_batch(linear.CLIENT_B)],
      2, state=_set(fed_avg_k3, fed_avg_k3.initialize(), W0, B0))[-1].state
  for got, want in zip(linear.unpack(from_ids.get_model_weights(by_ids)),
                       linear.unpack(fed_avg_k3.get_model_weights(by_datasets))):
    np.testing.assert_array_equal(got, want)


def test_round_metrics_are_the_hand_computed_loss_steps_and_bytes(
    fed_avg_k3):
  state = _set(fed_avg_k3, fed_avg_k3.initialize(), W0, B0)
  output = fed_avg_k3.next(
      state, [_full_batch(linear.CLIENT_A), _full_batch(linear.CLIENT_B)]
  )
  work = output.metrics['client_work']
  assert work['num_local_steps'] == 3
  assert work['sgd_steps'] == 6
  assert work['train']['num_examples'] == 3 * 5
  # Training loss: mean over the 6 steps' batches, weighted by batch size.
  total = 0.0
  for x, y in (linear.CLIENT_A, linear.CLIENT_B):
    wi, bi = W0, B0
    for _ in range(3):
      r = np.asarray(x) @ wi + bi - np.asarray(y)
      total += np.sum(r**2)
      wi, bi = linear.sgd(wi, bi, [(x, y)], 1, GAMMA)
  np.testing.assert_allclose(work['train']['loss'], total / 15, rtol=1e-5)
  assert work['bytes_downloaded_per_client'] == 4 * 3 + 4 + 4
  assert output.metrics['finalizer']['update_non_finite'] == 0


def test_k1_one_client_equals_one_sgd_step_scaled_by_server_lr():
  eta = 0.5
  process = algorithms.build_fed_avg(
      linear.model_fn,
      tff.learning.optimizers.build_sgdm(learning_rate=GAMMA),
      tff.learning.optimizers.build_sgdm(learning_rate=eta),
      num_local_steps=1,
  )
  state = _set(process, process.initialize(), W0, B0)
  state = process.next(state, [_full_batch(linear.CLIENT_A)]).state
  gw, gb = linear.grad(W0, B0, *linear.CLIENT_A)
  got_w, got_b = linear.unpack(process.get_model_weights(state))
  np.testing.assert_allclose(got_w, W0 - eta * GAMMA * gw, rtol=1e-5)
  np.testing.assert_allclose(got_b, B0 - eta * GAMMA * gb, rtol=1e-5)


def test_empty_clients_never_produce_nan(fed_avg_k3):
  state = _set(fed_avg_k3, fed_avg_k3.initialize(), W0, B0)
  empty = _full_batch(linear.CLIENT_A).take(0)
  # Only empty clients: the model does not move.
  out = fed_avg_k3.next(state, [empty, empty])
  got_w, got_b = linear.unpack(fed_avg_k3.get_model_weights(out.state))
  np.testing.assert_array_equal(got_w, np.float32(W0))
  assert got_b == np.float32(B0)
  assert out.metrics['client_work']['sgd_steps'] == 0
  # An empty client beside a real one: the real one's update alone.
  out = fed_avg_k3.next(state, [empty, _full_batch(linear.CLIENT_B)])
  w, b = linear.sgd(W0, B0, [linear.CLIENT_B], 3, GAMMA)
  got_w, got_b = linear.unpack(fed_avg_k3.get_model_weights(out.state))
  np.testing.assert_allclose(got_w, w, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(got_b, b, rtol=1e-5, atol=1e-6)


def test_fed_adam_first_round_is_one_adam_step_on_the_mean_delta():
  lr, b1, b2, eps = 0.3, 0.9, 0.99, 1e-3
  process = algorithms.build_fed_adam(
      linear.model_fn,
      tff.learning.optimizers.build_sgdm(learning_rate=GAMMA),
      num_local_steps=2,
  )
  state = _set(process, process.initialize(), W0, B0)
  state = process.next(
      state, [_full_batch(linear.CLIENT_A), _full_batch(linear.CLIENT_B)]
  ).state
  ends = [linear.sgd(W0, B0, [c], 2, GAMMA) for c in (linear.CLIENT_A, linear.CLIENT_B)]
  p = np.array([3.0, 2.0])
  delta = np.concatenate([
      W0 - sum(pi * e[0] for pi, e in zip(p, ends)) / p.sum(),
      [B0 - sum(pi * e[1] for pi, e in zip(p, ends)) / p.sum()],
  ])
  m = (1 - b1) * delta
  v = (1 - b2) * delta**2
  step = lr * np.sqrt(1 - b2) / (1 - b1) * m / (np.sqrt(v) + eps)
  expected = np.concatenate([W0, [B0]]) - step
  got_w, got_b = linear.unpack(process.get_model_weights(state))
  np.testing.assert_allclose(np.append(got_w, got_b), expected, rtol=1e-4)


def test_dp_aggregator_gives_dp_fed_avg():
  """TFF's DP-FedAvg aggregator at zero noise is deterministic: each
  client's K-step update clipped to the initial norm 0.1 (TFF's adaptive
  clipping starts there), the unweighted mean of the two, added at server
  lr 1."""
  process = algorithms.build_fed_avg(
      linear.model_fn,
      tff.learning.optimizers.build_sgdm(learning_rate=GAMMA),
      num_local_steps=2,
      model_aggregator=tff.learning.dp_aggregator(
          noise_multiplier=0.0, clients_per_round=2
      ),
  )
  state = _set(process, process.initialize(), W0, B0)
  out = process.next(
      state, [_full_batch(linear.CLIENT_A), _full_batch(linear.CLIENT_B)]
  )
  clipped = []
  for client in (linear.CLIENT_A, linear.CLIENT_B):
    w, b = linear.sgd(W0, B0, [client], 2, GAMMA)
    delta = np.append(w - W0, b - B0)
    norm = np.linalg.norm(delta)
    assert norm > 0.1  # Both updates are clipped: the clip is tested.
    clipped.append(delta * 0.1 / norm)
  expected = np.append(W0, B0) + np.mean(clipped, axis=0)
  got_w, got_b = linear.unpack(process.get_model_weights(out.state))
  np.testing.assert_allclose(np.append(got_w, got_b), expected, rtol=1e-5,
                             atol=1e-7)
  assert 'aggregator' in out.metrics


class _TwoClientsIterator(tff.program.FederatedDataSourceIterator):
  """Both linear clients every round. Holds no tf.data objects, so TFF's
  program logic can deep-copy and serialise it with the program state."""

  federated_type = tff.FederatedType(
      tff.SequenceType(tff.types.tensorflow_to_type(linear.input_spec())),
      tff.CLIENTS,
  )

  def select(self, k=None):
    assert k == 2
    return [_full_batch(linear.CLIENT_A), _full_batch(linear.CLIENT_B)]

  def to_bytes(self):
    return b''

  @classmethod
  def from_bytes(cls, buffer):
    return cls()


class _TwoClients(tff.program.FederatedDataSource):
  federated_type = _TwoClientsIterator.federated_type

  def iterator(self):
    return _TwoClientsIterator()


def test_runs_under_tff_program_logic(tmp_path):
  """TFF's own `train_model` drives the process with its managers."""
  process = algorithms.build_fed_avg(
      linear.model_fn,
      tff.learning.optimizers.build_sgdm(learning_rate=GAMMA),
      num_local_steps=2,
  )
  metrics_manager = tff.program.MemoryReleaseManager()
  state_manager = tff.program.FileProgramStateManager(str(tmp_path))
  initial_state = _set(process, process.initialize(), W0, B0)
  context = execution.create_program_context()
  with tff.framework.get_context_stack().install(context):
    asyncio.run(
        tff.learning.programs.train_model(
            train_process=process,
            initial_train_state=initial_state,
            train_data_source=_TwoClients(),
            train_per_round_clients=2,
            train_total_rounds=2,
            program_state_manager=state_manager,
            model_output_manager=tff.program.MemoryReleaseManager(),
            train_metrics_manager=metrics_manager,
            evaluation_manager=None,
            evaluation_periodicity=1,
        )
    )
  released = metrics_manager.values()
  assert sorted(released) == [1, 2]
  assert released[2]['client_work']['sgd_steps'] == 4
  assert asyncio.run(state_manager.get_versions())[-1] == 2


@pytest.mark.parametrize(
    'kwargs, error, match',
    [
        (dict(num_local_steps=0), ValueError, 'num_local_steps'),
        (dict(num_local_steps=1, model_aggregator=object()), TypeError, 'model_aggregator'),
        (dict(num_local_steps=1, server_optimizer_fn=tf.keras.optimizers.SGD), TypeError,
         'server_optimizer_fn'),
    ],
)
def test_an_argument_the_builder_cannot_honour_is_refused_naming_it(
    kwargs, error, match):
  kwargs.setdefault('client_optimizer_fn', tff.learning.optimizers.build_sgdm(0.1))
  with pytest.raises(error, match=match):
    algorithms.build_fed_avg(linear.model_fn, **kwargs)


def test_fed_adam_refuses_a_server_optimizer():
  with pytest.raises(TypeError, match='server_optimizer_fn'):
    algorithms.build_fed_adam(
        linear.model_fn,
        tff.learning.optimizers.build_sgdm(0.1),
        num_local_steps=1,
        server_optimizer_fn=tff.learning.optimizers.build_sgdm(1.0),
    )


def _client_deltas(w, b, steps, lr=GAMMA):
  """Each client's (x_t - x^K) on its one full batch, as (w, b) pairs."""
  out = []
  for client in (linear.CLIENT_A, linear.CLIENT_B):
    end_w, end_b = linear.sgd(w, b, [client], steps, lr)
    out.append((w - end_w, b - end_b))
  return out


def _both_clients():
  return [_full_batch(linear.CLIENT_A), _full_batch(linear.CLIENT_B)]


def _fed_sgd_by_hand(rates, steps_per_round):
  """FedSGD (seed 000 Alg. 1): x <- x - eta_t * (examples-weighted mean Delta)."""
  w, b = W0, B0
  sizes = np.array([len(linear.CLIENT_A[1]), len(linear.CLIENT_B[1])], float)
  for eta, k in zip(rates, steps_per_round):
    deltas = _client_deltas(w, b, k)
    p = sizes / sizes.sum()
    w = w - eta * sum(pi * d[0] for pi, d in zip(p, deltas))
    b = b - eta * sum(pi * d[1] for pi, d in zip(p, deltas))
  return w, b


@pytest.mark.parametrize('rate, expected_rates', [
    (0.5, [0.5, 0.5, 0.5]),
    (schedules.exponential_decay(0.5, 0.8), [0.5, 0.4, 0.32]),
])
def test_server_learning_rate_follows_its_schedule(rate, expected_rates):
  """x_{t+1} = x_t - eta_t Delta_t with eta_t = eta_0 d^t (seed 000 App. B)."""
  process = algorithms.build_fed_avg(
      linear.model_fn, tff.learning.optimizers.build_sgdm(learning_rate=GAMMA),
      num_local_steps=2, server_learning_rate=rate)
  start = _set(process, process.initialize(), W0, B0)
  state = runs.rounds(process, _both_clients(), 3, state=start)[-1].state
  want_w, want_b = _fed_sgd_by_hand(expected_rates, [2, 2, 2])
  got_w, got_b = linear.unpack(process.get_model_weights(state))
  np.testing.assert_allclose(got_w, want_w, rtol=1e-5)
  np.testing.assert_allclose(got_b, want_b, rtol=1e-5)


def test_theorem2_couples_the_server_rate_to_k():
  """Seed 000 Eq. 11: eta_t = 3 / ((b + t) phi_mu(gamma, K_t)), K_t decaying;
  t from 0 here (the seed's t = 1 is test_schedules')."""
  mu, b = 0.5, 2.0
  k_schedule = schedules.inverse_time_decay(4.0, b)   # K_t = ceil(4 / (2 + t))
  rate = schedules.theorem2_learning_rate(
      k_schedule, client_learning_rate=GAMMA, mu=mu, offset=b, first_round=0)
  steps = [2, 2, 1]
  phi = lambda k: (1 - (1 - GAMMA * mu) ** k) / GAMMA
  rates = [3 / ((b + t) * phi(k)) for t, k in enumerate(steps)]
  np.testing.assert_allclose(rate.values(3), rates, rtol=1e-12)
  process = algorithms.build_fed_avg(
      linear.model_fn, tff.learning.optimizers.build_sgdm(learning_rate=GAMMA),
      num_local_steps=k_schedule, server_learning_rate=rate)
  start = _set(process, process.initialize(), W0, B0)
  state = runs.rounds(process, _both_clients(), 3, state=start)[-1].state
  want_w, want_b = _fed_sgd_by_hand(rates, steps)
  got_w, got_b = linear.unpack(process.get_model_weights(state))
  np.testing.assert_allclose(got_w, want_w, rtol=1e-5)
  np.testing.assert_allclose(got_b, want_b, rtol=1e-5)


def test_server_rate_schedules_that_read_the_loss_are_refused():
  with pytest.raises(ValueError, match='reads the client loss'):
    algorithms.build_fed_avg(
        linear.model_fn, tff.learning.optimizers.build_sgdm(learning_rate=GAMMA),
        num_local_steps=1,
        server_learning_rate=schedules.loss_ratio(1.0))


def test_seed000_adam_equals_algorithm_3():
  """Two rounds of seed 000 App. B Alg. 3 in NumPy: uniform mean q_t, bias-
  corrected eta_t, eps inside the square root (TFF's Adam differs); beta_1
  0.7, not its default 0.9."""
  alpha, b1, b2, eps, k = 0.3, 0.7, 0.999, 1e-2, 2
  built = {
      variant: algorithms.build_fed_adam(
          linear.model_fn,
          tff.learning.optimizers.build_sgdm(learning_rate=GAMMA),
          num_local_steps=k, server_learning_rate=alpha, beta_1=b1,
          epsilon=eps, beta_2=b2, adam=variant)
      for variant in ('seed000', 'tff')}
  got = {}
  for variant, process in built.items():
    start = _set(process, process.initialize(), W0, B0)
    state = runs.rounds(process, _both_clients(), 2, state=start)[-1].state
    got[variant] = np.append(*linear.unpack(process.get_model_weights(state)))
  x = np.append(W0, B0)
  m = v = np.zeros(3)
  for t in (1, 2):
    deltas = _client_deltas(x[:2], x[2], k)
    q = np.mean([np.append(dw, db) for dw, db in deltas], axis=0)  # line 8
    m = b1 * m + (1 - b1) * q
    v = b2 * v + (1 - b2) * q ** 2
    eta = alpha * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    x = x - eta * m / np.sqrt(v + eps)
  np.testing.assert_allclose(got['seed000'], x, rtol=2e-5)
  assert np.max(np.abs(got['tff'] - x)) > 1e-3  # eps outside, NUM_EXAMPLES.


def _rows(client):
  x, y = client
  return [([xi], [yi]) for xi, yi in zip(x, y)]


@pytest.mark.parametrize('groups', [None, client_groups.ClientGroups()])
def test_dataset_size_weighting(groups):
  """p_i = |D_i| (seed 000 Alg. 1 line 7): batch 1, K = 2, so both clients
  process 2 examples, but A holds 3 and B 2."""
  process = algorithms.build_fed_avg(
      linear.model_fn, tff.learning.optimizers.build_sgdm(learning_rate=GAMMA),
      num_local_steps=2, client_weighting=templates.DATASET_SIZE,
      client_groups=groups)
  cohort = [linear.dataset(*c, batch_size=1)
            for c in (linear.CLIENT_A, linear.CLIENT_B)]
  data = group_data.group_datasets(cohort, 1) if groups else cohort
  state = _set(process, process.initialize(), W0, B0)
  state = process.next(state, data).state
  ends = [linear.sgd(W0, B0, _rows(c), 2, GAMMA)
          for c in (linear.CLIENT_A, linear.CLIENT_B)]
  p = np.array([3.0, 2.0]) / 5.0
  got_w, got_b = linear.unpack(process.get_model_weights(state))
  np.testing.assert_allclose(got_w, sum(pi * e[0] for pi, e in zip(p, ends)),
                             rtol=1e-5)
  np.testing.assert_allclose(got_b, sum(pi * e[1] for pi, e in zip(p, ends)),
                             rtol=1e-5)
