"""FedProx (`build_fed_prox`): the paper's proximal step, TFF's reading,
mu = 0 as FedAvg, and bad input."""

import numpy as np
import pytest
import tensorflow_federated as tff

from tests import linear
from tests import runs
from tff_mixed import algorithms
from tff_mixed.algorithms import fed_avg
from tff_mixed.templates import client_extensions

SGD = tff.learning.optimizers.build_sgdm
LR, MU, K = 0.1, 2.0, 3
CLIENTS = (linear.CLIENT_A, linear.CLIENT_B)


def _data(batch_size=2):
  return [linear.dataset(x, y, batch_size=batch_size) for x, y in CLIENTS]


def _numpy_round(w, b, mu, steps, batch_size=2, server_lr=1.0):
  """One FedProx round in float64: each client K SGD steps on
  f_i + (mu / 2) ||x - x_t||^2 (batches cycled), the example-weighted mean
  of the updates, server SGD."""
  updates, weights = [], []
  for x, y in CLIENTS:
    x, y = np.asarray(x), np.asarray(y)
    batches = [(x[i:i + batch_size], y[i:i + batch_size])
               for i in range(0, len(x), batch_size)]
    cw, cb, seen = w.copy(), b, 0
    for k in range(steps):
      bx, by = batches[k % len(batches)]
      gw, gb = linear.grad(cw, cb, bx, by)
      gw, gb = gw + mu * (cw - w), gb + mu * (cb - b)
      cw, cb, seen = cw - LR * gw, cb - LR * gb, seen + len(bx)
    updates.append((w - cw, b - cb))
    weights.append(seen)
  mean_w = sum(n * u[0] for n, u in zip(weights, updates)) / sum(weights)
  mean_b = sum(n * u[1] for n, u in zip(weights, updates)) / sum(weights)
  return w - server_lr * mean_w, b - server_lr * mean_b


def _trained(process, rounds=2, data=None):
  """(w, b) after `rounds` rounds on `data` (default: both clients)."""
  state = runs.rounds(process, data or _data(), rounds)[-1].state
  return linear.unpack(process.get_model_weights(state))


def test_two_rounds_are_the_papers_proximal_steps():
  w, b = np.zeros(2), 0.0
  for _ in range(2):
    w, b = _numpy_round(w, b, MU, K, server_lr=0.5)
  got_w, got_b = _trained(algorithms.build_fed_prox(
      linear.model_fn, SGD(LR), SGD(0.5), proximal_strength=MU,
      num_local_steps=K))
  np.testing.assert_allclose(got_w, w, rtol=1e-5)
  np.testing.assert_allclose(got_b, b, rtol=1e-5)
  plain_w, _ = _numpy_round(np.zeros(2), 0.0, 0.0, K, server_lr=0.5)
  assert not np.allclose(_numpy_round(np.zeros(2), 0.0, MU, K,
                                      server_lr=0.5)[0], plain_w)


def test_no_proximal_strength_is_fed_avg():
  kwargs = dict(num_local_steps=K, client_weighting=(
      tff.learning.ClientWeighting.UNIFORM))
  prox = _trained(algorithms.build_fed_prox(
      linear.model_fn, SGD(LR), proximal_strength=0.0, **kwargs))
  avg = _trained(algorithms.build_fed_avg(linear.model_fn, SGD(LR), **kwargs))
  np.testing.assert_array_equal(prox[0], avg[0])
  assert prox[1] == avg[1]


def test_tffs_fed_prox_is_the_term_with_the_other_sign():
  """TFF 0.87's `build_weighted_fed_prox` (one epoch a round: K = the
  client's batches) adds mu (x_t - x): the same as ours with -mu, and not
  the paper's."""
  data = _data(batch_size=1)  # 3 and 2 batches: K = 3 cycles client B.
  tff_process = tff.learning.algorithms.build_weighted_fed_prox(
      linear.model_fn, proximal_strength=MU, client_optimizer_fn=SGD(LR),
      server_optimizer_fn=SGD(1.0))
  tff_w, tff_b = _trained(tff_process, rounds=1, data=[data[0]])
  reading = fed_avg._build_fed_avg(  # pylint: disable=protected-access
      linear.model_fn, SGD(LR), None, num_local_steps=3,
      client_learning_rate=None, server_learning_rate=None,
      client_weighting=None, model_distributor=None, model_aggregator=None,
      metrics_aggregator=None, flops_per_step=None, flops_per_example=None,
      client_groups=None,
      extensions=[client_extensions.ProximalTerm(-MU)])
  ours_w, ours_b = _trained(reading, rounds=1, data=[data[0]])
  np.testing.assert_allclose(ours_w, tff_w, rtol=1e-6)
  np.testing.assert_allclose(ours_b, tff_b, rtol=1e-6)
  paper_w, _ = _trained(algorithms.build_fed_prox(
      linear.model_fn, SGD(LR), proximal_strength=MU, num_local_steps=3),
                        rounds=1, data=[data[0]])
  assert not np.allclose(paper_w, tff_w, rtol=1e-3)


@pytest.mark.parametrize('strength', [-1.0, 'big', True, float('nan')])
def test_a_bad_proximal_strength_is_one_line(strength):
  with pytest.raises(ValueError, match='proximal_strength must be a number '
                     '>= 0, got'):
    algorithms.build_fed_prox(linear.model_fn, SGD(LR),
                              proximal_strength=strength, num_local_steps=1)
