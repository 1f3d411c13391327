"""Seed 003 Table 1's U, T and I steps against hand-computed values."""

import collections

import numpy as np
import pytest
import tensorflow as tf

from tff_mixed import optimizers


def _np(tensors):
  return [np.asarray(t, np.float64) for t in tensors]


def _stats(**values):
  return collections.OrderedDict(
      (k, [tf.constant(v, tf.float32) for v in vs]) for k, vs in values.items())


def test_initial_statistics_are_zero_momentum_and_unit_second_moment():
  specs = [tf.TensorSpec([2, 3], tf.float32), tf.TensorSpec([4], tf.float32)]
  adam = optimizers.adam().init(specs)
  assert list(adam) == ['m', 'v']
  for m, v, spec in zip(adam['m'], adam['v'], specs):
    assert m.shape == spec.shape and v.shape == spec.shape
    np.testing.assert_array_equal(m, 0.0)
    np.testing.assert_array_equal(v, 1.0)
  assert list(optimizers.sgdm().init(specs)) == ['m']
  assert list(optimizers.rmsprop().init(specs)) == ['v']


def test_sgdm_steps_by_hand():
  opt = optimizers.sgdm(beta=0.5)
  stats = _stats(m=[[0.2, -1.0]])
  g = [tf.constant([1.0, 3.0])]
  # U = -0.1 (0.5 m + 0.5 g) = -0.1 * [0.6, 1.0].
  np.testing.assert_allclose(_np(opt.update(stats, g, 0.1))[0], [-0.06, -0.1],
                             rtol=1e-6)
  np.testing.assert_allclose(_np(opt.track(stats, g)['m'])[0], [0.6, 1.0],
                             rtol=1e-6)
  # I with x_t - x_{t+1} = [0.12, 0.2], K = 2, eta = 0.1:
  # (delta / 0.2 - 0.5 m) / 0.5 = ([0.6, 1.0] - [0.1, -0.5]) / 0.5.
  got = opt.inverse(stats, [tf.constant([0.12, 0.2])], 2, 0.1)
  np.testing.assert_allclose(_np(got)[0], [1.0, 3.0], rtol=1e-6)
  updates, new = opt.local_step(stats, g, 0.1)  # m' = [0.6, 1.0]; -0.1 m'.
  np.testing.assert_allclose(_np(new['m'])[0], [0.6, 1.0], rtol=1e-6)
  np.testing.assert_allclose(_np(updates)[0], [-0.06, -0.1], rtol=1e-6)


def test_rmsprop_steps_by_hand():
  opt = optimizers.rmsprop(beta=0.9, epsilon=0.0)
  stats = _stats(v=[[4.0, 1.0]])
  g = [tf.constant([2.0, -1.0])]
  np.testing.assert_allclose(_np(opt.update(stats, g, 0.1))[0], [-0.1, 0.1],
                             rtol=1e-6)
  # v <- 0.9 v + 0.1 g^2 = [3.6 + 0.4, 0.9 + 0.1].
  np.testing.assert_allclose(_np(opt.track(stats, g)['v'])[0], [4.0, 1.0],
                             rtol=1e-6)
  got = opt.inverse(stats, [tf.constant([0.2, 0.3])], 3, 0.1)
  np.testing.assert_allclose(_np(got)[0], [0.2 * 2 / 0.3, 0.3 / 0.3], rtol=1e-6)
  # Moving statistics step with the new v: g = [1, 1] -> v' = [3.7, 1.0].
  updates, new = opt.local_step(stats, [tf.constant([1.0, 1.0])], 0.1)
  np.testing.assert_allclose(_np(new['v'])[0], [3.7, 1.0], rtol=1e-6)
  np.testing.assert_allclose(_np(updates)[0], [-0.1 / np.sqrt(3.7), -0.1],
                             rtol=1e-6)


def test_rmsprop_epsilon_sits_outside_the_root():
  opt = optimizers.rmsprop(beta=0.9, epsilon=1.0)
  got = opt.update(_stats(v=[[4.0]]), [tf.constant([3.0])], 1.0)
  np.testing.assert_allclose(_np(got)[0], [-1.0], rtol=1e-6)  # -3 / (2 + 1)


def test_adam_steps_by_hand():
  opt = optimizers.adam(beta_1=0.5, beta_2=0.75, epsilon=0.5)
  stats = _stats(m=[[1.0]], v=[[2.25]])
  g = [tf.constant([3.0])]
  # U = -eta (0.5 + 1.5) / (1.5 + 0.5) = -eta; v stays 2.25.
  np.testing.assert_allclose(_np(opt.update(stats, g, 0.2))[0], [-0.2],
                             rtol=1e-6)
  tracked = opt.track(stats, g)
  np.testing.assert_allclose(_np(tracked['m'])[0], [2.0], rtol=1e-6)
  np.testing.assert_allclose(_np(tracked['v'])[0], [0.75 * 2.25 + 0.25 * 9],
                             rtol=1e-6)
  # I: (0.4 * 2.0 / (0.2 * 2) - 0.5 * 1) / 0.5 = (2 - 0.5) / 0.5 = 3.
  got = opt.inverse(stats, [tf.constant([0.4])], 2, 0.2)
  np.testing.assert_allclose(_np(got)[0], [3.0], rtol=1e-6)
  updates, _ = opt.local_step(stats, g, 0.2)
  v = 0.75 * 2.25 + 0.25 * 9
  np.testing.assert_allclose(_np(updates)[0], [-0.2 * 2.0 / (np.sqrt(v) + 0.5)],
                             rtol=1e-6)


ALL = [optimizers.sgdm(0.9), optimizers.rmsprop(0.9, 1e-3),
       optimizers.adam(0.9, 0.99, 1e-3), optimizers.sgdm(0.0),
       optimizers.rmsprop(1.0, 0.0), optimizers.adam(0.3, 1.0, 0.0)]


@pytest.mark.parametrize('opt', ALL, ids=lambda o: f'{o.name}{dict(o.hparams)}')
def test_inverse_recovers_the_mean_gradient_of_k_frozen_steps(opt):
  """Contract: U is affine in g, so I undoes K steps exactly."""
  rng = np.random.default_rng(0)
  shapes = [(3, 2), (2,)]
  stats = opt.init([tf.TensorSpec(s, tf.float64) for s in shapes])
  # Arbitrary statistics: run T on random gradients first.
  for _ in range(3):
    stats = opt.track(stats, [tf.constant(rng.normal(size=s)) for s in shapes])
  gradients = [[tf.constant(rng.normal(size=s)) for s in shapes]
               for _ in range(4)]
  lr = 0.05
  delta = [tf.zeros(s, tf.float64) for s in shapes]
  for g in gradients:  # x_t - x_{t+1} = -(sum of the K updates).
    delta = [d - u for d, u in zip(delta, opt.update(stats, g, lr))]
  recovered = opt.inverse(stats, delta, len(gradients), lr)
  mean = [np.mean([np.asarray(g[i]) for g in gradients], axis=0)
          for i in range(len(shapes))]
  for got, want in zip(recovered, mean):
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize('opt', ALL, ids=lambda o: f'{o.name}{dict(o.hparams)}')
def test_local_step_tracks_then_steps(opt):
  stats = opt.init([tf.TensorSpec([2], tf.float64)])
  g = [tf.constant([0.5, -2.0], tf.float64)]
  updates, new = opt.local_step(stats, g, 0.1)
  tracked = opt.track(stats, g)
  for key in tracked:
    np.testing.assert_allclose(new[key][0], tracked[key][0])
  # Its step is the Update step at the tracked statistics with the tracked
  # momentum already holding g: for v-only optimizers that is U at s'.
  if opt.name == 'rmsprop':
    np.testing.assert_allclose(updates[0], opt.update(new, g, 0.1)[0])
  else:
    m = new['m'][0]
    scale = 1.0 if opt.name == 'sgdm' else 1.0 / (
        np.sqrt(new['v'][0]) + opt.hparams['epsilon'])
    np.testing.assert_allclose(updates[0], -0.1 * m * scale)


def test_get_builds_by_name_and_skips_none():
  opt = optimizers.get('adam', beta=None, beta_1=0.5, beta_2=None, epsilon=None)
  assert opt.name == 'adam'
  assert opt.hparams == collections.OrderedDict(
      beta_1=0.5, beta_2=0.99, epsilon=1e-3)
  instance = optimizers.sgdm(0.3)
  assert optimizers.get(instance) is instance


@pytest.mark.parametrize('call, message', [
    (lambda: optimizers.get('lamb'), "optimizer must be one of ['sgdm', 'rmsprop', 'adam']"),
    (lambda: optimizers.get('adam', beta=0.9), 'adam has no hyper-parameter beta'),
    (lambda: optimizers.get('sgdm', epsilon=0.1), 'sgdm has no hyper-parameter epsilon'),
    (lambda: optimizers.get(optimizers.sgdm(), beta=0.5), "['beta'] given with an AdaptiveOptimizer"),
    (lambda: optimizers.sgdm(beta=1.0), r'beta must be in [0, 1), got 1.0'),
    (lambda: optimizers.adam(beta_1=1.0), r'beta_1 must be in [0, 1), got 1.0'),
    (lambda: optimizers.adam(beta_2=1.5), r'beta_2 must be in [0, 1], got 1.5'),
    (lambda: optimizers.rmsprop(epsilon=-1.0), 'epsilon must be a finite number >= 0, got -1.0'),
    (lambda: optimizers.rmsprop(epsilon=float('inf')), 'epsilon must be a finite number >= 0, got inf'),
    (lambda: optimizers.adam(beta_2=float('nan')), r'beta_2 must be in [0, 1], got nan'),
    (lambda: optimizers.rmsprop(beta=-0.1), r'beta must be in [0, 1], got -0.1'),
])
def test_argument_errors_name_the_argument(call, message):
  with pytest.raises(ValueError) as info:
    call()
  assert message in str(info.value)


def test_tff_optimizer_frozen_and_moving():
  specs = (tf.TensorSpec([2], tf.float32),)
  weights = (tf.constant([1.0, 1.0]),)
  g = (tf.constant([1.0, -1.0]),)
  frozen = optimizers.build_tff_optimizer(
      optimizers.sgdm(0.5), 0.1, frozen_statistics=True)
  state = frozen.initialize(specs)
  assert list(state) == ['learning_rate', 'm']
  new_state, new_weights = frozen.next(state, weights, g)
  np.testing.assert_allclose(new_weights[0], [0.95, 1.05])  # -0.1 * 0.5 g
  np.testing.assert_array_equal(new_state['m'][0], [0.0, 0.0])
  moving = optimizers.build_tff_optimizer(
      optimizers.sgdm(0.5), 0.1, frozen_statistics=False)
  new_state, new_weights = moving.next(moving.initialize(specs), weights, g)
  np.testing.assert_allclose(new_weights[0], [0.95, 1.05])
  np.testing.assert_allclose(new_state['m'][0], [0.5, -0.5])
  state = moving.set_hparams(state, collections.OrderedDict(learning_rate=0.3))
  assert float(moving.get_hparams(state)['learning_rate']) == pytest.approx(0.3)
  for bad in (-1.0, float('nan'), float('inf')):
    with pytest.raises(ValueError,
                       match='learning_rate must be a finite number >= 0'):
      optimizers.build_tff_optimizer(optimizers.sgdm(), bad,
                                     frozen_statistics=True)
  optimizers.build_tff_optimizer(optimizers.sgdm(), np.float32(0.5),
                                 frozen_statistics=True)
  with pytest.raises(TypeError, match='AdaptiveOptimizer'):
    optimizers.build_tff_optimizer('sgdm', 0.1, frozen_statistics=True)
