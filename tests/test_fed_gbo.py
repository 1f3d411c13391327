"""FedGBO, Mimelite, MFL and AdaptiveFedOpt against hand-computed rounds.

The reference below runs seed 003's algorithms in NumPy on the tiny linear
model of `tests.linear` (parameters theta = [w1, w2, b]), with Table 1's
steps written out again here, independently of `tff_mixed.optimizers`.
"""

import collections

import numpy as np
import pytest
import tensorflow_federated as tff

from tests import linear
from tests import runs
from tff_mixed import algorithms
from tff_mixed import optimizers
from tff_mixed import schedules
from tff_mixed.metrics import adaptive_fl_cost

THETA0 = np.array([0.5, -0.25, 0.1])
LR = 0.1
K = 3
FLOPS_PER_EXAMPLE = 10.0
NUM_PARAMETERS = 3
HPARAMS = {
    'sgdm': dict(beta=0.6),
    'rmsprop': dict(beta=0.8, epsilon=0.01),
    'adam': dict(beta_1=0.6, beta_2=0.8, epsilon=0.01),
}
UNIFORM = tff.learning.ClientWeighting.UNIFORM

# Client A in minibatches of 2 (2 + 1 examples), client B in one batch.
CLIENTS = [(linear.CLIENT_A, 2), (linear.CLIENT_B, None)]


def _batches(client, batch_size):
  x, y = np.asarray(client[0], np.float64), np.asarray(client[1], np.float64)
  size = batch_size or len(x)
  return [(x[i:i + size], y[i:i + size]) for i in range(0, len(x), size)]


def _datasets(clients=CLIENTS):
  return [linear.dataset(*client, batch_size=b) for client, b in clients]


def _grad(theta, x, y):
  gw, gb = linear.grad(theta[:2], theta[2], x, y)
  return np.append(gw, gb)


# Seed 003 Table 1 in NumPy; statistics are dicts of arrays.
def _init(name):
  stats = {}
  if name in ('sgdm', 'adam'):
    stats['m'] = np.zeros(3)
  if name in ('rmsprop', 'adam'):
    stats['v'] = np.ones(3)
  return stats


def _update(name, s, g, lr):
  h = HPARAMS[name]
  if name == 'sgdm':
    return -lr * (h['beta'] * s['m'] + (1 - h['beta']) * g)
  if name == 'rmsprop':
    return -lr * g / (np.sqrt(s['v']) + h['epsilon'])
  m = h['beta_1'] * s['m'] + (1 - h['beta_1']) * g
  return -lr * m / (np.sqrt(s['v']) + h['epsilon'])


def _track(name, s, g):
  h = HPARAMS[name]
  s = dict(s)
  if name == 'sgdm':
    s['m'] = h['beta'] * s['m'] + (1 - h['beta']) * g
  if name == 'rmsprop':
    s['v'] = h['beta'] * s['v'] + (1 - h['beta']) * g * g
  if name == 'adam':
    s['m'] = h['beta_1'] * s['m'] + (1 - h['beta_1']) * g
    s['v'] = h['beta_2'] * s['v'] + (1 - h['beta_2']) * g * g
  return s


def _inverse(name, s, delta, k, lr):
  h = HPARAMS[name]
  if name == 'sgdm':
    return (delta / (lr * k) - h['beta'] * s['m']) / (1 - h['beta'])
  scaled = delta * (np.sqrt(s['v']) + h['epsilon']) / (lr * k)
  if name == 'rmsprop':
    return scaled
  return (scaled - h['beta_1'] * s['m']) / (1 - h['beta_1'])


def _moving_step(name, s, g, lr):
  s = _track(name, s, g)
  if name == 'sgdm':
    return -lr * s['m'], s
  eps = HPARAMS[name]['epsilon']
  numerator = g if name == 'rmsprop' else s['m']
  return -lr * numerator / (np.sqrt(s['v']) + eps), s


def reference_round(algorithm, name, theta, s, k, lr, clients=CLIENTS, *,
                    by_examples=False, server_lr=1.0):
  """One round of `algorithm`; returns (theta, s, mean client gradient).

  `by_examples`: means weighted by the examples each client processed;
  `server_lr`: the server takes x - server_lr * Delta (SGD).
  """
  ends, client_stats, full_gradients, step_gradients = [], [], [], []
  weights = []
  for client, batch_size in clients:
    batches = _batches(client, batch_size)
    weights.append(sum(len(batches[step % len(batches)][0])
                       for step in range(k)) if by_examples else 1.0)
    x_all, y_all = (np.asarray(client[0]), np.asarray(client[1]))
    full_gradients.append(_grad(theta, x_all, y_all))
    y, local = theta.copy(), dict(s)
    for step in range(k):
      g = _grad(y, *batches[step % len(batches)])
      step_gradients.append(g)
      if algorithm == 'mfl':
        change, local = _moving_step(name, local, g, lr)
      else:
        change = _update(name, s, g, lr)
      y = y + change
    ends.append(y)
    client_stats.append(local)
  mean = lambda values: np.average(values, axis=0, weights=weights)
  delta = theta - mean(ends)
  if algorithm == 'fed_gbo':
    s = _track(name, s, _inverse(name, s, delta, k, lr))
  elif algorithm == 'mimelite':
    s = _track(name, s, mean(full_gradients))
  else:
    s = {key: mean([c[key] for c in client_stats]) for key in s}
  return theta - server_lr * delta, s, np.mean(step_gradients, axis=0)


def _theta(process, state):
  w, b = linear.unpack(process.get_model_weights(state))
  return np.append(w, b)


def _start(process):
  return process.set_model_weights(
      process.initialize(), linear.weights(THETA0[:2], THETA0[2]))


def _stats(state):
  opt_state = state['client_work']['optimizer_state']
  return {key: np.concatenate([np.ravel(t) for t in value])
          for key, value in opt_state.items() if key != 'learning_rate'}


BUILDERS = {
    'fed_gbo': algorithms.build_fed_gbo,
    'mimelite': algorithms.build_mimelite,
    'mfl': algorithms.build_mfl,
}
CASES = [(a, o) for a in BUILDERS for o in HPARAMS]


@pytest.fixture(scope='module')
def fed_avg_uniform():
  return algorithms.build_fed_avg(
      linear.model_fn, tff.learning.optimizers.build_sgdm(learning_rate=LR),
      num_local_steps=K, client_weighting=UNIFORM,
      flops_per_step=lambda b: adaptive_fl_cost.step_flops(
          b, flops_per_example=FLOPS_PER_EXAMPLE,
          num_parameters=NUM_PARAMETERS, ops=2))


@pytest.fixture(scope='module')
def trained():
  """Two rounds of every (algorithm, optimizer): states and measurements."""
  results = {}
  for algorithm, name in CASES:
    process = BUILDERS[algorithm](
        linear.model_fn, optimizers.build(name, LR, **HPARAMS[name]),
        num_local_steps=K, flops_per_example=FLOPS_PER_EXAMPLE)
    start = _start(process)
    outputs = runs.rounds(process, _datasets(), 2, state=start)
    states = [start] + [output.state for output in outputs]
    metrics = [output.metrics for output in outputs]
    results[algorithm, name] = (process, states, metrics)
  return results


@pytest.mark.parametrize('algorithm, name', CASES)
def test_two_rounds_match_the_hand_computed_run(trained, algorithm, name):
  process, states, _ = trained[algorithm, name]
  theta, s = THETA0, _init(name)
  for state in states[1:]:
    theta, s, _ = reference_round(algorithm, name, theta, s, K, LR)
    np.testing.assert_allclose(_theta(process, state), theta, rtol=1e-5,
                               atol=1e-6)
    got = _stats(state)
    assert sorted(got) == sorted(s)
    for key in s:
      np.testing.assert_allclose(got[key], s[key], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('name', ['sgdm', 'adam'])
def test_inverse_step_recovers_the_exact_mean_client_gradient(trained, name):
  """From m = 0 one round leaves m = (1 - beta) g~, with g~ the mean over
  clients and steps of the (full-batch) gradients the clients took."""
  full_batch = [(linear.CLIENT_A, None), (linear.CLIENT_B, None)]
  process = trained['fed_gbo', name][0]
  state = process.next(_start(process), _datasets(full_batch)).state
  _, _, mean_gradient = reference_round(
      'fed_gbo', name, THETA0, _init(name), K, LR, full_batch)
  beta = HPARAMS[name].get('beta', HPARAMS[name].get('beta_1'))
  np.testing.assert_allclose(_stats(state)['m'] / (1 - beta), mean_gradient,
                             rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('algorithm, name', CASES)
def test_bytes_follow_table_2(trained, fed_avg_uniform, algorithm, name):
  """Per client, beyond FedAvg's: s down; MFL s up, Mimelite a gradient up."""
  metrics = trained[algorithm, name][2][0]['client_work']
  base = fed_avg_uniform.next(_start(fed_avg_uniform), _datasets()).metrics
  base = base['client_work']
  fedavg = adaptive_fl_cost.communicated_elements('fedavg', NUM_PARAMETERS)
  want = adaptive_fl_cost.communicated_elements(
      algorithm, NUM_PARAMETERS, optimizers.get(name, **HPARAMS[name]))
  for direction in ('download', 'upload'):
    key = f'bytes_{direction}ed_per_client'
    extra = 4 * (want[direction] - fedavg[direction])
    assert metrics[key] - base[key] == extra
  statistics = 2 if name == 'adam' else 1
  assert want['download'] == NUM_PARAMETERS * (1 + statistics)
  assert want['upload'] == {'fed_gbo': 1, 'mimelite': 2,
                            'mfl': 1 + statistics}[algorithm] * NUM_PARAMETERS


@pytest.mark.parametrize('algorithm, name', CASES)
def test_client_flops_follow_eq_22(trained, algorithm, name):
  metrics = trained[algorithm, name][2][0]['client_work']
  adaptive = optimizers.get(name, **HPARAMS[name])
  per_client = []
  for client, batch_size in CLIENTS:
    sizes = [len(b[1]) for b in _batches(client, batch_size)]
    processed = sum(sizes[k % len(sizes)] for k in range(K))
    per_client.append(adaptive_fl_cost.round_flops(
        algorithm, num_local_steps=K, batch_size=processed / K,
        flops_per_example=FLOPS_PER_EXAMPLE, num_parameters=NUM_PARAMETERS,
        optimizer=adaptive, num_examples=len(client[1])))
  assert metrics['client_flops_per_client'] == pytest.approx(
      np.mean(per_client), rel=1e-6)


def test_mimelite_metrics_count_only_the_training_steps(trained):
  metrics = trained['mimelite', 'sgdm'][2][0]['client_work']
  # K = 3 steps: client A reads 2 + 1 + 2 examples, client B 2 + 2 + 2.
  assert metrics['train']['num_examples'] == 11
  assert metrics['sgd_steps'] == 2 * K


@pytest.mark.parametrize('optimizer', [
    optimizers.sgdm(beta=0.0),
    optimizers.rmsprop(beta=1.0, epsilon=0.0),
    optimizers.adam(beta_1=0.0, beta_2=1.0, epsilon=0.0),
], ids=['sgdm_beta_0', 'rmsprop_v_frozen_at_1', 'adam_beta_1_0_v_frozen'])
def test_fed_gbo_reduces_to_fed_avg(fed_avg_uniform, optimizer):
  fed_gbo = algorithms.build_fed_gbo(
      linear.model_fn, optimizers.build(optimizer, LR), num_local_steps=K)
  a = runs.rounds(fed_gbo, _datasets(), 2, state=_start(fed_gbo))[-1].state
  b = runs.rounds(fed_avg_uniform, _datasets(), 2,
                  state=_start(fed_avg_uniform))[-1].state
  np.testing.assert_allclose(_theta(fed_gbo, a), _theta(fed_avg_uniform, b),
                             rtol=1e-6, atol=1e-7)


def test_fed_gbo_inverse_uses_the_rounds_k_and_learning_rate():
  """K = 3 then 2 and eta = 0.1 then 0.05 (schedules)."""
  process = algorithms.build_fed_gbo(
      linear.model_fn, optimizers.build_sgdm(LR, beta=0.6),
      client_learning_rate=schedules.exponential_decay(LR, 0.5),
      num_local_steps=schedules.exponential_decay(3, 0.5))
  state = _start(process)
  theta, s = THETA0, _init('sgdm')
  for k, lr in ((3, LR), (2, LR / 2)):
    output = process.next(state, _datasets())
    state = output.state
    assert output.metrics['client_work']['num_local_steps'] == k
    theta, s, _ = reference_round('fed_gbo', 'sgdm', theta, s, k, lr)
    np.testing.assert_allclose(_theta(process, state), theta, rtol=1e-5)
    np.testing.assert_allclose(_stats(state)['m'], s['m'], rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize('algorithm', BUILDERS)
def test_server_optimizer_weighting_and_rate_schedule(algorithm):
  """Server SGD at 0.5 on the weighted mean update, clients weighted by the
  examples they processed (5 and 6), eta = 0.1 then 0.05: two rounds by
  hand (the statistics' means with the same weights)."""
  process = BUILDERS[algorithm](
      linear.model_fn, optimizers.build('adam', LR, **HPARAMS['adam']),
      tff.learning.optimizers.build_sgdm(learning_rate=0.5),
      client_learning_rate=schedules.exponential_decay(LR, 0.5),
      client_weighting=tff.learning.ClientWeighting.NUM_EXAMPLES,
      num_local_steps=K)
  state = _start(process)
  theta, s = THETA0, _init('adam')
  for lr in (LR, LR / 2):
    state = process.next(state, _datasets()).state
    theta, s, _ = reference_round(algorithm, 'adam', theta, s, K, lr,
                                  by_examples=True, server_lr=0.5)
    np.testing.assert_allclose(_theta(process, state), theta, rtol=1e-5,
                               atol=1e-6)
    for key in s:
      np.testing.assert_allclose(_stats(state)[key], s[key], rtol=1e-5,
                                 atol=1e-6)


def test_empty_clients_neither_move_the_model_nor_the_statistics(trained):
  process = trained['fed_gbo', 'adam'][0]
  empty = linear.dataset(np.zeros((0, 2)), np.zeros((0,)), batch_size=2)
  start = _start(process)
  with_empty = process.next(start, [empty] + _datasets()).state
  without = process.next(start, _datasets()).state
  np.testing.assert_allclose(_theta(process, with_empty),
                             _theta(process, without), rtol=1e-6)
  nobody = process.next(start, [empty, empty]).state
  np.testing.assert_array_equal(_theta(process, nobody), _theta(process, start))
  for key, value in _stats(nobody).items():
    np.testing.assert_array_equal(value, _stats(start)[key])


@pytest.mark.parametrize('name', sorted(HPARAMS))
def test_adaptive_fed_opt_matches_the_hand_computed_server(name):
  """Clients: K SGD steps; server: seed 003's optimizer on the mean update
  (statistics tracked, then the step at the new statistics: Table 1 with
  m = 0, v = 1, no bias correction)."""
  server_lr = 0.5
  process = algorithms.build_adaptive_fed_opt(
      linear.model_fn, tff.learning.optimizers.build_sgdm(learning_rate=LR),
      optimizer=name, server_learning_rate=server_lr, num_local_steps=K,
      **HPARAMS[name])
  theta, s = THETA0, _init(name)
  for output in runs.rounds(process, _datasets(), 2, state=_start(process)):
    state = output.state
    ends = []
    for client, batch_size in CLIENTS:
      w, b = linear.sgd(theta[:2], theta[2], _batches(client, batch_size), K,
                        LR)
      ends.append(np.append(w, b))
    step, s = _moving_step(name, s, theta - np.mean(ends, axis=0), server_lr)
    theta = theta + step
    np.testing.assert_allclose(_theta(process, state), theta, rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize('call, error, message', [
    (lambda: algorithms.build_fed_gbo(
        linear.model_fn, lambda: optimizers.build('lamb', LR),
        num_local_steps=K), ValueError, 'optimizer must be one of'),
    (lambda: algorithms.build_mfl(
        linear.model_fn, lambda: optimizers.build('adam', LR, beta=0.9),
        num_local_steps=K), ValueError, 'adam has no hyper-parameter beta'),
    (lambda: algorithms.build_mimelite(
        linear.model_fn, optimizers.build_sgdm(0.0), num_local_steps=K),
     ValueError, 'learning_rate must be > 0'),
    (lambda: algorithms.build_fed_gbo(
        linear.model_fn, optimizers.build_sgdm(LR), num_local_steps=0),
     ValueError, 'num_local_steps must be >= 1'),
    (lambda: algorithms.build_fed_gbo(
        linear.model_fn, optimizers.build_sgdm(LR), num_local_steps=K,
        flops_per_example=-1.0), ValueError, 'flops_per_example must be'),
    (lambda: algorithms.build_fed_gbo(
        linear.model_fn, tff.learning.optimizers.build_adam(LR),
        num_local_steps=K), TypeError,
     'client_optimizer_fn must be a tff_mixed.optimizers optimizer'),
    (lambda: algorithms.build_adaptive_fed_opt(
        linear.model_fn, tff.learning.optimizers.build_sgdm(0.1),
        server_learning_rate=1.0, num_local_steps=K,
        server_optimizer_fn=tff.learning.optimizers.build_sgdm(1.0)),
     TypeError, 'build_adaptive_fed_opt sets server_optimizer_fn'),
])
def test_argument_errors(call, error, message):
  with pytest.raises(error, match=message):
    call()


def test_cost_formulas_by_hand():
  adam = optimizers.adam()
  # Eq. 22 with K 10, B 32, fb 300, |x| 1000, n 500.
  assert adaptive_fl_cost.round_flops(
      'fedavg', num_local_steps=10, batch_size=32, flops_per_example=300,
      num_parameters=1000) == 10 * (32 * 300 + 2 * 1000)
  assert adaptive_fl_cost.round_flops(
      'fed_gbo', num_local_steps=10, batch_size=32, flops_per_example=300,
      num_parameters=1000, optimizer=adam) == 10 * (32 * 300 + 8 * 1000)
  assert adaptive_fl_cost.round_flops(
      'mfl', num_local_steps=10, batch_size=32, flops_per_example=300,
      num_parameters=1000, optimizer=adam) == 10 * (32 * 300 + 11 * 1000)
  assert adaptive_fl_cost.round_flops(
      'mimelite', num_local_steps=10, batch_size=32, flops_per_example=300,
      num_parameters=1000, optimizer=adam, num_examples=500) == (
          10 * (32 * 300 + 8 * 1000) + 500 * 300)
  assert adaptive_fl_cost.communicated_elements('mfl', 10, adam) == (
      collections.OrderedDict(download=30, upload=30))
  with pytest.raises(ValueError, match='fed_gbo needs its AdaptiveOptimizer'):
    adaptive_fl_cost.ops_per_parameter('fed_gbo')
  with pytest.raises(ValueError, match='algorithm must be one of'):
    adaptive_fl_cost.ops_per_parameter('scaffold')
