"""DP-FedAvg with fixed clipping that also runs on client groups (fast mode).

TFF's `tff.aggregators.DifferentiallyPrivateFactory.gaussian_fixed(
noise_multiplier, clients_per_round, clip)` clips every client's update to
L2 norm `clip` inside the aggregator, sums, adds Gaussian noise of standard
deviation `noise_multiplier * clip` and divides by `clients_per_round`. A
client group sends the aggregator one value for many clients, so there the
clipping must happen before the group sums: `gaussian_fixed` below splits
the same mechanism in two,

* the client work clips each client's update (`clip_norm`, applied by the
  builders through `client_extensions.ClipUpdate`), in either mode;
* this factory sums what it receives (weighted: a group sends its clipped
  updates' mean with the number of kept clients as weight, a single client
  its clipped update with weight 1), adds the noise and divides.

So faithful and fast mode release the same sum plus the same noise: a
client's contribution is bounded by `clip_norm` in both. The noise is drawn
with `tf.random.stateless_normal` from `(seed, round)` kept in the
aggregator's state, so a run is reproducible and resumes with the noise of an
uninterrupted one. Adaptive clipping (TFF's `dp_aggregator`) needs each
client's norm and is not offered here.
"""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tensorflow_model_optimization.python.core.internal import tensor_encoding as te

from tff_mixed import checks
from tff_mixed.metrics import communication


class GaussianFixedClipFactory(tff.aggregators.WeightedAggregationFactory):
  """`(sum of clipped updates + N(0, (z C)^2)) / clients_per_round`.

  Build it with `gaussian_fixed`; the builders clip every client's update
  to `clip_norm` when they see it.
  """

  def __init__(self, noise_multiplier: float, clients_per_round: int,
               clip_norm: float, seed: int):
    self.noise_multiplier = noise_multiplier
    self.clients_per_round = clients_per_round
    self.clip_norm = clip_norm
    self.seed = seed

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:
    stddev = self.noise_multiplier * self.clip_norm
    denominator = float(self.clients_per_round)
    seed = self.seed

    @tff.tensorflow.computation
    def initial_round():
      return np.int64(0)

    @tff.tensorflow.computation(value_type, weight_type)
    def weighted(value, weight):
      return tf.nest.map_structure(
          lambda v: v * tf.cast(weight, v.dtype), value)

    @tff.tensorflow.computation(value_type, np.int64)
    def release(total, round_num):
      flat = tf.nest.flatten(total)
      noised = []
      for i, t in enumerate(flat):
        noise = tf.random.stateless_normal(
            tf.shape(t), seed=tf.stack([
                tf.constant(seed, tf.int64), round_num * len(flat) + i]),
            dtype=t.dtype)
        noised.append((t + stddev * noise) / denominator)
      return tf.nest.pack_sequence_as(total, noised), round_num + 1

    @tff.federated_computation
    def init_fn():
      return tff.federated_eval(initial_round, tff.SERVER)

    @tff.federated_computation(
        init_fn.type_signature.result,
        tff.FederatedType(value_type, tff.CLIENTS),
        tff.FederatedType(weight_type, tff.CLIENTS))
    def next_fn(state, value, weight):
      total = tff.federated_sum(tff.federated_map(weighted, (value, weight)))
      result, new_state = tff.federated_map(release, (total, state))
      measurements = tff.federated_value(
          collections.OrderedDict(
              dp_clip_norm=np.float32(self.clip_norm),
              dp_noise_stddev=np.float32(stddev)), tff.SERVER)
      return tff.templates.MeasuredProcessOutput(new_state, result,
                                                 measurements)

    return tff.templates.AggregationProcess(init_fn, next_fn)


def gaussian_fixed(noise_multiplier: float, clients_per_round: int,
                   clip_norm: float, *, seed: int = 0
                   ) -> GaussianFixedClipFactory:
  """DP-FedAvg's Gaussian mechanism with fixed clipping (see module doc).

  Pass it as `model_aggregator=` to `build_fed_avg` (and FedAdam,
  AdaptiveFedOpt) or to `build_mixed_fl` (Parallel Training, 1-way GT), in
  faithful or fast mode. Like TFF's, it is an unweighted mean: the builders'
  client weighting does not apply.

  Args:
    noise_multiplier: z >= 0; the noise's standard deviation is z * clip_norm.
    clients_per_round: The denominator (the expected cohort size).
    clip_norm: C > 0, the L2 bound on every client's update.
    seed: Seeds the noise (with the round number).
  """
  checks.check_number(noise_multiplier, 'noise_multiplier', allow_zero=True)
  checks.check_number(clip_norm, 'clip_norm')
  checks.check_num_steps(clients_per_round, 'clients_per_round')
  return GaussianFixedClipFactory(float(noise_multiplier),
                                  int(clients_per_round), float(clip_norm),
                                  int(seed))


def epsilon(noise_multiplier: float, sampling_rate: float, rounds: int,
            delta: float) -> float:
  """Client-level epsilon of `rounds` rounds of `gaussian_fixed`, at `delta`.

  `dp_accounting`'s RDP accountant (the one TFF's DP tutorials use) of a
  Gaussian mechanism of noise multiplier z, each round's cohort taken as a
  Poisson sample of rate `sampling_rate` (clients a round / clients): an
  estimate, since a run samples a fixed-size cohort without replacement.
  Infinite without noise.
  """
  import dp_accounting  # pylint: disable=g-import-not-at-top
  if noise_multiplier <= 0:
    return float('inf')
  accountant = dp_accounting.rdp.RdpAccountant()
  accountant.compose(dp_accounting.PoissonSampledDpEvent(
      sampling_rate, dp_accounting.GaussianDpEvent(noise_multiplier)), rounds)
  return float(accountant.get_epsilon(delta))


def epsilon_columns(noise_multiplier: float, sampling_rate: float,
                    delta: float):
  """`round_num -> {dp/epsilon, dp/delta}`: `epsilon` after `round_num`
  rounds, for the driver's `round_columns` (metrics.csv then records the
  running guarantee of the rounds so far).

  The accountant's RDP of one round is computed once (the costly part,
  ~0.15 s) and scaled by the round count, which is what composing it that
  many times does; each round then costs ~0.3 ms instead of a new
  accountant's 0.15 s.
  """
  import dp_accounting  # pylint: disable=g-import-not-at-top
  from tff_mixed import keys  # pylint: disable=g-import-not-at-top
  if noise_multiplier <= 0:
    return lambda round_num: {keys.DP_EPSILON: float('inf'),
                              keys.DP_DELTA: delta}
  accountant = dp_accounting.rdp.RdpAccountant()
  accountant.compose(dp_accounting.PoissonSampledDpEvent(
      sampling_rate, dp_accounting.GaussianDpEvent(noise_multiplier)), 1)
  # The accountant's own orders and one round's RDP at each (private
  # attributes: dp_accounting has no public getter; a test pins the result
  # to `epsilon`).
  orders, one_round = accountant._orders, np.asarray(accountant._rdp)  # pylint: disable=protected-access

  def columns(round_num: int) -> dict[str, float]:
    value, _ = dp_accounting.rdp.compute_epsilon(
        orders, one_round * round_num, delta)
    return {keys.DP_EPSILON: float(value), keys.DP_DELTA: delta}

  return columns


# TFF's compression_aggregator quantises only tensors of more elements than
# this, to 8 bits (neither is one of its parameters).
COMPRESSION_THRESHOLD = 20_000
COMPRESSION_BITS = 8


class CompressionFactory(tff.aggregators.WeightedAggregationFactory):
  """TFF's compression aggregator with its threshold and bits as arguments
  (build it with `compression`), which also says what a client's update
  costs to upload through it (`update_bytes`; the builders report it as
  `bytes_uploaded_per_client`)."""

  def __init__(self, threshold: int, bits: int):
    self.threshold, self.bits = threshold, bits
    factory = tff.aggregators.MeanFactory(
        tff.aggregators.EncodedSumFactory.quantize_above_threshold(
            quantization_bits=bits, threshold=threshold))
    # Clipping adapts to a moderately high norm, zeroing to somewhat above
    # the highest (TFF's `_default_clipping` / `_default_zeroing`).
    estimate = tff.aggregators.PrivateQuantileEstimationProcess.no_noise
    factory = tff.aggregators.clipping_factory(
        estimate(initial_estimate=1.0, target_quantile=0.8,
                 learning_rate=0.2),
        factory)
    self._factory = tff.aggregators.zeroing_factory(
        estimate(initial_estimate=10.0, target_quantile=0.98,
                 learning_rate=np.log(10.0), multiplier=2.0, increment=1.0),
        factory)

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:
    return self._factory.create(value_type, weight_type)

  def update_bytes(self, value_type: tff.types.Type) -> int:
    """The bytes of a client's update of `value_type` as it is uploaded:
    a tensor of more than `threshold` elements as TFF's encoder sends it
    (`bits`-bit codes bit-packed into int32s, 28 bits to each, and its
    float32 minimum and maximum), counted from the encoder's own output;
    a smaller one as it is. The clipping and zeroing norms' quantile
    estimates (a few numbers a client) are not counted, as for the other
    aggregators."""
    if isinstance(value_type, tff.TensorType):
      if np.prod(value_type.shape, dtype=np.int64) <= self.threshold:
        return communication.type_size_bytes(value_type)
      spec = tf.TensorSpec(value_type.shape, value_type.dtype)
      with tf.Graph().as_default():
        encoder = te.encoders.as_gather_encoder(
            te.encoders.uniform_quantization(self.bits), spec)
        params, _, _ = encoder.get_params(encoder.initial_state())
        encoded, _ = encoder.encode(tf.zeros(spec.shape, spec.dtype), params)
      return sum(t.dtype.size * t.shape.num_elements()
                 for t in tf.nest.flatten(encoded))
    return sum(self.update_bytes(t)
               for _, t in tff.structure.iter_elements(value_type))


def compression(threshold: int = COMPRESSION_THRESHOLD,
                bits: int = COMPRESSION_BITS) -> CompressionFactory:
  """TFF's `tff.learning.compression_aggregator()` with its two constants
  as arguments: uniform quantisation to `bits` bits of every update tensor
  of more than `threshold` elements (Suresh et al. 2017), inside the
  weighted mean, inside adaptive L2 clipping and zeroing.

  The defaults build the same aggregator as TFF's (a test runs both). What
  it adds: a model whose tensors are all small (a digits MLP's largest has
  2,048 elements) is compressed at a lower `threshold`; TFF's fixes 20,000.
  And the builders count a client's upload as it is sent
  (`CompressionFactory.update_bytes`), not as float32s. The clipping and
  zeroing are TFF's `robust_aggregator`'s, built here from the same public
  parts and constants (its helpers are private). TFF checks `bits` (1 to
  16) and `threshold` (>= 0).
  """
  return CompressionFactory(threshold, bits)
