"""Decaying K (seed 000) through whole processes, on the §3 quadratic problem.

Each round trains the same 8 clients z_1..z_8 at the mid-quantiles of p(z)
with uniform weights and server learning rate 1, so FedAvg is deterministic:
client z moves x to 1/z + (1 - gamma z)^K (x - 1/z), and the fixed point of a
round with K steps is x_K = mean(phi/z) / mean(phi), phi = 1 - (1 - gamma z)^K.
"""

import numpy as np
import pytest
import tensorflow_federated as tff

from tasks.quadratic import task as quadratic_task
from tests import linear
from tests import runs
from tff_mixed import algorithms
from tff_mixed import schedules
from tff_mixed.metrics import runtime
from tff_mixed.task import Task

GAMMA = 0.45
Z = quadratic_task.z_quantiles(8)
DATA = [quadratic_task.client_dataset(repr(float(z))) for z in Z]
UNIFORM = tff.learning.ClientWeighting.UNIFORM


def _fixed_point(k):
  phi = 1.0 - (1.0 - GAMMA * Z)**k
  return np.mean(phi / Z) / np.mean(phi)


def _fed_avg(num_local_steps, **kwargs):
  return algorithms.build_fed_avg(
      quadratic_task.QuadraticModel,
      tff.learning.optimizers.build_sgdm(learning_rate=GAMMA),
      num_local_steps=num_local_steps, client_weighting=UNIFORM, **kwargs)


def _trajectory(process, rounds):
  outputs = runs.rounds(process, DATA, rounds)
  xs = [float(process.get_model_weights(o.state).trainable[0]) for o in outputs]
  ks = [int(o.metrics['client_work']['num_local_steps']) for o in outputs]
  return np.array(xs), ks


@pytest.fixture(scope='module')
def constant_k10():
  return _trajectory(_fed_avg(10), 6)


def test_constant_k_converges_to_the_surrogate_minimiser(constant_k10):
  xs, ks = constant_k10
  assert ks == [10] * 6
  assert xs[-1] == pytest.approx(_fixed_point(10), abs=1e-6)
  # The 8 quantiles approximate p: the analytic x*(gamma, K) agrees.
  assert xs[-1] == pytest.approx(
      quadratic_task.surrogate_minimiser(GAMMA, 10), abs=2e-3)
  assert abs(xs[-1] - quadratic_task.true_minimiser()) > 0.05


def test_a_constant_schedule_equals_the_int(constant_k10):
  xs, ks = _trajectory(_fed_avg(schedules.constant(10)), 6)
  np.testing.assert_array_equal(xs, constant_k10[0])
  assert ks == constant_k10[1]


def test_decaying_k_converges_to_the_true_minimiser():
  xs, ks = _trajectory(_fed_avg(schedules.exponential_decay(10, 0.25)), 10)
  assert ks == [10, 3] + [1] * 8
  assert xs[-1] == pytest.approx(_fixed_point(1), abs=1e-6)
  assert xs[-1] == pytest.approx(quadratic_task.true_minimiser(), abs=5e-4)


def test_decaying_schedules_resume_exactly(tmp_path):
  """K follows the loss (state in the checkpoint), the rate decays by round."""
  clients = {'a': linear.CLIENT_A, 'b': linear.CLIENT_B}
  task = Task(name='linear', model_fn=linear.model_fn,
              train_client_ids=sorted(clients),
              train_dataset_fn=lambda cid: linear.dataset(*clients[cid]),
              client_shuffle='none')  # One full batch a client.
  process = algorithms.build_fed_avg(
      linear.model_fn, tff.learning.optimizers.build_sgdm(learning_rate=0.1),
      num_local_steps=schedules.loss_ratio(8, exponent=1.0, window=2),
      client_learning_rate=schedules.exponential_decay(0.1, 0.8))

  def run(output_dir, rounds):
    return runs.experiment(task, process, output_dir, rounds=rounds,
                           clients_per_round=2, seed=3, eval_every=0,
                           checkpoint_every=2)

  full = run(tmp_path / 'full', 7)
  run(tmp_path / 'split', 3)
  resumed = run(tmp_path / 'split', 7)
  for a, b in zip(process.get_model_weights(full.state).trainable,
                  process.get_model_weights(resumed.state).trainable):
    np.testing.assert_array_equal(a, b)
  key = 'client_work/num_local_steps'
  ks = [row[key] for row in full.history]
  assert ks == [row[key] for row in resumed.history]
  assert ks[:3] == [8, 8, 8] and ks[-1] < 8  # The loss fell, so did K.
  lrs = [row['client_work/client_learning_rate'] for row in resumed.history]
  np.testing.assert_allclose(lrs, 0.1 * 0.8**np.arange(7), rtol=1e-6)
  # Simulated time: download + K minibatches + upload for every round.
  model = runtime.RuntimeModel()
  expected = sum(model.round_seconds_from_metrics(r) for r in full.history)
  assert resumed.history[-1]['simulated_seconds_cumulative'] == pytest.approx(
      expected)
  assert full.history[0]['simulated_seconds'] == pytest.approx(
      8 * model.minibatch_seconds
      + full.history[0]['client_work/bytes_downloaded_per_client'] * 8e-6 / 20
      + full.history[0]['client_work/bytes_uploaded_per_client'] * 8e-6 / 5)


def test_mixed_fl_follows_the_schedules():
  """2-way GT: J follows K, and g_f is inferred with the round's learning rate.

  With K = 1 a client moves by -gamma_t (w_f grad f(x) + g_c), so the inferred
  g_f = -Delta / gamma_t - g_c is exactly w_f grad f(x) only if the server
  divides by this round's gamma_t.
  """
  w_f = 0.5
  process = algorithms.build_mixed_fl(
      linear.model_fn, central_data_fn=lambda: linear.dataset(*linear.CLIENT_B, batch_size=1),
      mixing='two_way_gradient_transfer',
      client_optimizer_fn=tff.learning.optimizers.build_sgdm(learning_rate=0.3),
      federated_weight=w_f, central_weight=0.5,
      num_local_steps=schedules.exponential_decay(2, 0.5),
      client_learning_rate=schedules.exponential_decay(0.1, 0.5))
  state = process.initialize()
  data = [linear.dataset(*linear.CLIENT_A)]
  first = process.next(state, data)
  x1 = linear.unpack(process.get_model_weights(first.state))
  second = process.next(first.state, data)
  ks = [o.metrics['client_work']['num_local_steps'] for o in (first, second)]
  lrs = [o.metrics['client_work']['client_learning_rate']
         for o in (first, second)]
  assert ks == [2, 1]
  np.testing.assert_allclose(lrs, [0.1, 0.05])
  assert second.state['server']['central_batches_used'] == 3  # J = K: 2 + 1.
  # The default central lr is client lr x server lr with the schedule's 0.1.
  assert second.state['server']['central_optimizer_hparams'][
      'learning_rate'] == pytest.approx(0.1)
  gw, gb = linear.grad(*x1, *linear.CLIENT_A)
  g_f = second.state['server']['federated_gradient']
  np.testing.assert_allclose(g_f[0].reshape(-1), w_f * gw, rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(g_f[1], [w_f * gb], rtol=1e-4, atol=1e-6)


def test_power_decay_drives_k_and_the_learning_rate():
  """K_t = ceil(4 / (t + 1)) = 4, 2, 2, 1 and gamma_t = gamma / sqrt(t + 1):
  each round by hand, every client z moving x to
  1/z + (1 - gamma_t z)^K_t (x - 1/z), the server taking their mean."""
  process = _fed_avg(schedules.power_decay(4, 1.0),
                     client_learning_rate=schedules.power_decay(GAMMA, 0.5))
  x = float(process.get_model_weights(process.initialize()).trainable[0])
  xs, ks = _trajectory(process, 4)
  assert ks == [4, 2, 2, 1]
  expected = []
  for t, k in enumerate(ks):
    gamma = GAMMA / np.sqrt(t + 1)
    x = np.mean(1 / Z + (1 - gamma * Z)**k * (x - 1 / Z))
    expected.append(x)
  np.testing.assert_allclose(xs, expected, rtol=1e-5)
