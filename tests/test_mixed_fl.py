"""Mixed FL (seed 004 Alg. 1-2) against a NumPy reference and equivalences."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import linear
from tests import runs
from tff_mixed import aggregators
from tff_mixed import algorithms
from tff_mixed.algorithms import mixed_fl
from tff_mixed.templates import mixed_fl_step

W0, B0 = np.array([0.5, -0.25]), 0.1
ETA, ETA_S, ETA_C, ETA_M = 0.1, 0.9, 0.05, 0.8
W_F, W_C = 0.7, 0.3
K, J = 3, 2
CENTRAL = ([[0.5, 0.5], [1.0, -1.0], [0.0, 2.0]], [1.0, -0.5, 3.0])
CENTRAL_BATCHES = [(CENTRAL[0][:2], CENTRAL[1][:2]), (CENTRAL[0][2:], CENTRAL[1][2:])]
CLIENTS = (linear.CLIENT_A, linear.CLIENT_B)
sgd = tff.learning.optimizers.build_sgdm


def central_data():
  return linear.dataset(*CENTRAL, batch_size=2)


def _vec(w, b):
  return np.append(w, b)


def _grad(v, batch):
  gw, gb = linear.grad(v[:2], v[2], *batch)
  return np.append(gw, gb)


def reference(mixing, rounds, w_f=W_F, w_c=W_C, k=K, j=J, *, order=None,
              uniform=False, clip=None):
  """NumPy transcription of seed 004 Algorithms 1 and 2 (all SGD).

  `order`: the central batches' indices, one a central step (default: in
  turn); `uniform`: clients' updates averaged uniformly (not by examples);
  `clip`: each client's update clipped to this L2 norm, then averaged
  uniformly (DP's mechanism at zero noise).
  """
  order = order or [i % 2 for i in range(rounds * max(j, 1))]
  x = _vec(W0, B0)
  g_c, g_f = np.zeros(3), np.zeros(3)
  two_way = mixing == mixed_fl.TWO_WAY_GRADIENT_TRANSFER
  for t in range(rounds):
    if mixing == mixed_fl.ONE_WAY_GRADIENT_TRANSFER:
      aug = w_c * _grad(x, CENTRAL_BATCHES[order[t]])
    else:
      aug = g_c if two_way else np.zeros(3)
      x_c = x.copy()
      for step in range(j):
        batch = CENTRAL_BATCHES[order[t * j + step]]
        x_c = x_c - ETA_C * (w_c * _grad(x_c, batch) + (g_f if two_way else 0))
      delta_c = x_c - x
    deltas, weights = [], []
    for client in CLIENTS:
      x_i = x.copy()
      for _ in range(k):
        x_i = x_i - ETA * (w_f * _grad(x_i, client) + aug)
      d = x_i - x
      if clip is not None:
        d = d * min(1.0, clip / np.linalg.norm(d))
      deltas.append(d)
      weights.append(1.0 if uniform or clip else len(client[1]) * k)
    delta = sum(p * d for p, d in zip(weights, deltas)) / sum(weights)
    x_f = x + ETA_S * delta
    if mixing == mixed_fl.ONE_WAY_GRADIENT_TRANSFER:
      x = x_f
      continue
    if two_way:
      g_c, g_f = (-delta_c / (ETA_C * j) - g_f,
                  -sum(deltas) / (ETA * k * len(CLIENTS)) - g_c)
    x = x + ETA_M * (delta_c + (x_f - x))
  return x


def build(mixing, **kwargs):
  kwargs.setdefault('federated_weight', W_F)
  kwargs.setdefault('central_weight', W_C)
  kwargs.setdefault('num_local_steps', K)
  kwargs.setdefault('num_central_steps', J)
  if mixing != mixed_fl.ONE_WAY_GRADIENT_TRANSFER:  # 1-way takes no step.
    kwargs.setdefault('central_optimizer_fn', sgd(ETA_C))
  return algorithms.build_mixed_fl(
      linear.model_fn, central_data_fn=central_data, mixing=mixing,
      client_optimizer_fn=sgd(ETA), server_optimizer_fn=sgd(ETA_S),
      merge_optimizer_fn=sgd(ETA_M), **kwargs)


def run(process, rounds):
  start = process.set_model_weights(process.initialize(), linear.weights(W0, B0))
  output = runs.rounds(process, [linear.dataset(*c) for c in CLIENTS], rounds,
                       state=start)[-1]
  w, b = linear.unpack(process.get_model_weights(output.state))
  return _vec(w, b), output.metrics


@pytest.fixture(scope='module', params=mixed_fl.MIXINGS)
def mixing_process(request):
  return request.param, build(request.param, gradient_dissimilarity=True)


def test_matches_numpy_reference(mixing_process):
  mixing, process = mixing_process
  got, metrics = run(process, 3)
  np.testing.assert_allclose(got, reference(mixing, 3), rtol=2e-5, atol=2e-6)
  # The reference itself: 2-way GT with w_c = 0 differs from FedAvg only
  # from round 2 on (g_f starts at 0).
  if mixing == mixed_fl.TWO_WAY_GRADIENT_TRANSFER:
    pt = lambda r: reference(mixed_fl.PARALLEL_TRAINING, r, w_f=1.0, w_c=0.0)
    tw = lambda r: reference(mixing, r, w_f=1.0, w_c=0.0)
    np.testing.assert_allclose(tw(1), pt(1), rtol=1e-12)
    assert np.abs(tw(2) - pt(2)).max() > 1e-3
  assert np.isfinite(metrics['central']['loss'])
  assert metrics['client_work']['sgd_steps'] == 2 * K


def test_gradient_transfer_downloads_the_augmenting_gradient(mixing_process):
  mixing, process = mixing_process
  _, metrics = run(process, 1)
  model_and_k = 4 * 3 + 4 + 4
  extra = 0 if mixing == mixed_fl.PARALLEL_TRAINING else 4 * 3
  assert metrics['client_work']['bytes_downloaded_per_client'] == model_and_k + extra


def test_one_way_gradient_transfer_refuses_a_central_optimizer():
  with pytest.raises(ValueError, match='one_way_gradient_transfer takes no '
                     'central_optimizer_fn'):
    build(mixed_fl.ONE_WAY_GRADIENT_TRANSFER, central_optimizer_fn=sgd(ETA_C))


def test_k1_parallel_training_equals_one_way_gradient_transfer():
  """App. A.3 at K = J = 1 (merge lr 1, server lr 1, central lr = client lr)."""
  kwargs = dict(num_local_steps=1, num_central_steps=1,
                server_optimizer_fn=sgd(1.0), merge_optimizer_fn=sgd(1.0))
  results = []
  for mixing, central in ((mixed_fl.PARALLEL_TRAINING, dict(
      central_optimizer_fn=sgd(ETA))), (mixed_fl.ONE_WAY_GRADIENT_TRANSFER, {})):
    process = algorithms.build_mixed_fl(
        linear.model_fn, central_data_fn=lambda: linear.dataset(*CENTRAL),  # One full batch.
        mixing=mixing, client_optimizer_fn=sgd(ETA), **kwargs, **central)
    results.append(run(process, 2)[0])
  np.testing.assert_allclose(results[0], results[1], rtol=1e-5, atol=1e-6)


def test_central_weight_zero_is_fed_avg():
  """PT and 1-way GT with w_c = 0 are FedAvg. (2-way GT is not: its central
  model still steps along the federated gradient g_f, seed 004 Alg. 1; the
  NumPy reference above pins that behaviour, w_c = 0 included.)"""
  fed_avg = algorithms.build_fed_avg(
      linear.model_fn, sgd(ETA), sgd(ETA_S), num_local_steps=K)
  expected, _ = run(fed_avg, 2)
  for mixing in (mixed_fl.PARALLEL_TRAINING, mixed_fl.ONE_WAY_GRADIENT_TRANSFER):
    process = algorithms.build_mixed_fl(
        linear.model_fn, central_data_fn=central_data, mixing=mixing,
        client_optimizer_fn=sgd(ETA), server_optimizer_fn=sgd(ETA_S),
        federated_weight=1.0, central_weight=0.0, num_local_steps=K)
    got, _ = run(process, 2)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6, err_msg=mixing)


def test_data_free_central_loss():
  """A regulariser with no data: 0.5 ||w||^2 pulls the model to 0."""
  def l2(model, batch):
    assert batch is None
    return 0.5 * tf.add_n([tf.reduce_sum(v**2) for v in model.trainable_variables])
  process = algorithms.build_mixed_fl(
      linear.model_fn, central_data_fn=None, mixing=mixed_fl.PARALLEL_TRAINING,
      client_optimizer_fn=sgd(ETA), federated_weight=0.0, central_weight=1.0,
      num_local_steps=1, num_central_steps=2, central_optimizer_fn=sgd(0.5),
      central_loss_fn=l2)
  got, _ = run(process, 1)
  # Clients contribute nothing (w_f = 0); 2 steps of x <- x - 0.5 x.
  np.testing.assert_allclose(got, _vec(W0, B0) * 0.25, rtol=1e-6)


@pytest.mark.parametrize('kwargs, match', [
    (dict(mixing='parallel'), 'mixing must be one of'),
    (dict(central_weight=-1.0), 'central_weight must be a finite number >= 0'),
    (dict(federated_weight=float('nan')),
     'federated_weight must be a finite number >= 0, got nan'),
    (dict(central_weight=float('inf')),
     'central_weight must be a finite number >= 0, got inf'),
    (dict(federated_weight=0.0, central_weight=0.0), 'both 0'),
    (dict(num_central_steps=0), 'num_central_steps must be >= 1'),
    (dict(central_shuffle_buffer=-1), 'central_shuffle_buffer must be an int >= 0'),
    (dict(central_data_fn=lambda: central_data().take(0)),
     'central_data_fn\\(\\) returned an empty dataset'),
])
def test_an_argument_the_builder_cannot_honour_is_refused_naming_it(
    kwargs, match):
  kwargs.setdefault('mixing', mixed_fl.PARALLEL_TRAINING)
  kwargs.setdefault('num_local_steps', 1)
  kwargs.setdefault('central_data_fn', central_data)
  with pytest.raises(ValueError, match=match):
    algorithms.build_mixed_fl(
        linear.model_fn, client_optimizer_fn=sgd(0.1), **kwargs)


def test_numpy_weights_are_numbers():
  mixed_fl_step.check_arguments(
      mixed_fl.PARALLEL_TRAINING, np.float32(0.5), np.float64(0.5))
  with pytest.raises(TypeError, match='central_weight must be a number'):
    mixed_fl_step.check_arguments(mixed_fl.PARALLEL_TRAINING, 0.5, '0.5')


def test_central_data_the_model_cannot_consume():
  bad = lambda: tf.data.Dataset.from_tensors({'x': tf.zeros([1, 5])})
  with pytest.raises(ValueError, match='central data element spec'):
    algorithms.build_mixed_fl(
        linear.model_fn, central_data_fn=bad, mixing=mixed_fl.PARALLEL_TRAINING,
        client_optimizer_fn=sgd(0.1), num_local_steps=1)


def test_gradient_dissimilarity_matches_equation_7(mixing_process):
  _, process = mixing_process
  _, metrics = run(process, 1)
  x0 = _vec(W0, B0)
  grad_f = np.mean([W_F * _grad(x0, c) for c in CLIENTS], axis=0)
  grad_c = W_C * _grad(x0, CENTRAL_BATCHES[0])  # Round 0's first batch.
  weighted = grad_f @ grad_f / W_F + grad_c @ grad_c / W_C
  total = (grad_f + grad_c) @ (grad_f + grad_c)
  got = metrics['gradient_dissimilarity']
  np.testing.assert_allclose(got['G_squared'], weighted - total, rtol=1e-4)
  np.testing.assert_allclose(got['B_squared'], weighted / total, rtol=1e-4)
  assert 'first_gradient_mean' not in metrics['client_work']
  # The first-step gradients ride up with the deltas: 3 floats and a count
  # (and the client counts, 3 int32).
  assert metrics['client_work']['bytes_uploaded_per_client'] == (
      4 * 3 + 4 + 4 * 2 + 8 + 8 + 4 + 8 + 4 * 3 + 4 + 4 * 3)


def test_central_shuffle_is_a_seeded_permutation_each_pass():
  """With a shuffle buffer each pass over the two central batches (a round,
  J = 2) is one of their two orders, chosen by central_seed: three rounds
  equal the reference for exactly one choice of orders; the same seed
  rebuilt gives the same run, and continues it from a round-2 state (the
  counter in the state); other seeds choose other orders."""
  import itertools  # pylint: disable=g-import-not-at-top
  passes = list(itertools.product([(0, 1), (1, 0)], repeat=3))
  refs = {p: reference(mixed_fl.PARALLEL_TRAINING, 3,
                       order=[i for one in p for i in one]) for p in passes}
  data = [linear.dataset(*c) for c in CLIENTS]

  def orders(seed):
    process = build(mixed_fl.PARALLEL_TRAINING, central_shuffle_buffer=2,
                    central_seed=seed)
    got, _ = run(process, 3)
    matches = [p for p, ref in refs.items()
               if np.allclose(got, ref, rtol=2e-5, atol=2e-6)]
    assert len(matches) == 1, (seed, matches)
    return process, got, matches[0]

  first, got, chosen = orders(0)
  again, got_again, _ = orders(0)
  np.testing.assert_array_equal(got_again, got)
  state = first.set_model_weights(first.initialize(), linear.weights(W0, B0))
  for _ in range(2):
    state = first.next(state, data).state
  resumed = again.next(state, data).state
  np.testing.assert_array_equal(
      _vec(*linear.unpack(again.get_model_weights(resumed))), got)
  others = {orders(seed)[2] for seed in (1, 2, 3)}
  assert others - {chosen}


@pytest.mark.parametrize('mixing', [mixed_fl.PARALLEL_TRAINING,
                                    mixed_fl.ONE_WAY_GRADIENT_TRANSFER])
def test_uniform_weighting_and_clipped_updates(mixing):
  """UNIFORM averages the clients' updates 1/2 each; a fixed-clip DP
  aggregator at zero noise clips each update to 0.05 and averages them
  uniformly (seed 004 runs DP Parallel Training this way)."""
  uniform = build(mixing, client_weighting=tff.learning.ClientWeighting.UNIFORM)
  np.testing.assert_allclose(run(uniform, 2)[0],
                             reference(mixing, 2, uniform=True),
                             rtol=2e-5, atol=2e-6)
  assert not np.allclose(reference(mixing, 2, uniform=True),
                         reference(mixing, 2), rtol=1e-4)
  clipped = build(mixing, model_aggregator=aggregators.gaussian_fixed(
      noise_multiplier=0.0, clients_per_round=2, clip_norm=0.05))
  np.testing.assert_allclose(run(clipped, 2)[0],
                             reference(mixing, 2, clip=0.05),
                             rtol=2e-5, atol=2e-6)
  # The clip binds (else this were the uniform mean again).
  assert not np.allclose(reference(mixing, 2, clip=0.05),
                         reference(mixing, 2, uniform=True), rtol=1e-4)


def test_checkpointed_state_resumes_exactly(mixing_process, tmp_path):
  """The augmenting gradients and the central-data round counter live in the
  state: save after 2 rounds, load, one more round == 3 straight rounds."""
  import asyncio  # pylint: disable=g-import-not-at-top
  _, process = mixing_process
  data = [linear.dataset(*c) for c in CLIENTS]
  start = process.set_model_weights(process.initialize(), linear.weights(W0, B0))
  state = runs.rounds(process, data, 2, state=start)[-1].state
  manager = tff.program.FileProgramStateManager(str(tmp_path))
  asyncio.run(manager.save(state, 2))
  loaded, version = asyncio.run(manager.load_latest(process.initialize()))
  assert version == 2
  resumed = process.next(loaded, data).state
  straight = process.next(state, data).state
  for a, b in zip(process.get_model_weights(resumed).trainable,
                  process.get_model_weights(straight).trainable):
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize('mixing', mixed_fl.MIXINGS)
def test_server_rates_set_between_rounds_are_the_rates_built_with(mixing):
  """get_hparams has the server step's rates (eta_s, eta_m, eta_c: the
  central step's; 1-way GT's central step is its SGD at 1); set to other
  values, two rounds equal a process built with them (2-way GT's gradient
  transfer reads eta_c from the state too)."""
  process = build(mixing)
  state = process.set_model_weights(process.initialize(),
                                    linear.weights(W0, B0))
  hparams = process.get_hparams(state)
  central_rate = 1.0 if mixing == mixed_fl.ONE_WAY_GRADIENT_TRANSFER else ETA_C
  assert {name: float(part['learning_rate'])
          for name, part in hparams['server'].items()} == pytest.approx({
              'server_optimizer': ETA_S, 'merge_optimizer': ETA_M,
              'central_optimizer_hparams': central_rate})
  hparams['server']['server_optimizer']['learning_rate'] = 0.6
  hparams['server']['merge_optimizer']['learning_rate'] = 0.4
  rebuilt = dict(server_optimizer_fn=sgd(0.6), merge_optimizer_fn=sgd(0.4))
  if mixing != mixed_fl.ONE_WAY_GRADIENT_TRANSFER:
    hparams['server']['central_optimizer_hparams']['learning_rate'] = 0.02
    rebuilt['central_optimizer_fn'] = sgd(0.02)
  state = process.set_hparams(state, hparams)
  kwargs = dict(federated_weight=W_F, central_weight=W_C, num_local_steps=K,
                num_central_steps=J, **rebuilt)
  other = algorithms.build_mixed_fl(
      linear.model_fn, central_data_fn=central_data, mixing=mixing,
      client_optimizer_fn=sgd(ETA), **kwargs)
  other_state = other.set_model_weights(other.initialize(),
                                        linear.weights(W0, B0))
  data = [linear.dataset(*c) for c in CLIENTS]
  state = runs.rounds(process, data, 2, state=state)[-1].state
  other_state = runs.rounds(other, data, 2, state=other_state)[-1].state
  np.testing.assert_allclose(
      _vec(*linear.unpack(process.get_model_weights(state))),
      _vec(*linear.unpack(other.get_model_weights(other_state))),
      rtol=1e-6, atol=1e-7)
