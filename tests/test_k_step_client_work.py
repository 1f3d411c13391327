"""The K-step client update, tested as a plain tf.function and as a process."""

import re

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import linear
from tff_mixed import algorithms
from tff_mixed import keys
from tff_mixed import schedules
from tff_mixed.templates import client_batches
from tff_mixed.templates import client_extensions
from tff_mixed.templates import k_step_client_work
from tff_mixed.templates import scheduled_client_work
from tff_mixed.templates import step_loop

SGD = tff.learning.optimizers.build_sgdm(learning_rate=0.1)
W0, B0 = np.array([0.5, -0.25]), 0.1


@pytest.fixture(scope='module')
def update_fn():
  return step_loop.build_k_step_update(
      linear.model_fn,
      client_weighting=tff.learning.ClientWeighting.NUM_EXAMPLES,
  )


def _client_update(update_fn, data, k, optimizer=SGD):
  """(delta_w, delta_b, weight, steps, metrics) of one client's k steps."""
  hparams = optimizer.get_hparams(optimizer.initialize(tf.TensorSpec((), tf.float32)))
  output = update_fn(
      optimizer, hparams, tf.constant(k), linear.weights(W0, B0), data
  )
  result, metrics, steps = output.result, output.metrics, output.sgd_steps
  delta_w = result.update[0].numpy().reshape(-1)
  delta_b = float(result.update[1].numpy()[0])
  return delta_w, delta_b, float(result.update_weight), int(steps), metrics


@pytest.mark.parametrize('k', [1, 2, 5])
def test_k_steps_cycle_through_batches(update_fn, k):
  x, y = linear.CLIENT_A
  batches = [(x[:2], y[:2]), (x[2:], y[2:])]  # Two batches: 2 and 1 examples.
  delta_w, delta_b, weight, steps, _ = _client_update(
      update_fn, linear.dataset(x, y, batch_size=2), k
  )
  w, b = linear.sgd(W0, B0, batches, k, 0.1)
  np.testing.assert_allclose(delta_w, W0 - w, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(delta_b, B0 - b, rtol=1e-5, atol=1e-6)
  assert steps == k
  # Weight = examples processed: batches of 2, 1, 2, 1, ...
  assert weight == sum(2 if i % 2 == 0 else 1 for i in range(k))


def test_what_moved_to_client_batches_says_where():
  for name in ('BufferedBatches', 'cycle'):
    with pytest.raises(AttributeError, match=re.escape(
        f'tff_mixed.templates.step_loop.{name} moved to '
        f'tff_mixed.templates.client_batches.{name} (CHANGELOG.md, '
        '2026-11-27).')):
      getattr(step_loop, name)


def test_what_moved_out_of_the_k_step_client_work_says_where():
  for name, module, date in (
      ('ClientExtension', 'client_extensions', '2026-11-28'),
      ('work_finalizers', 'work_metrics', '2026-11-26')):
    with pytest.raises(AttributeError, match=re.escape(
        f'tff_mixed.templates.k_step_client_work.{name} moved to '
        f'tff_mixed.templates.{module}.{name} (CHANGELOG.md, {date}).')):
      getattr(k_step_client_work, name)


def test_the_first_gradient_is_kept_only_when_asked(update_fn):
  """Without `first_gradient` the step loop does not carry the first step's
  gradient (None); with it, the gradient is the first batch's at the
  starting weights, and the training is the same."""
  x, y = linear.CLIENT_A
  data = linear.dataset(x, y, batch_size=2)
  hparams = SGD.get_hparams(SGD.initialize(tf.TensorSpec((), tf.float32)))
  keeping = step_loop.build_k_step_update(
      linear.model_fn,
      client_weighting=tff.learning.ClientWeighting.NUM_EXAMPLES,
      first_gradient=True)
  outputs = [fn(SGD, hparams, tf.constant(3), linear.weights(W0, B0), data)
             for fn in (update_fn, keeping)]
  assert outputs[0].first_gradient is None
  gw, gb = linear.grad(W0, B0, x[:2], y[:2])
  np.testing.assert_allclose(
      outputs[1].first_gradient[0].numpy().reshape(-1), gw, rtol=1e-6)
  np.testing.assert_allclose(outputs[1].first_gradient[1].numpy(), [gb],
                             rtol=1e-6)
  for without, with_first in zip(outputs[0].result.update,
                                 outputs[1].result.update):
    np.testing.assert_array_equal(without.numpy(), with_first.numpy())


def test_cycle_reads_concatenable_batches_into_tensors_in_order():
  """`cycle` reads a dataset whose batches concatenate (only the first
  dimension unknown) in one op into `BufferedBatches`; with a second
  unknown dimension it stays a dataset, read by an iterator. Both give the
  batches in order, cycled, the short one short; an empty dataset none."""
  x = np.arange(10, dtype=np.float32).reshape(5, 2)  # x[:, 0]: 0 2 4 6 8.
  flat = tf.data.Dataset.from_tensor_slices((x, x[:, 0])).batch(2)
  ragged = flat.map(lambda a, b: (tf.reshape(a, [tf.shape(a)[0], -1, 2]), b))
  assert ragged.element_spec[0].shape.as_list() == [None, None, 2]
  assert isinstance(client_batches.cycle(flat, 5), client_batches.BufferedBatches)
  assert isinstance(client_batches.cycle(ragged, 5), tf.data.Dataset)

  def read(data, k):
    # Each batch's sum of x[:, 0] as three digits, in order; examples.
    step = lambda s, b: (s[0] * 1000 + tf.reduce_sum(
        tf.cast(b[1], tf.float64)), s[1] + tf.shape(b[1])[0])
    return tf.function(lambda: step_loop.fold(
        step, (tf.constant(0.0, tf.float64), 0), client_batches.cycle(data, k)),
        autograph=False)()

  for data in (flat, ragged):
    # Batches 2, 10, 8 (rows 0-1, 2-3, 4), cycled.
    signature, examples = read(data, 5)
    assert (float(signature), int(examples)) == (2010008002010.0, 9)
    signature, examples = read(data.take(0), 5)
    assert (float(signature), int(examples)) == (0.0, 0)

def test_empty_client_takes_no_step_and_has_zero_weight(update_fn):
  delta_w, delta_b, weight, steps, metrics = _client_update(
      update_fn, linear.dataset(*linear.CLIENT_A).take(0), 4
  )
  np.testing.assert_array_equal(delta_w, [0.0, 0.0])
  assert delta_b == 0.0
  assert weight == 0.0
  assert steps == 0
  assert int(metrics['num_examples'][0]) == 0


def test_non_finite_update_is_zeroed_with_zero_weight(update_fn):
  x = [[np.inf, 1.0]]
  delta_w, delta_b, weight, steps, metrics = _client_update(
      update_fn, linear.dataset(x, [1.0]), 2
  )
  np.testing.assert_array_equal(delta_w, [0.0, 0.0])
  assert delta_b == 0.0
  assert weight == 0.0
  assert steps == 2
  assert int(metrics['num_examples'][0]) == 0  # Its metrics are dropped too.


def test_uniform_weighting_gives_one_per_training_client():
  update_fn = step_loop.build_k_step_update(
      linear.model_fn, client_weighting=tff.learning.ClientWeighting.UNIFORM
  )
  data = linear.dataset(*linear.CLIENT_A)
  _, _, weight, _, _ = _client_update(update_fn, data, 3)
  assert weight == 1.0
  _, _, weight, _, _ = _client_update(update_fn, data.take(0), 3)
  assert weight == 0.0


def test_momentum_optimizer_state_carries_over_the_k_steps(update_fn):
  momentum = tff.learning.optimizers.build_sgdm(learning_rate=0.1, momentum=0.5)
  x, y = linear.CLIENT_B
  delta_w, delta_b, _, _, _ = _client_update(update_fn, linear.dataset(x, y), 3,
                                             momentum)
  w, b, mw, mb = W0.copy(), B0, np.zeros(2), 0.0
  for _ in range(3):
    gw, gb = linear.grad(w, b, x, y)
    mw, mb = 0.5 * mw + gw, 0.5 * mb + gb
    w, b = w - 0.1 * mw, b - 0.1 * mb
  np.testing.assert_allclose(delta_w, W0 - w, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(delta_b, B0 - b, rtol=1e-5, atol=1e-6)


def _mse(w, b, x, y):
  residual = np.asarray(x) @ w + b - np.asarray(y)
  return float(np.mean(residual**2))


class TestProcess:

  @pytest.fixture(scope='class')
  def process(self):
    return scheduled_client_work.with_schedules(
        k_step_client_work.build_k_step_client_work(linear.model_fn, SGD),
        num_local_steps=3)

  def test_type_signature(self, process):
    state_type = process.initialize.type_signature.result
    assert state_type.placement == tff.SERVER
    assert state_type.member.num_local_steps.dtype == np.int32
    data_type = process.next.type_signature.parameter[2]
    assert data_type.placement == tff.CLIENTS
    assert isinstance(data_type.member, tff.SequenceType)

  def test_next_reports_k_steps_and_bytes(self, process):
    state = process.initialize()
    datasets = [linear.dataset(*linear.CLIENT_A), linear.dataset(*linear.CLIENT_B)]
    output = process.next(
        state, [linear.weights(W0, B0)] * 2, datasets
    )
    m = output.measurements
    assert m['num_local_steps'] == 3
    assert m['sgd_steps'] == 6
    # Down: w (2x1) + b (1) float32, learning rate float32, K int32.
    assert m['bytes_downloaded_per_client'] == 4 * 3 + 4 + 4
    # Up: update (3 floats) + weight + metrics (loss sum/count, examples,
    # batches) + sgd_steps + first-step loss and its count + the client
    # counts (participating, empty, dropped: int32 each).
    assert m['bytes_uploaded_per_client'] == (
        4 * 3 + 4 + 4 * 2 + 8 + 8 + 4 + 8 + 4 * 3)
    assert dict(m['clients']) == {
        'participating': 2, 'empty': 0, 'dropped_non_finite': 0}
    assert [r.update_weight for r in output.result] == [9.0, 6.0]
    # The mean over clients of the first batch's loss at the round's model.
    expected = np.mean([_mse(W0, B0, *linear.CLIENT_A),
                        _mse(W0, B0, *linear.CLIENT_B)])
    np.testing.assert_allclose(m['first_step_loss'], expected, rtol=1e-6)
    assert m['client_learning_rate'] == pytest.approx(0.1)
    assert output.state['round_num'] == 1

  def test_set_hparams_changes_k(self, process):
    state = process.initialize()
    hparams = process.get_hparams(state)
    hparams['num_local_steps'] = np.int32(5)
    state = process.set_hparams(state, hparams)
    output = process.next(
        state, [linear.weights(W0, B0)], [linear.dataset(*linear.CLIENT_A)]
    )
    assert output.measurements['num_local_steps'] == 5
    assert output.measurements['sgd_steps'] == 5
    assert output.state['num_local_steps'] == 5  # A constant K stays set.

  def test_no_client_trained_gives_nan_first_step_loss(self, process):
    output = process.next(
        process.initialize(), [linear.weights(W0, B0)],
        [linear.dataset(*linear.CLIENT_A).take(0)])
    assert np.isnan(output.measurements['first_step_loss'])
    assert output.measurements['sgd_steps'] == 0


class TestSchedules:
  """K and the client learning rate follow schedules held in the state."""

  @pytest.fixture(scope='class')
  def process(self):
    return scheduled_client_work.with_schedules(
        k_step_client_work.build_k_step_client_work(linear.model_fn, SGD),
        num_local_steps=schedules.exponential_decay(4, 0.5),
        learning_rate=schedules.exponential_decay(0.2, 0.5))

  def test_k_and_learning_rate_decay_each_round(self, process):
    state = process.initialize()
    x, y = linear.CLIENT_B
    w, b = W0, B0
    # The schedule, not the optimizer's 0.1, gives the rate.
    for k, lr in [(4, 0.2), (2, 0.1), (1, 0.05), (1, 0.025)]:
      output = process.next(
          state, [linear.weights(W0, B0)], [linear.dataset(x, y)])
      state = output.state
      m = output.measurements
      assert (m['num_local_steps'], m['sgd_steps']) == (k, k)
      assert m['client_learning_rate'] == pytest.approx(lr)
      w, b = linear.sgd(W0, B0, [(x, y)], k, lr)
      np.testing.assert_allclose(
          output.result[0].update[0].reshape(-1), W0 - w, rtol=1e-5, atol=1e-6)

  def test_schedule_state_is_not_downloaded(self, process):
    state = process.initialize()
    assert 'schedules' in state
    output = process.next(
        state, [linear.weights(W0, B0)], [linear.dataset(*linear.CLIENT_A)])
    # Weights (3 floats), learning rate and K: as for a constant K.
    assert output.measurements['bytes_downloaded_per_client'] == 4 * 3 + 4 + 4

  def test_loss_schedule_reads_the_first_step_loss(self):
    process = scheduled_client_work.with_schedules(
        k_step_client_work.build_k_step_client_work(linear.model_fn, SGD),
        num_local_steps=schedules.loss_ratio(8, exponent=1.0, window=1))
    state = process.initialize()
    weights = [linear.weights(W0, B0)]
    first = process.next(state, weights, [linear.dataset(*linear.CLIENT_A)])
    second = process.next(
        first.state, weights, [linear.dataset(*linear.CLIENT_B)])
    assert second.measurements['num_local_steps'] == 8  # F_0 is round 0's.
    ratio = _mse(W0, B0, *linear.CLIENT_B) / _mse(W0, B0, *linear.CLIENT_A)
    assert second.state['num_local_steps'] == int(np.ceil(8 * ratio))


@pytest.mark.parametrize('k, error', [(0, ValueError), (2.0, TypeError), (True, TypeError)])
def test_bad_num_local_steps(k, error):
  with pytest.raises(error, match='num_local_steps'):
    k_step_client_work.build_k_step_client_work(linear.model_fn, SGD, num_local_steps=k)


class _BranchesInPython(client_extensions.ClientExtension):

  def augmenting_gradient(self, inputs):
    if inputs[keys.NUM_LOCAL_STEPS] > 1:  # A tensor as a Python bool.
      return None
    return None


def test_python_if_on_a_tensor_says_there_is_no_autograph():
  with pytest.raises(TypeError) as raised:
    k_step_client_work.build_k_step_client_work(
        linear.model_fn, SGD, num_local_steps=2,
        extensions=[_BranchesInPython()])
  assert str(raised.value) == (
      'build_k_step_client_work: Using a symbolic `tf.Tensor` as a Python '
      '`bool` is not allowed in a function it traces (a client extension, '
      'loss, model or optimizer). tff_mixed traces them without AutoGraph, '
      'as TFF traces its TensorFlow computations: branch with tf.cond and '
      'loop with tff_mixed.templates.step_loop.loop or fold.')


def test_keras_optimizer_rejected():
  with pytest.raises(TypeError, match='optimizer'):
    k_step_client_work.build_k_step_client_work(
        linear.model_fn, tf.keras.optimizers.SGD(0.1), num_local_steps=1
    )


def test_dense_gradients_of_an_embedding_lookup_and_an_unused_variable():
  table = tf.Variable([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
  unused = tf.Variable(7.0)
  with tf.GradientTape() as tape:
    # Row 2 twice, row 0 once: the gradient is IndexedSlices.
    loss = tf.reduce_sum(tf.nn.embedding_lookup(table, [2, 0, 2]) * [1.0, 2.0])
  grad_table, grad_unused = step_loop.dense_gradients(
      tape, loss, (table, unused))
  assert not isinstance(grad_table, tf.IndexedSlices)
  np.testing.assert_array_equal(grad_table, [[1.0, 2.0], [0, 0], [2.0, 4.0]])
  assert float(grad_unused) == 0.0


def test_client_flops_measurement_is_the_cohort_mean():
  process = algorithms.build_fed_avg(
      linear.model_fn, SGD, num_local_steps=2,
      flops_per_step=lambda batch: 10.0 * batch + 1.0)
  data = [linear.dataset(*linear.CLIENT_A), linear.dataset(*linear.CLIENT_B)]
  output = process.next(process.initialize(), data)
  # A: 2 steps of its 3-example batch, 2 x 31; B: 2 steps of 2, 2 x 21.
  assert output.metrics['client_work'][
      keys.CLIENT_FLOPS] == (62.0 + 42.0) / 2
