"""What algorithms add to the K-step client work
(`k_step_client_work.build_k_step_client_work`'s `extensions`).

Each is a `ClientExtension` (defined here): a part of the client work's
state, what clients receive of it, what they upload (named), and how the
server updates that part from the uploads' sums.

* `AugmentingGradient`: Gradient Transfer's g, added at every client step
  (seed 004, Algorithms 1-2); the mixed-FL server step writes it.
* `ProximalTerm`: FedProx's mu (x - x_t) added to every client step.
* `ClipUpdate`: every client's update clipped to an L2 norm (DP-FedAvg with
  `tff_mixed.aggregators.gaussian_fixed`), in faithful and fast mode;
  `model_aggregation` is how every builder takes its model aggregator and
  adds it.
* `UpdateSum`: the plain sum of the clients' updates (2-way Gradient
  Transfer's App. A.2), beside the aggregator's weighted mean, for the
  server step.
* `FirstGradientMean`: the cohort's mean first-step gradient at the round's
  model (seed 004 Eq. 7's federated gradient), for the server step.
* `GlobalOptimizerState`: seed 003's global optimizer statistics s, which
  every client starts from; updated after the round by averaging the
  clients' final states (MFL), by tracking the clients' mean full-batch
  gradient (Mimelite), or by the server step (FedGBO), the way TFF's
  `mime.py` keeps its optimizer state in its client work.
"""

import collections
from collections.abc import Callable
from typing import Any, NamedTuple, Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed import aggregators
from tff_mixed import keys
from tff_mixed import optimizers
from tff_mixed.templates import client_groups as client_groups_lib
from tff_mixed.templates import common
from tff_mixed.templates import step_loop

AUGMENTING_GRADIENT = keys.AUGMENTING_GRADIENT
FIRST_GRADIENT_MEAN = keys.FIRST_GRADIENT_MEAN
UPDATE_SUM = keys.UPDATE_SUM
OPTIMIZER_STATE = 'optimizer_state'
OPTIMIZER_HPARAMS = keys.OPTIMIZER_HPARAMS
UNIFORM = tff.learning.ClientWeighting.UNIFORM
NUM_EXAMPLES = tff.learning.ClientWeighting.NUM_EXAMPLES


class ClientExtension:
  """A part an algorithm adds to the K-step client work (override what it needs).

  Every method runs inside a TensorFlow computation, traced as written
  (without AutoGraph, as TFF traces a `tff.tensorflow.computation`): branch
  or loop on a tensor with `tf.cond` or `step_loop.loop`, not Python's `if`
  or `for`. Extensions of one client work must use distinct state keys,
  upload names and measurements.
  """

  # Whether clients compute their full-batch gradient before training
  # (`ClientOutput.full_gradient`).
  needs_full_gradient = False
  # Whether clients keep their first step's gradient
  # (`ClientOutput.first_gradient`; their step loop carries it otherwise not).
  needs_first_gradient = False
  # Whether `bytes_uploaded_per_client` counts this extension's uploads
  # (False for what the server derives from what clients upload anyway).
  counted_in_bytes = True

  def initial_state(self, optimizer, trainable_specs) -> collections.OrderedDict:
    """Keys this extension adds to the client work's initial state."""
    del optimizer, trainable_specs
    return collections.OrderedDict()

  def client_inputs(self, optimizer, state, inputs) -> collections.OrderedDict:
    """What every client receives: `inputs` (so far) changed or extended."""
    del optimizer, state
    return inputs

  def initial_optimizer_state(self, optimizer, inputs):
    """The optimizer state a client starts from; None: `initialize`."""
    del optimizer, inputs
    return None

  def augmenting_gradient(self, inputs):
    """A gradient added at every client step (weights-shaped), or None."""
    del inputs
    return None

  def step_gradient(self, inputs):
    """None, or `f(x, x_0)`: a term added to every client step's gradient
    from the client's current weights x and the round's x_0 (FedProx's
    mu (x - x_0)), lists of tensors of one client (vectorised groups call
    it inside their per-client step too)."""
    del inputs
    return None

  def transform_update(self, update):
    """The client's update as it leaves the client (e.g. clipped)."""
    return update

  def uploads(self, inputs, output: step_loop.ClientOutput):
    """Named values each client uploads; the server receives their sums."""
    del inputs, output
    return collections.OrderedDict()

  def update_bytes(self, update_type):
    """What a client's update (of TFF type `update_type`) costs to upload,
    in bytes, if this extension's aggregator encodes it; None: its tensors'
    bytes."""
    del update_type
    return None

  def client_flops(self, output: step_loop.ClientOutput):
    """FLOPs this extension adds to a client's measured FLOPs, or None."""
    del output
    return None

  def server_update(self, state, sums, weight_sum):
    """`(state, server uploads)` after the round from the uploads' sums.

    `sums` are the sums over the cohort of what `uploads` returned (None if
    this extension uploads nothing), `weight_sum` the sum of the clients'
    update weights (None if no extension uploads anything). The server
    uploads (an `OrderedDict`, named) go to the process's server step
    (`composers.UploadingClientWork`), not into the measurements.
    """
    del sums, weight_sum
    return state, collections.OrderedDict()



class AugmentingGradient(ClientExtension):
  """State `augmenting_gradient` (zeros at first), sent and added each step."""

  def initial_state(self, optimizer, trainable_specs):
    del optimizer
    return collections.OrderedDict([(AUGMENTING_GRADIENT, [
        np.zeros(s.shape, s.dtype.as_numpy_dtype) for s in trainable_specs])])

  def client_inputs(self, optimizer, state, inputs):
    del optimizer
    inputs = collections.OrderedDict(inputs)
    inputs[AUGMENTING_GRADIENT] = state[AUGMENTING_GRADIENT]
    return inputs

  def augmenting_gradient(self, inputs):
    return inputs[AUGMENTING_GRADIENT]


class ProximalTerm(ClientExtension):
  """FedProx's proximal term (Li et al., *Federated Optimization in
  Heterogeneous Networks*, Alg. 2): each client minimises
  f_i(x) + (mu / 2) ||x - x_t||^2, so every step's gradient gains
  mu (x - x_t), x_t the round's model.

  TFF 0.87's `build_weighted_fed_prox` adds mu (x_t - x) instead (its
  `proximal_client_work` maps `lambda x, y: mu * (y - x)` over the current
  and the initial weights), which pushes clients away from x_t; a negative
  `strength` here reproduces that reading (tests/test_fed_prox.py).
  """

  def __init__(self, strength: float):
    self._strength = float(strength)

  def step_gradient(self, inputs):
    del inputs
    strength = self._strength
    return lambda x, x0: [strength * (a - b) for a, b in zip(x, x0)]


class ClipUpdate(ClientExtension):
  """Clips each client's update to L2 norm `clip_norm` (DP-FedAvg's bound on
  a client's contribution, `tf.clip_by_global_norm` as TFF's DP queries),
  before anything sums it, so client groups clip per client too."""

  def __init__(self, clip_norm: float):
    self._clip_norm = clip_norm

  def transform_update(self, update):
    # `tf.clip_by_global_norm`'s arithmetic (a non-finite norm gives a NaN
    # scale), with the squared norm summed by `reduce_sum` instead of its
    # `L2Loss` op, which `tf.vectorized_map` cannot convert: a vectorised
    # group would clip its clients in a loop, logging a warning each trace.
    flat = tf.nest.flatten(update)
    norm = tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(t)) for t in flat]))
    clip_norm = tf.constant(self._clip_norm, norm.dtype)
    scale = clip_norm * tf.minimum(1.0 / norm, 1.0 / clip_norm) + (
        norm - norm)
    return tf.nest.pack_sequence_as(
        update, [t * tf.cast(scale, t.dtype) for t in flat])


class ModelAggregation(NamedTuple):
  """A builder's model aggregator and what it asks of the client work."""
  aggregator: tff.templates.AggregationProcess
  extensions: list[ClientExtension]  # Before the others.
  client_weighting: Any  # What the client work weights updates by.


def model_aggregation(model_aggregator, update_type, *, client_weighting,
                      client_groups: Optional[
                          client_groups_lib.ClientGroups] = None
                      ) -> ModelAggregation:
  """The one way a builder takes its `model_aggregator` (None: the default).

  `tff_mixed.aggregators.gaussian_fixed` (DP-FedAvg with fixed clipping)
  gets `ClipUpdate` in the client work, and its mean is unweighted like
  TFF's: `client_weighting` None means `UNIFORM` with it (`NUM_EXAMPLES`
  without), and a weighting by examples or dataset size is refused rather
  than switched. `tff_mixed.aggregators.compression` gets `EncodedUpdate`,
  so `bytes_uploaded_per_client` counts the update as it is encoded. The
  aggregator is `common.build_model_aggregator`'s.

  Raises:
    ValueError: For `gaussian_fixed` with a weighting other than `UNIFORM`,
      naming `client_weighting` (and for aggregators client groups cannot
      run).
  """
  clips = isinstance(model_aggregator, aggregators.GaussianFixedClipFactory)
  if client_weighting is None:
    client_weighting = UNIFORM if clips else NUM_EXAMPLES
  extensions = []
  if clips:
    if client_weighting != UNIFORM:
      raise ValueError(
          f'client_weighting={getattr(client_weighting, "name", client_weighting)}'
          ' cannot be used with model_aggregator tff_mixed.aggregators.'
          'gaussian_fixed, whose mean is unweighted (clipped updates summed, '
          'noised and divided by clients_per_round): pass '
          'tff.learning.ClientWeighting.UNIFORM or leave client_weighting '
          'unset.')
    extensions.append(ClipUpdate(model_aggregator.clip_norm))
  if isinstance(model_aggregator, aggregators.CompressionFactory):
    extensions.append(EncodedUpdate(model_aggregator))
  aggregator = common.build_model_aggregator(
      model_aggregator, update_type, client_groups=client_groups,
      clips_updates=clips)
  return ModelAggregation(aggregator, extensions, client_weighting)


class EncodedUpdate(ClientExtension):
  """Counts each client's update in `bytes_uploaded_per_client` as a
  compressing aggregator (`tff_mixed.aggregators.CompressionFactory`)
  uploads it; changes nothing else."""

  def __init__(self, factory: aggregators.CompressionFactory):
    self._factory = factory

  def update_bytes(self, update_type):
    return self._factory.update_bytes(update_type)


class UpdateSum(ClientExtension):
  """Gives the server step `update_sum`: the sum over the cohort of the kept client
  updates (a dropped client's is 0). Not an extra upload: the server sums
  the same updates the aggregator receives, so `bytes_uploaded_per_client`
  does not count it; as an upload it is a sum over clients, so client groups
  (which send their clients' mean update to the aggregator) keep it exact."""

  counted_in_bytes = False

  def uploads(self, inputs, output):
    del inputs
    return collections.OrderedDict(update=output.result.update)

  def server_update(self, state, sums, weight_sum):
    del weight_sum
    return state, collections.OrderedDict([(UPDATE_SUM, sums['update'])])


class FirstGradientMean(ClientExtension):
  """Gives the server step `first_gradient_mean`: the unweighted mean over the clients
  that trained of their first-step gradient (`loss_weight * grad`) at the
  round's model. No extra computation; one model-sized upload more per
  client, which `bytes_uploaded_per_client` counts."""

  needs_first_gradient = True

  def uploads(self, inputs, output):
    del inputs
    counted = tf.cast(output.result.update_weight > 0, tf.float32)
    return collections.OrderedDict(
        first_gradient=output.first_gradient, count=counted)

  def server_update(self, state, sums, weight_sum):
    del weight_sum
    return state, collections.OrderedDict([(FIRST_GRADIENT_MEAN, [
        tf.math.divide_no_nan(g, sums['count'])
        for g in sums['first_gradient']])])


# How `GlobalOptimizerState` updates s after a round.
SERVER_STEP = 'server_step'  # The server step does (FedGBO).
AVERAGE = 'average'  # The mean of the clients' final states (MFL).
TRACK_FULL_GRADIENT = 'track_full_gradient'  # s <- T(s, mean grad) (Mimelite).
STATISTICS_UPDATES = (SERVER_STEP, AVERAGE, TRACK_FULL_GRADIENT)


class GlobalOptimizerState(ClientExtension):
  """State `optimizer_state`: the client optimizer's state, every client's
  start (seed 003's global statistics s, with the round's hyper-parameters
  set from `optimizer_hparams`, so the learning rate is sent once).

  Args:
    statistics_update: `SERVER_STEP` (s is left to the process's server
      step), `AVERAGE` (clients upload their final statistics weighted by
      their update weight, and s becomes their mean; kept when no client
      trained) or `TRACK_FULL_GRADIENT` (clients upload their full-batch
      gradient at the round's model, computed before training, and
      s <- T(s, its mean with the update weights); kept when no client
      trained).
    optimizer: The `tff_mixed.optimizers.AdaptiveOptimizer` whose T step
      `TRACK_FULL_GRADIENT` uses.
    full_gradient_flops: Optional `examples -> FLOPs` of the full-gradient
      pass, added to the measured client FLOPs.
  """

  def __init__(self, statistics_update: str,
               optimizer: Optional[optimizers.AdaptiveOptimizer] = None,
               full_gradient_flops: Optional[Callable[[tf.Tensor],
                                                      tf.Tensor]] = None):
    if statistics_update not in STATISTICS_UPDATES:
      raise ValueError(f'statistics_update must be one of '
                       f'{STATISTICS_UPDATES}, got {statistics_update!r}.')
    tracking = statistics_update == TRACK_FULL_GRADIENT
    if tracking and optimizer is None:
      raise ValueError(f'{TRACK_FULL_GRADIENT} needs the optimizer.')
    if full_gradient_flops is not None and not tracking:
      raise ValueError(
          f'full_gradient_flops needs statistics_update={TRACK_FULL_GRADIENT!r}.')
    self._update = statistics_update
    self._optimizer = optimizer
    self._full_gradient_flops = full_gradient_flops
    self.needs_full_gradient = tracking
    self._hparam_keys = set()  # The optimizer's, known at initial_state.

  def initial_state(self, optimizer, trainable_specs):
    self._hparam_keys = set(common.hparams_of(optimizer))
    return collections.OrderedDict(
        [(OPTIMIZER_STATE, optimizer.initialize(trainable_specs))])

  def client_inputs(self, optimizer, state, inputs):
    # The hyper-parameters ride in the optimizer state, sent instead.
    inputs = collections.OrderedDict(
        (k, v) for k, v in inputs.items() if k != OPTIMIZER_HPARAMS)
    inputs[OPTIMIZER_STATE] = optimizer.set_hparams(
        state[OPTIMIZER_STATE], state[OPTIMIZER_HPARAMS])
    return inputs

  def initial_optimizer_state(self, optimizer, inputs):
    del optimizer
    return inputs[OPTIMIZER_STATE]

  def uploads(self, inputs, output):
    del inputs
    weight = output.result.update_weight
    if self._update == AVERAGE:
      return collections.OrderedDict(statistics=collections.OrderedDict(
          (k, tf.nest.map_structure(lambda t: weight * t, v))
          for k, v in output.optimizer_state.items()
          if k not in self._hparam_keys))
    if self._update == TRACK_FULL_GRADIENT:
      return collections.OrderedDict(
          full_gradient=[weight * g for g in output.full_gradient])
    return collections.OrderedDict()

  def client_flops(self, output):
    if self._full_gradient_flops is None:
      return None
    return self._full_gradient_flops(
        tf.cast(output.full_gradient_examples, tf.float32))

  def server_update(self, state, sums, weight_sum):
    if self._update == SERVER_STEP:
      return state, collections.OrderedDict()
    optimizer_state = collections.OrderedDict(state[OPTIMIZER_STATE])
    trained = weight_sum > 0  # Else no client trained: keep s.
    if self._update == AVERAGE:
      new = collections.OrderedDict(
          (k, tf.nest.map_structure(lambda t: t / weight_sum, v))
          for k, v in sums['statistics'].items())
    else:
      gradient = [tf.math.divide_no_nan(g, weight_sum)
                  for g in sums['full_gradient']]
      new = self._optimizer.track(
          optimizers.statistics_of(optimizer_state), gradient)
    for key, value in new.items():
      optimizer_state[key] = tf.nest.map_structure(
          lambda n, o: tf.where(trained, n, o), value, optimizer_state[key])
    state = collections.OrderedDict(state)
    state[OPTIMIZER_STATE] = optimizer_state
    return state, collections.OrderedDict()
