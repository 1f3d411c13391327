"""Seed 002's generators: regression (Eq. 2.12), Synthetic(gamma, epsilon)
and SyntheticSeq(K, epsilon); one-shot averaging; the FedAvg = centralised
GD identity behind the divergence experiment."""

import numpy as np
import pytest
import tensorflow_federated as tff

from tasks.synthetic_regression import data as regression
from tasks.synthetic_seq import data as seq_data
from tasks.synthetic_seq import experiment
from tasks.synthetic_seq import task as seq_task
from tff_mixed import algorithms
from tff_mixed.metrics import niid


def test_regression_samples_follow_eq_2_12():
  clients = (regression.RegressionClient(2.0, 3.0, -1.5, 4.0),
             regression.RegressionClient(-1.0, 0.5, 2.0, 0.0))
  samples = regression.sample_regression(clients, num_points=20_000, seed=1)
  for client, (x, y) in zip(clients, samples):
    assert x.mean() == pytest.approx(client.mu, abs=0.05)
    assert x.std() == pytest.approx(client.sigma, rel=0.02)
    alpha, beta = regression.least_squares([(x, y)])
    assert alpha == pytest.approx(client.alpha, abs=0.02)
    assert beta == pytest.approx(client.beta, abs=0.05)
    residual = y - client.alpha * x - client.beta  # The N(0, 1) noise.
    assert residual.std() == pytest.approx(1.0, rel=0.02)
  assert len(samples[0][0]) == 20_000


def test_least_squares_is_the_pooled_fit_of_eq_2_17():
  rng = np.random.default_rng(0)
  parts = [(rng.normal(size=7), rng.normal(size=7)) for _ in range(2)]
  x = np.concatenate([p[0] for p in parts])
  y = np.concatenate([p[1] for p in parts])
  np.testing.assert_allclose(regression.least_squares(parts),
                             np.polyfit(x, y, 1), rtol=1e-10)


def test_one_shot_divergence_by_hand():
  """Eq. 2.19 recomputed from the same draws: the pooled least-squares line
  by `np.polyfit`, against the average of the clients' generative lines
  (Eq. 2.14) or of their own fits (`fitted=True`)."""
  for clients in (regression.EQ_2_20, regression.EQ_2_21,
                  regression.with_client_1(regression.EQ_2_23, alpha=10.0,
                                           beta=-10.0)):
    data = regression.sample_regression(clients, num_points=500, seed=7)
    x = np.concatenate([d[0] for d in data])
    y = np.concatenate([d[1] for d in data])
    pooled = np.polyfit(x, y, 1)  # (alpha*, beta*)
    generative = np.mean([[c.alpha, c.beta] for c in clients], axis=0)
    fitted = np.mean([np.polyfit(*d, 1) for d in data], axis=0)
    assert regression.one_shot_divergence(
        clients, num_points=500, seed=7) == pytest.approx(
            np.linalg.norm(pooled - generative), rel=1e-9)
    assert regression.one_shot_divergence(
        clients, num_points=500, seed=7, fitted=True) == pytest.approx(
            np.linalg.norm(pooled - fitted), rel=1e-9)
  # Feature shift with concept drift: client 2's x ~ N(10, 20) dominates the
  # pooled fit, so it is near client 2's line (-10, 10) and Omega near the
  # distance from there to the average (0, 0), sqrt(200).
  shifted = regression.with_client_1(regression.EQ_2_23, alpha=10.0,
                                     beta=-10.0)
  assert regression.one_shot_divergence(
      shifted, num_points=10_000) == pytest.approx(np.sqrt(200.0), rel=0.05)


def test_synthetic_classification_shapes_and_roles():
  clients = regression.synthetic_classification(0.0, 0.0, num_clients=4,
                                                num_samples=[5, 6, 7, 8])
  assert [c.x.shape for c in clients] == [(5, 60), (6, 60), (7, 60), (8, 60)]
  assert all(c.y.min() >= 0 and c.y.max() < 10 for c in clients)
  # epsilon spreads the clients' feature means, gamma does not.
  def spread_of_feature_means(gamma, epsilon):
    clients = regression.synthetic_classification(
        gamma, epsilon, num_clients=30, num_samples=200, seed=2)
    return np.std([c.x.mean() for c in clients])
  assert spread_of_feature_means(0.0, 10.0) > 3 * spread_of_feature_means(
      10.0, 0.0)
  with pytest.raises(ValueError, match='gamma must be >= 0'):
    regression.synthetic_classification(-1.0, 0.0)


def _measures(k, epsilon, seeds=3):
  values = [niid.federation_measure(
      seq_data.synthetic_seq(k, epsilon, seed=s), 100) for s in range(seeds)]
  return (np.mean([v.feature for v in values]),
          np.mean([v.conditional for v in values]))


def test_synthetic_seq_shapes_start_tokens_and_seed():
  clients = seq_data.synthetic_seq(5, 0.0, seed=4)
  assert len(clients) == 20
  assert all(c.shape == (40, 20) and c.dtype == np.int32 for c in clients)
  assert all(c.min() >= 0 and c.max() < 100 for c in clients)
  # Start tokens: drawn from [1..K] per client (Alg. 3, the default), or
  # client c mod K + 1 (shared_base).
  assert [int(c[0, 0]) for c in clients] == [
      seq_data.client_parameters(c, 5, 0.0, seed=4)[0] for c in range(20)]
  shared = seq_data.synthetic_seq(5, 0.0, seed=4, reading='shared_base')
  assert [int(c[0, 0]) for c in shared[:6]] == [1, 2, 3, 4, 5, 1]
  assert all((c[:, 0] == c[0, 0]).all() for c in clients + shared)
  again = seq_data.synthetic_seq(5, 0.0, seed=4)
  assert all((a == b).all() for a, b in zip(clients, again))
  other = seq_data.synthetic_seq(5, 0.0, seed=5)
  assert any((a != b).any() for a, b in zip(clients, other))


def test_synthetic_seq_readings_draw_what_their_docstrings_say():
  """shared_base: base + N(0, eps) and start token c mod K + 1; algorithm_3:
  N(0, eps) alone (the base at eps = 0) and a start token drawn from
  [1..K]."""
  config = seq_data.SyntheticSeqConfig()
  base = seq_data._weights(np.random.default_rng([3, 0]), config, 1.0)  # pylint: disable=protected-access
  starts = []
  for client in range(20):
    noise = seq_data._weights(  # pylint: disable=protected-access
        np.random.default_rng([3, 1, client]), config, np.sqrt(2.0))
    start, w, _ = seq_data.client_parameters(client, 4, 2.0, seed=3,
                                             reading='shared_base')
    assert start == client % 4 + 1
    for name in base:
      np.testing.assert_array_equal(w[name], base[name] + noise[name])
    start, w, _ = seq_data.client_parameters(client, 4, 2.0, seed=3)
    explicit = seq_data.client_parameters(client, 4, 2.0, seed=3,
                                          reading='algorithm_3')
    assert start == explicit[0]  # The default.
    for name in base:
      np.testing.assert_array_equal(w[name], explicit[1][name])
    for name in base:
      np.testing.assert_array_equal(w[name], noise[name])
    _, w0, _ = seq_data.client_parameters(client, 4, 0.0, seed=3,
                                          reading='algorithm_3')
    assert all((w0[name] == base[name]).all() for name in base)
    starts.append(start)
  assert set(starts) <= {1, 2, 3, 4} and len(set(starts)) > 1
  assert starts != [c % 4 + 1 for c in range(20)]  # Sampled, not assigned.
  clients = seq_data.synthetic_seq(4, 2.0, seed=3, reading='algorithm_3')
  assert [int(c[0, 0]) for c in clients] == starts
  assert all((c[:, 0] == c[0, 0]).all() for c in clients)
  with pytest.raises(ValueError, match='reading must be one of'):
    seq_data.synthetic_seq(1, 0.0, reading='alg3')


def test_synthetic_seq_feature_shift_grows_with_k():
  sigma_x = [_measures(k, 0.0)[0] for k in (1, 2, 5, 10)]
  assert sigma_x == sorted(sigma_x) and sigma_x[-1] > 1.5 * sigma_x[0]


def test_synthetic_seq_conditional_spread_grows_with_epsilon():
  sigma = {eps: _measures(1, eps)[1] for eps in (0.0, 1.0, 5.0)}
  assert sigma[0.0] < sigma[1.0] < sigma[5.0]


def test_synthetic_seq_epsilon_zero_gives_one_distribution():
  """With K = 1 and epsilon = 0 every client samples the same RNN from the
  same start token: clients differ only by sampling."""
  clients = seq_data.synthetic_seq(1, 0.0, seed=0)
  assert len({int(c[0, 0]) for c in clients}) == 1
  # The generator is deterministic at epsilon = 0: the first step's
  # distribution is the same for all, so first-step token frequencies agree
  # up to sampling noise.
  first = np.array([np.bincount(c[:, 1], minlength=100) for c in clients])
  spread = first.std(axis=0).max()
  assert spread < 0.5 * first.mean(axis=0).max()


@pytest.mark.parametrize('call, message', [
    (lambda: seq_data.synthetic_seq(0, 0.0), 'num_clusters must be an int in [1, 20]'),
    (lambda: seq_data.synthetic_seq(1, -1.0), 'epsilon must be >= 0'),
    (lambda: seq_data.SyntheticSeqConfig(sequence_length=1),
     'sequence_length must be an int >= 2'),
])
def test_generator_errors(call, message):
  with pytest.raises(ValueError) as info:
    call()
  assert message in str(info.value)


def test_one_local_step_fed_avg_is_centralised_gradient_descent():
  """Equal full-batch clients: E = 1 FedAvg takes the centralised GD step,
  so the divergence experiment's Omega is 0 there (and the plain-TF loss
  equals the Keras model's)."""
  config = seq_data.SyntheticSeqConfig(num_clients=4, num_sequences=6,
                                       sequence_length=6, vocab_size=12)
  clients = seq_data.synthetic_seq(2, 1.0, config=config, seed=1)
  pooled = np.concatenate(clients)
  weights = seq_task.initial_weights(config, seed=3)
  process = algorithms.build_fed_avg(
      seq_task.model_fn_for(config), tff.learning.optimizers.build_sgdm(0.5),
      num_local_steps=1)
  pooled_loss = experiment.PooledLoss(pooled)
  fed = experiment.fed_avg_losses(process, clients, weights, pooled_loss, 3)
  central = experiment.central_losses(pooled, weights, 0.5, 3)
  np.testing.assert_allclose(fed, central[1:], rtol=1e-5)
  assert central[0] == pytest.approx(pooled_loss(weights), rel=1e-6)
  assert central[3] < central[0]
