"""Adaptive optimizers as small pure functions of their statistics.

Seed 003 (Mills et al., *Accelerating Federated Learning with a Global Biased
Optimiser*), Table 1: an adaptive optimizer is three steps on statistics s,

  Update    U(s, g, eta)             the change a step adds to the weights,
                                     with s held fixed;
  Tracking  T(s, g)                  s after seeing gradient g;
  Inverse   I(s, x_t - x_{t+1}, K, eta)
                                     the mean gradient g of K steps of U at
                                     fixed s that moved x_t to x_{t+1};

plus, for optimizers run with moving statistics (MFL), the usual step:
s' = T(s, g), then the weights move by the optimizer's rule at s'.

  optimizer  statistics  U(s, g, eta)                     T(s, g)
  sgdm       m           -eta (b m + (1-b) g)             m <- b m + (1-b) g
  rmsprop    v           -eta g / (sqrt(v) + eps)         v <- b v + (1-b) g^2
  adam       m, v        -eta (b1 m + (1-b1) g)           m <- b1 m + (1-b1) g
                           / (sqrt(v) + eps)              v <- b2 v + (1-b2) g^2

m starts at 0 and v at 1, and there is no bias correction, as in the
authors' public code (which also puts eps outside the square root and squares
g in v's tracking, where the paper's Table 1 lost the square).

Every function takes and returns sequences of tensors aligned with a flat
list of weights; statistics are an `OrderedDict` of tuples (`m`, `v`). The
functions are plain TensorFlow, usable eagerly, in a `tf.function` or inside
TFF computations. `build_tff_optimizer` wraps one as a
`tff.learning.optimizers.Optimizer` with frozen or moving statistics.
"""

import collections
import inspect
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Union

import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed import checks
from tff_mixed.seed000_adam import build_seed000_adam  # pylint: disable=unused-import
from tff_mixed.seed000_adam import Seed000Adam  # pylint: disable=unused-import

Tensors = list[tf.Tensor]
Statistics = collections.OrderedDict  # name -> Tensors

MOMENTUM = 'm'
SECOND_MOMENT = 'v'
LEARNING_RATE = 'learning_rate'


class AdaptiveOptimizer(NamedTuple):
  """Seed 003's Update / Tracking / Inverse steps of one optimizer.

  Attributes:
    name: 'sgdm', 'rmsprop' or 'adam'.
    init: `specs -> statistics`: m zeros, v ones, shaped like `specs` (a
      sequence of anything with `shape` and `dtype`).
    update: `(statistics, gradients, learning_rate) -> updates`, the U step
      (the updates are added to the weights).
    track: `(statistics, gradients) -> statistics`, the T step.
    inverse: `(statistics, model_delta, num_steps, learning_rate) ->
      gradients`, the I step; `model_delta` is x_t - x_{t+1}.
    local_step: `(statistics, gradients, learning_rate) -> (updates,
      statistics)`, one step with moving statistics (MFL's client step).
    ops_fixed: Operations per parameter of a U step (seed 003 Table 9's
      C_Fixed), for FLOP counts.
    ops_moving: Operations per parameter of a `local_step` (C_Moving).
    hparams: The decay rates and epsilon, for records.
  """
  name: str
  init: Callable[[Sequence[Any]], Statistics]
  update: Callable[[Statistics, Tensors, Any], Tensors]
  track: Callable[[Statistics, Tensors], Statistics]
  inverse: Callable[[Statistics, Tensors, Any, Any], Tensors]
  local_step: Callable[[Statistics, Tensors, Any], tuple[Tensors, Statistics]]
  ops_fixed: int
  ops_moving: int
  hparams: collections.OrderedDict


def _check_epsilon(epsilon: float) -> float:
  return checks.check_number(epsilon, 'epsilon', allow_zero=True)


# Statistics are tuples: tf.data would stack a list of tensors into one.
def _zeros(specs):
  return tuple(tf.zeros(s.shape, s.dtype) for s in specs)


def _ones(specs):
  return tuple(tf.ones(s.shape, s.dtype) for s in specs)


def _ema(decay: float, old: Tensors, new: Tensors) -> tuple[tf.Tensor, ...]:
  return tuple(decay * o + (1.0 - decay) * n for o, n in zip(old, new))


def _scale(learning_rate, num_steps, like):
  return tf.cast(learning_rate, like.dtype) * tf.cast(num_steps, like.dtype)


def sgdm(beta: float = 0.9) -> AdaptiveOptimizer:
  """SGD with momentum as an exponential moving average of gradients.

  U = -eta (beta m + (1 - beta) g);  T: m <- beta m + (1 - beta) g;
  I = ((x_t - x_{t+1}) / (eta K) - beta m) / (1 - beta).
  With beta = 0, U is plain SGD. beta must be < 1 (I divides by 1 - beta).
  """
  beta = checks.check_decay(beta, 'beta', allow_one=False)

  def init(specs):
    return collections.OrderedDict([(MOMENTUM, _zeros(specs))])

  def update(stats, gradients, learning_rate):
    return [-tf.cast(learning_rate, g.dtype) * (beta * m + (1.0 - beta) * g)
            for m, g in zip(stats[MOMENTUM], gradients)]

  def track(stats, gradients):
    return collections.OrderedDict(
        [(MOMENTUM, _ema(beta, stats[MOMENTUM], gradients))])

  def inverse(stats, model_delta, num_steps, learning_rate):
    return [(d / _scale(learning_rate, num_steps, d) - beta * m) / (1.0 - beta)
            for m, d in zip(stats[MOMENTUM], model_delta)]

  def local_step(stats, gradients, learning_rate):
    stats = track(stats, gradients)
    return ([-tf.cast(learning_rate, m.dtype) * m for m in stats[MOMENTUM]],
            stats)

  return AdaptiveOptimizer(
      'sgdm', init, update, track, inverse, local_step, ops_fixed=5,
      ops_moving=5, hparams=collections.OrderedDict(beta=beta))


def rmsprop(beta: float = 0.9, epsilon: float = 1e-3) -> AdaptiveOptimizer:
  """RMSProp: gradients scaled by a moving average of their squares.

  U = -eta g / (sqrt(v) + eps);  T: v <- beta v + (1 - beta) g^2;
  I = (x_t - x_{t+1}) (sqrt(v) + eps) / (eta K).
  beta = 1 keeps v at its initial 1 (then, with eps = 0, U is plain SGD).
  """
  beta = checks.check_decay(beta, 'beta', allow_one=True)
  epsilon = _check_epsilon(epsilon)

  def init(specs):
    return collections.OrderedDict([(SECOND_MOMENT, _ones(specs))])

  def scaled(gradients, second_moment, learning_rate):
    return [-tf.cast(learning_rate, g.dtype) * g / (tf.sqrt(v) + epsilon)
            for g, v in zip(gradients, second_moment)]

  def update(stats, gradients, learning_rate):
    return scaled(gradients, stats[SECOND_MOMENT], learning_rate)

  def track(stats, gradients):
    return collections.OrderedDict([(SECOND_MOMENT, _ema(
        beta, stats[SECOND_MOMENT], [tf.square(g) for g in gradients]))])

  def inverse(stats, model_delta, num_steps, learning_rate):
    return [d * (tf.sqrt(v) + epsilon) / _scale(learning_rate, num_steps, d)
            for v, d in zip(stats[SECOND_MOMENT], model_delta)]

  def local_step(stats, gradients, learning_rate):
    stats = track(stats, gradients)
    return scaled(gradients, stats[SECOND_MOMENT], learning_rate), stats

  return AdaptiveOptimizer(
      'rmsprop', init, update, track, inverse, local_step, ops_fixed=5,
      ops_moving=8, hparams=collections.OrderedDict(beta=beta, epsilon=epsilon))


def adam(beta_1: float = 0.9, beta_2: float = 0.99,
         epsilon: float = 1e-3) -> AdaptiveOptimizer:
  """Adam without bias correction, v starting at 1.

  U = -eta (b1 m + (1 - b1) g) / (sqrt(v) + eps);
  T: m <- b1 m + (1 - b1) g,  v <- b2 v + (1 - b2) g^2;
  I = ((x_t - x_{t+1}) (sqrt(v) + eps) / (eta K) - b1 m) / (1 - b1).
  Defaults b2 = 0.99 and eps = 1e-3 are seed 003's (App. B.5).
  """
  beta_1 = checks.check_decay(beta_1, 'beta_1', allow_one=False)
  beta_2 = checks.check_decay(beta_2, 'beta_2', allow_one=True)
  epsilon = _check_epsilon(epsilon)

  def init(specs):
    return collections.OrderedDict(
        [(MOMENTUM, _zeros(specs)), (SECOND_MOMENT, _ones(specs))])

  def step(first_moment, second_moment, learning_rate):
    return [-tf.cast(learning_rate, m.dtype) * m / (tf.sqrt(v) + epsilon)
            for m, v in zip(first_moment, second_moment)]

  def update(stats, gradients, learning_rate):
    return step(_ema(beta_1, stats[MOMENTUM], gradients),
                stats[SECOND_MOMENT], learning_rate)

  def track(stats, gradients):
    return collections.OrderedDict([
        (MOMENTUM, _ema(beta_1, stats[MOMENTUM], gradients)),
        (SECOND_MOMENT, _ema(beta_2, stats[SECOND_MOMENT],
                             [tf.square(g) for g in gradients])),
    ])

  def inverse(stats, model_delta, num_steps, learning_rate):
    return [(d * (tf.sqrt(v) + epsilon) / _scale(learning_rate, num_steps, d)
             - beta_1 * m) / (1.0 - beta_1)
            for m, v, d in zip(stats[MOMENTUM], stats[SECOND_MOMENT],
                               model_delta)]

  def local_step(stats, gradients, learning_rate):
    stats = track(stats, gradients)
    return step(stats[MOMENTUM], stats[SECOND_MOMENT], learning_rate), stats

  return AdaptiveOptimizer(
      'adam', init, update, track, inverse, local_step, ops_fixed=8,
      ops_moving=11,
      hparams=collections.OrderedDict(
          beta_1=beta_1, beta_2=beta_2, epsilon=epsilon))


SGDM, RMSPROP, ADAM = 'sgdm', 'rmsprop', 'adam'
_BUILDERS = collections.OrderedDict(
    [(SGDM, sgdm), (RMSPROP, rmsprop), (ADAM, adam)])
NAMES = tuple(_BUILDERS)


def hparam_names(name: str) -> tuple[str, ...]:
  """The hyper-parameters the optimizer called `name` takes."""
  if name not in _BUILDERS:
    raise ValueError(
        f'optimizer must be one of {list(NAMES)}, got {name!r}.')
  return tuple(inspect.signature(_BUILDERS[name]).parameters)


def get(optimizer: Union[str, AdaptiveOptimizer], **hparams) -> AdaptiveOptimizer:
  """An `AdaptiveOptimizer` from a name and its hyper-parameters.

  `hparams` set to None are left at their defaults, so callers can pass
  every flag through. An `AdaptiveOptimizer` is returned as it is (then no
  hyper-parameter may be given).

  Raises:
    ValueError: For an unknown name, or a hyper-parameter the optimizer does
      not have (naming it).
  """
  given = {k: v for k, v in hparams.items() if v is not None}
  if isinstance(optimizer, AdaptiveOptimizer):
    if given:
      raise ValueError(
          f'{sorted(given)} given with an AdaptiveOptimizer instance; set them '
          'when building it.')
    return optimizer
  if optimizer not in _BUILDERS:
    raise ValueError(
        f'optimizer must be one of {list(NAMES)} or an AdaptiveOptimizer, got '
        f'{optimizer!r}.')
  accepted = hparam_names(optimizer)
  unknown = sorted(set(given) - set(accepted))
  if unknown:
    raise ValueError(
        f'{optimizer} has no hyper-parameter {", ".join(unknown)}; it takes '
        f'{", ".join(accepted)}.')
  return _BUILDERS[optimizer](**given)


class StatisticsOptimizer(tff.learning.optimizers.Optimizer):
  """`tff.learning` optimizer over an `AdaptiveOptimizer`'s pure functions.

  Build with `build_tff_optimizer` or `build_sgdm` / `build_rmsprop` /
  `build_adam`. Seed 003's algorithms read `adaptive` (for the I and T
  steps) and apply the statistics as they define: `with_frozen_statistics`.
  """

  def __init__(self, optimizer: AdaptiveOptimizer, learning_rate: float,
               frozen: bool):
    self._optimizer = optimizer
    self._learning_rate = learning_rate
    self._frozen = frozen

  @property
  def adaptive(self) -> AdaptiveOptimizer:
    return self._optimizer

  @property
  def learning_rate(self) -> float:
    return self._learning_rate

  @property
  def frozen_statistics(self) -> bool:
    return self._frozen

  def with_frozen_statistics(self, frozen: bool) -> 'StatisticsOptimizer':
    """The same optimizer whose `next` keeps (True) or tracks (False) s."""
    return StatisticsOptimizer(self._optimizer, self._learning_rate,
                               bool(frozen))

  def initialize(self, specs):
    state = collections.OrderedDict(
        [(LEARNING_RATE, self._learning_rate)])
    state.update(self._optimizer.init(tf.nest.flatten(specs)))
    return state

  def next(self, state, weights, gradients):
    flat_weights = tf.nest.flatten(weights)
    flat_gradients = [tf.convert_to_tensor(g)
                      for g in tf.nest.flatten(gradients)]
    stats = statistics_of(state)
    if self._frozen:
      updates = self._optimizer.update(
          stats, flat_gradients, state[LEARNING_RATE])
    else:
      updates, stats = self._optimizer.local_step(
          stats, flat_gradients, state[LEARNING_RATE])
      state = collections.OrderedDict(
          [(LEARNING_RATE, state[LEARNING_RATE])] + list(stats.items()))
    new_weights = [w + u for w, u in zip(flat_weights, updates)]
    return state, tf.nest.pack_sequence_as(weights, new_weights)

  def get_hparams(self, state):
    return collections.OrderedDict([(LEARNING_RATE, state[LEARNING_RATE])])

  def set_hparams(self, state, hparams):
    state = collections.OrderedDict(state)
    state[LEARNING_RATE] = hparams[LEARNING_RATE]
    return state


def build_tff_optimizer(
    optimizer: AdaptiveOptimizer, learning_rate: float, *,
    frozen_statistics: bool,
) -> tff.learning.optimizers.Optimizer:
  """The optimizer as a `tff.learning.optimizers.Optimizer`.

  State: `OrderedDict(learning_rate=..., m=[...], v=[...])` (the statistics
  the optimizer has); hyper-parameters: `learning_rate`.

  With `frozen_statistics`, `next` applies U and leaves the state as it is
  (FedGBO's and Mimelite's client step); otherwise `next` tracks the
  gradient and steps with the new statistics (MFL's clients, or a server
  optimizer for AdaptiveFedOpt).
  """
  if not isinstance(optimizer, AdaptiveOptimizer):
    raise TypeError(
        'optimizer must be a tff_mixed.optimizers.AdaptiveOptimizer, got '
        f'{type(optimizer).__name__}.')
  learning_rate = checks.check_number(
      learning_rate, 'learning_rate', allow_zero=True)
  return StatisticsOptimizer(optimizer, learning_rate,
                             bool(frozen_statistics))


def build(name: Union[str, AdaptiveOptimizer], learning_rate: float,
          **hparams) -> StatisticsOptimizer:
  """`get(name, **hparams)` as a `tff.learning` optimizer with moving
  statistics (None hyper-parameters keep their defaults)."""
  return build_tff_optimizer(get(name, **hparams), learning_rate,
                             frozen_statistics=False)


def build_sgdm(learning_rate: float, beta: float = 0.9) -> StatisticsOptimizer:
  """Seed 003's SGDm (m starts at 0) as a `tff.learning` optimizer."""
  return build(SGDM, learning_rate, beta=beta)


def build_rmsprop(learning_rate: float, beta: float = 0.9,
                  epsilon: float = 1e-3) -> StatisticsOptimizer:
  """Seed 003's RMSProp (v starts at 1) as a `tff.learning` optimizer."""
  return build(RMSPROP, learning_rate, beta=beta, epsilon=epsilon)


def build_adam(learning_rate: float, beta_1: float = 0.9,
               beta_2: float = 0.99, epsilon: float = 1e-3
               ) -> StatisticsOptimizer:
  """Seed 003's Adam (no bias correction) as a `tff.learning` optimizer."""
  return build(ADAM, learning_rate, beta_1=beta_1, beta_2=beta_2,
               epsilon=epsilon)


def statistics_of(state: collections.OrderedDict) -> collections.OrderedDict:
  """The statistics in a `build_tff_optimizer` state (no learning rate)."""
  return collections.OrderedDict(
      (k, v) for k, v in state.items() if k != LEARNING_RATE)
