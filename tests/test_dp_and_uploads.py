"""DP through one helper in every builder; uploads apart from measurements.

* `tff_mixed.aggregators.gaussian_fixed` is taken by every builder through
  `client_extensions.model_aggregation`: a weighting by examples or dataset
  size is refused in one line naming `client_weighting`.
* The K-step client work hands the server step its uploads (`sgd_steps`,
  the extensions' sums) by name: its measurements hold only measurements.
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import linear
from tff_mixed import aggregators
from tff_mixed import algorithms
from tff_mixed import execution
from tff_mixed import keys
from tff_mixed import templates
from tff_mixed.templates import client_extensions
from tff_mixed.templates import client_groups
from tff_mixed.templates import composers
from tff_mixed.templates import k_step_client_work

SGD = tff.learning.optimizers.build_sgdm
NUM_EXAMPLES = tff.learning.ClientWeighting.NUM_EXAMPLES
REFUSED = 'client_weighting=.* cannot be used with model_aggregator'


def _clients():
  return [linear.dataset(*linear.CLIENT_A, batch_size=2),
          linear.dataset(*linear.CLIENT_B)]


def _central_data():
  return linear.dataset(*linear.CLIENT_B)


DP_BUILDERS = {
    'fed_avg': lambda **kw: algorithms.build_fed_avg(
        linear.model_fn, SGD(0.1), num_local_steps=2, **kw),
    'fed_adam': lambda **kw: algorithms.build_fed_adam(
        linear.model_fn, SGD(0.1), num_local_steps=2, **kw),
    'adaptive_fed_opt': lambda **kw: algorithms.build_adaptive_fed_opt(
        linear.model_fn, SGD(0.1), server_learning_rate=0.1,
        num_local_steps=2, **kw),
    'mixed_fl': lambda **kw: algorithms.build_mixed_fl(
        linear.model_fn, SGD(0.1), central_data_fn=_central_data,
        mixing='parallel_training', num_local_steps=2, **kw),
}


@pytest.mark.parametrize('weighting', [NUM_EXAMPLES, templates.DATASET_SIZE])
@pytest.mark.parametrize('name', DP_BUILDERS)
def test_dp_refuses_a_weighting_by_examples(name, weighting):
  with pytest.raises(ValueError, match=REFUSED) as error:
    DP_BUILDERS[name](
        client_weighting=weighting,
        model_aggregator=aggregators.gaussian_fixed(0.0, 2, 1.0))
  assert '\n' not in str(error.value)


def test_the_server_step_receives_uploads_measurements_only_measure():
  """Extensions' sums come out as `uploads`, named; `next` is
  `next_with_uploads` without them, and the bytes still count them."""
  def build(extensions):
    return k_step_client_work.build_k_step_client_work(
        linear.model_fn, SGD(0.1), num_local_steps=2,
        extensions=extensions)

  process = build([client_extensions.UpdateSum(),
                   client_extensions.FirstGradientMean()])
  assert isinstance(process, composers.UploadingClientWork)
  weights = linear.weights([0.3, -0.2], 0.1)
  state = process.initialize()
  output = process.next_with_uploads(state, [weights, weights], _clients())
  uploads = output[keys.UPLOADS]
  assert list(uploads) == [keys.SGD_STEPS, keys.UPDATE_SUM,
                           keys.FIRST_GRADIENT_MEAN]
  measurements = output['measurements']
  assert keys.UPDATE_SUM not in measurements
  assert keys.FIRST_GRADIENT_MEAN not in measurements
  assert uploads[keys.SGD_STEPS] == measurements[keys.SGD_STEPS] == 4
  for total, *parts in zip(uploads[keys.UPDATE_SUM],
                           *[r.update for r in output['result']]):
    np.testing.assert_allclose(total, np.sum(parts, axis=0), rtol=1e-6)
  plain = process.next(state, [weights, weights], _clients())
  assert list(plain.measurements) == list(measurements)
  # The first gradients are uploaded (counted); the update sum is not.
  alone = build([client_extensions.UpdateSum()]).next(
      state, [weights, weights], _clients()).measurements
  model_bytes = 4 * 3
  assert (measurements[keys.BYTES_UPLOADED]
          == alone[keys.BYTES_UPLOADED] + model_bytes + 4)



def _dense_model():
  """y = x W + b, W 30 x 20 (600 elements), b 20."""
  keras = tf.keras.Sequential([tf.keras.layers.InputLayer(input_shape=(30,)),
                               tf.keras.layers.Dense(20)])
  return tff.learning.models.from_keras_model(
      keras, loss=tf.keras.losses.MeanSquaredError(),
      input_spec=(tf.TensorSpec([None, 30], tf.float32),
                  tf.TensorSpec([None, 20], tf.float32)))


def test_a_compressed_update_is_counted_as_it_is_uploaded():
  """With `aggregators.compression(threshold=100, bits=3)` the 600-element
  kernel goes up as 3-bit codes packed 28 bits to an int32 (TFF's encoder)
  plus its float32 min and max: 4 ceil(600 * 3 / 28) + 8 = 268 bytes for
  2,400; the 20-element bias (under the threshold) as it is. The rest of
  the upload (weight, metrics) is unchanged."""
  data = tf.data.Dataset.from_tensor_slices(
      (tf.ones([4, 30]), tf.zeros([4, 20]))).batch(2)

  def uploaded(model_aggregator):
    process = algorithms.build_fed_avg(
        _dense_model, SGD(0.1), num_local_steps=1,
        model_aggregator=model_aggregator)
    state = process.initialize()
    return process.next(state, [data]).metrics[
        'client_work'][keys.BYTES_UPLOADED]

  plain = uploaded(tff.learning.robust_aggregator())
  compressed = uploaded(aggregators.compression(threshold=100, bits=3))
  assert plain - compressed == 600 * 4 - (4 * 65 + 8)
  factory = aggregators.compression(threshold=100, bits=3)
  update_type = tff.StructType([tff.TensorType(np.float32, [30, 20]),
                                tff.TensorType(np.float32, [20])])
  assert factory.update_bytes(update_type) == 268 + 20 * 4
  # TFF's default threshold quantises neither: the robust aggregator's bytes.
  assert uploaded(aggregators.compression()) == plain

# ------------------------------------------ FedGBO, Mimelite, MFL with DP
from tff_mixed import optimizers  # pylint: disable=g-import-not-at-top

GBO_BUILDERS = {
    'fed_gbo': algorithms.build_fed_gbo,
    'mimelite': algorithms.build_mimelite,
    'mfl': algorithms.build_mfl,
}
GBO_OPTIMIZERS = {
    'fed_gbo': lambda: optimizers.build_adam(0.1, 0.6, 0.8, 0.01),
    'mimelite': lambda: optimizers.build_rmsprop(0.1, 0.8, 0.01),
    'mfl': lambda: optimizers.build_sgdm(0.1, 0.6),
}


def _gbo(name, aggregator=None):
  return GBO_BUILDERS[name](
      linear.model_fn, GBO_OPTIMIZERS[name](), num_local_steps=3,
      model_aggregator=aggregator)


def _start(process):
  return process.set_model_weights(
      process.initialize(), linear.weights([0.5, -0.25], 0.1))


def _flat(process, state):
  return np.concatenate([np.ravel(t) for t in
                         process.get_model_weights(state).trainable])


def _stats(state):
  return tf.nest.flatten(state['client_work']['optimizer_state'])


@pytest.mark.parametrize('name', ['fed_gbo'])
def test_gaussian_fixed_at_zero_noise_is_the_uniform_mean(name):
  plain, dp = _gbo(name), _gbo(name, aggregators.gaussian_fixed(0.0, 2, 1e6))
  states = [_start(plain), _start(dp)]
  for _ in range(2):
    states = [p.next(s, _clients()).state for p, s in zip((plain, dp), states)]
  np.testing.assert_allclose(_flat(dp, states[1]), _flat(plain, states[0]),
                             rtol=1e-6, atol=1e-6)
  for a, b in zip(_stats(states[1]), _stats(states[0])):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize('name', ['fed_gbo'])
def test_a_biting_clip_gives_the_hand_clipped_mean(name):
  clip = 0.05
  plain = _gbo(name)
  x0 = _flat(plain, _start(plain))
  updates = [x0 - _flat(plain, plain.next(_start(plain), [c]).state)
             for c in _clients()]
  norms = [np.linalg.norm(u) for u in updates]
  assert min(norms) > clip  # The clip bites every client.
  expected = sum(u * min(1.0, clip / n) for u, n in zip(updates, norms)) / 2
  dp = _gbo(name, aggregators.gaussian_fixed(0.0, 2, clip))
  moved = x0 - _flat(dp, dp.next(_start(dp), _clients()).state)
  np.testing.assert_allclose(moved, expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize('name, uploads', [
    ('mimelite', 'its full-batch gradient'),
    ('mfl', 'its optimizer statistics')])
def test_mimelite_and_mfl_refuse_dp_naming_what_it_would_miss(name, uploads):
  with pytest.raises(ValueError, match=(
      f'^model_aggregator gaussian_fixed cannot make {name} private: its '
      f'clients upload {uploads} beside the update')):
    _gbo(name, aggregators.gaussian_fixed(1.0, 5, 0.1))


@pytest.mark.parametrize('name', ['fed_gbo'])
def test_gbo_dp_refuses_num_examples(name):
  with pytest.raises(ValueError, match=REFUSED):
    GBO_BUILDERS[name](
        linear.model_fn, GBO_OPTIMIZERS[name](), num_local_steps=1,
        client_weighting=NUM_EXAMPLES,
        model_aggregator=aggregators.gaussian_fixed(1.0, 5, 0.1))


def _fed_avg_weights(**kwargs):
  process = DP_BUILDERS['fed_avg'](**kwargs)
  state = process.next(process.initialize(), _clients()).state
  return np.concatenate([np.ravel(t) for t in
                         process.get_model_weights(state).trainable])


def test_tffs_compression_and_secure_aggregators_run_in_simulation():
  """Without their adaptive clipping and zeroing (defaults that change the
  mean), TFF's compression aggregator leaves tensors under 10,000 elements
  as they are, so on the linear model it is the mean exactly; its secure
  aggregator (the test runtime's reduction of secure sums, which
  `tff_mixed.execution` applies) is the mean up to its 32-bit quantisation
  of values clipped at +-100 (these are < 1)."""
  mean = _fed_avg_weights()
  np.testing.assert_array_equal(
      _fed_avg_weights(model_aggregator=tff.learning.compression_aggregator(
          zeroing=False, clipping=False)), mean)
  secure = _fed_avg_weights(model_aggregator=tff.learning.secure_aggregator(
      zeroing=False, clipping=False))
  np.testing.assert_allclose(secure, mean, rtol=1e-5, atol=1e-6)
  assert not np.array_equal(secure, mean)  # Quantised: it ran.


def test_the_worker_runs_what_tffs_own_compilation_gives_it():
  """`tff_mixed.execution`'s contexts compile with
  `runtimes.worker_compiler.compile_for_worker`, TFF's two compilations
  chained (the test backend's secure sums as plain sums, then
  `desugar_and_transform_to_native`) with one building block: a round with
  a secure sum, run on the same worker from the same state, gives the same
  bits either way (TFF's compilation names values at random, so the protos
  themselves differ)."""
  process = DP_BUILDERS['fed_avg'](
      model_aggregator=tff.learning.secure_aggregator(zeroing=False,
                                                      clipping=False))
  state = process.initialize()

  def tffs(comp):
    comp = tff.backends.test.replace_secure_intrinsics_with_bodies(comp)
    return tff.backends.native.desugar_and_transform_to_native(comp)

  ours = process.next(state, _clients())
  worker = execution.set_local_execution_context()
  try:
    theirs_context = tff.framework.SyncExecutionContext(**{
        **execution._context_parts(worker, 0),  # pylint: disable=protected-access
        'compiler_fn': tffs})
    with tff.framework.get_context_stack().install(theirs_context):
      theirs = process.next(state, _clients())
  finally:
    execution.set_local_execution_context()
  for a, b in zip(tf.nest.flatten((ours.state, ours.metrics)),
                  tf.nest.flatten((theirs.state, theirs.metrics)),
                  strict=True):
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize('factory', [
    tff.learning.compression_aggregator, tff.learning.secure_aggregator])
def test_per_client_aggregators_are_refused_in_fast_mode(factory):
  with pytest.raises(ValueError, match=(
      'cannot run on client groups: a group uploads the mean of its '
      "clients' updates")):
    DP_BUILDERS['fed_avg'](model_aggregator=factory(),
                           client_groups=client_groups.ClientGroups(2))


def _aggregate(factory, values, weights):
  """Two rounds of `factory`'s process on float32 [values] (a client each)
  with `weights`: the results and measurements of the second."""
  value_type = tff.TensorType(np.float32, values[0].shape)
  process = factory.create(value_type, tff.TensorType(np.float32))
  state = process.initialize()
  for _ in range(2):
    output = process.next(state, values, weights)
    state = output.state
  return output


def test_compression_defaults_are_tffs_and_a_lower_threshold_quantises():
  """`aggregators.compression()` is TFF's compression_aggregator (the same
  means and measurements, exactly); at threshold 100 a 120-element tensor
  is quantised to 8 bits: each client's value within one step of its
  range / 255 (stochastic rounding, Suresh et al. 2017), so the mean is
  too, and not exact; at 2 bits, further."""
  rng = np.random.default_rng(0)
  values = [rng.normal(size=120).astype(np.float32) * 0.01 for _ in range(3)]
  weights = [1.0, 2.0, 3.0]
  ours = _aggregate(aggregators.compression(), values, weights)
  tffs = _aggregate(tff.learning.compression_aggregator(), values, weights)
  np.testing.assert_array_equal(ours.result, tffs.result)
  tf.nest.map_structure(np.testing.assert_array_equal, ours.measurements,
                        tffs.measurements)
  mean = np.average(values, axis=0, weights=weights)
  np.testing.assert_allclose(ours.result, mean, rtol=1e-6)  # Not quantised.
  quantised = _aggregate(aggregators.compression(threshold=100), values,
                         weights).result
  step = max(np.ptp(v) for v in values) / 255
  assert 0 < np.max(np.abs(quantised - mean)) <= step
  coarse = _aggregate(aggregators.compression(threshold=100, bits=2),
                      values, weights).result
  assert np.max(np.abs(coarse - mean)) > np.max(np.abs(quantised - mean))
