"""Round schedules for the number of local steps K and the client learning rate.

Seed 000 (*Faster Federated Learning with Decaying Number of Local SGD Steps*)
decays K exponentially (§3) and as Theorem 2's K0 / (b + t); its journal
version (seed 001, §3.4-3.5) adds a round-based K-rounds schedule, a K-error
schedule driven by the training loss, and a K-step schedule that decays on a
plateau. The journal's extracted text lost its formulas; the forms below are
this project's reading of it:

  constant(v)                      v_t = v
  exponential_decay(v0, d)         v_t = v0 * d^t
  inverse_time_decay(v0, b)        v_t = v0 / (b + t)
  power_decay(v0, p)               v_t = v0 * (t + 1)^(-p)        (K-rounds)
  loss_ratio(v0, e, window)        v_t = v0 * (F_t / F_0)^e       (K-error)
  on_plateau(v0, factor, patience) v <- v * factor after `patience` rounds
                                   without improvement            (K-step)

where F_t is the mean over the last `window` rounds of the training loss
clients report after their first local step (journal Eq. 15) and F_0 the first
such mean. A schedule gives a real value v_t; used for K it becomes
`num_steps(v_t) = max(ceil(v_t), 1)`, used for a learning rate it is v_t.

A schedule is a small pure object, like an optax schedule but with state:
`initialize()` gives its state (NumPy values, so it can sit in a TFF server
state and be checkpointed), `value(state)` the value for the coming round and
`next(state, round_num, loss)` the state for round `round_num + 1` after
round `round_num` reported `loss` (NaN when no client reported one). `next`
uses TensorFlow ops only, so it runs eagerly and inside TFF computations.
"""

import abc
import collections
import dataclasses
from typing import Union

import numpy as np
import tensorflow as tf

from tff_mixed import checks

State = collections.OrderedDict

VALUE = 'value'
LOSSES = 'losses'
OBSERVED = 'observed'
REFERENCE = 'reference'
BEST = 'best'
WAIT = 'wait'

# ceil() forgives this relative rounding error of float maths (so that, say,
# 10 * 0.5 * 2 is 10 steps, not 11).
_CEIL_TOLERANCE = 1e-9


# No schedule value becomes more steps than this (a rising loss can push
# `loss_ratio` up; an int32 cast of a larger float is undefined).
MAX_STEPS = 2**30


def num_steps(value) -> tf.Tensor:
  """`max(ceil(value), 1)` as int32 (NaN -> 1, at most `MAX_STEPS`)."""
  value = tf.cast(tf.convert_to_tensor(value, dtype_hint=tf.float64), tf.float64)
  steps = tf.math.ceil(value - _CEIL_TOLERANCE * tf.maximum(value, 1.0))
  steps = tf.where(tf.math.is_nan(steps), tf.constant(1.0, tf.float64), steps)
  return tf.cast(tf.clip_by_value(steps, 1.0, MAX_STEPS), tf.int32)


class Schedule(abc.ABC):
  """A value per round. Subclasses are frozen dataclasses."""

  initial_value: float

  # Whether `next` reads the loss (so the process must report one).
  uses_loss: bool = False

  def initialize(self) -> State:
    return State([(VALUE, np.float64(self.initial_value))])

  def value(self, state: State) -> tf.Tensor:
    """The value for the round `state` belongs to (float64)."""
    return state[VALUE]

  @abc.abstractmethod
  def next(self, state: State, round_num, loss) -> State:
    """The state for round `round_num + 1`, given round `round_num`'s loss."""

  def values(self, num_rounds: int, losses=None) -> np.ndarray:
    """Eagerly runs the schedule: its values for rounds 0..num_rounds-1.

    Args:
      num_rounds: How many rounds.
      losses: The loss reported in each round (needed if `uses_loss`).
    """
    if losses is None:
      if self.uses_loss:
        raise ValueError(f'{type(self).__name__}.values needs losses.')
      losses = [float('nan')] * num_rounds
    if len(losses) < num_rounds:
      raise ValueError(f'got {len(losses)} losses for {num_rounds} rounds.')
    state = self.initialize()
    out = []
    for t in range(num_rounds):
      out.append(float(self.value(state)))
      state = self.next(state, tf.constant(t, tf.int32),
                        tf.constant(losses[t], tf.float64))
    return np.array(out)


class _RoundSchedule(Schedule):
  """A schedule that is a function of the round number only."""

  @abc.abstractmethod
  def value_at(self, round_num):
    """v_t, for a float64 tensor t."""

  def next(self, state, round_num, loss):
    del loss
    t = tf.cast(round_num, tf.float64) + 1.0
    return State([(VALUE, tf.cast(self.value_at(t), tf.float64))])


@dataclasses.dataclass(frozen=True)
class Constant(_RoundSchedule):
  initial_value: float

  def __post_init__(self):
    checks.check_number(self.initial_value, 'initial_value')

  def value_at(self, round_num):
    del round_num
    return tf.constant(self.initial_value, tf.float64)


@dataclasses.dataclass(frozen=True)
class ExponentialDecay(_RoundSchedule):
  initial_value: float
  decay_rate: float

  def __post_init__(self):
    checks.check_number(self.initial_value, 'initial_value')
    checks.check_number(self.decay_rate, 'decay_rate')
    if self.decay_rate > 1:
      raise ValueError(f'decay_rate must be in (0, 1], got {self.decay_rate}.')

  def value_at(self, round_num):
    return self.initial_value * tf.pow(
        tf.constant(self.decay_rate, tf.float64), round_num)


@dataclasses.dataclass(frozen=True)
class InverseTimeDecay(_RoundSchedule):
  initial_value: float
  offset: float

  def __post_init__(self):
    checks.check_number(self.initial_value, 'initial_value')
    checks.check_number(self.offset, 'offset')

  def initialize(self):
    return State([(VALUE, np.float64(self.initial_value / self.offset))])

  def value_at(self, round_num):
    return self.initial_value / (self.offset + round_num)


@dataclasses.dataclass(frozen=True)
class PowerDecay(_RoundSchedule):
  initial_value: float
  exponent: float = 0.25

  def __post_init__(self):
    checks.check_number(self.initial_value, 'initial_value')
    checks.check_number(self.exponent, 'exponent', allow_zero=True)

  def value_at(self, round_num):
    return self.initial_value * tf.pow(round_num + 1.0, -self.exponent)


class _LossSchedule(Schedule):
  """Keeps the rolling mean over `window` rounds of the reported loss."""

  uses_loss = True
  window: int

  def _check_window(self):
    if isinstance(self.window, bool) or not isinstance(
        self.window, (int, np.integer)) or self.window < 1:
      raise ValueError(f'window must be an int >= 1, got {self.window!r}.')

  def initialize(self):
    state = super().initialize()
    state[LOSSES] = np.zeros([self.window], np.float64)
    state[OBSERVED] = np.int64(0)
    return state

  def _observe(self, state, loss):
    """(state with `loss` pushed, whether it was, the rolling mean or NaN)."""
    loss = tf.cast(loss, tf.float64)
    finite = tf.math.is_finite(loss)
    pushed = tf.concat([state[LOSSES][1:], tf.reshape(loss, [1])], axis=0)
    state = State(state)
    state[LOSSES] = tf.where(finite, pushed, state[LOSSES])
    state[OBSERVED] = state[OBSERVED] + tf.cast(finite, tf.int64)
    full = state[OBSERVED] >= self.window
    mean = tf.where(full, tf.reduce_mean(state[LOSSES]),
                    tf.constant(np.nan, tf.float64))
    return state, tf.logical_and(finite, full), mean


@dataclasses.dataclass(frozen=True)
class LossRatio(_LossSchedule):
  initial_value: float
  exponent: float = 0.5
  window: int = 10

  def __post_init__(self):
    checks.check_number(self.initial_value, 'initial_value')
    checks.check_number(self.exponent, 'exponent', allow_zero=True)
    self._check_window()

  def initialize(self):
    state = super().initialize()
    state[REFERENCE] = np.float64(np.nan)
    return state

  def next(self, state, round_num, loss):
    del round_num
    state, updated, mean = self._observe(state, loss)
    first = tf.logical_and(updated, tf.math.is_nan(state[REFERENCE]))
    state[REFERENCE] = tf.where(first, mean, state[REFERENCE])
    ratio = tf.math.divide_no_nan(mean, state[REFERENCE])
    usable = tf.logical_and(updated, state[REFERENCE] > 0)
    state[VALUE] = tf.where(
        usable,
        self.initial_value * tf.pow(tf.maximum(ratio, 0.0), self.exponent),
        state[VALUE])
    return state


@dataclasses.dataclass(frozen=True)
class OnPlateau(_LossSchedule):
  initial_value: float
  factor: float
  patience: int
  window: int = 1
  min_value: float = 0.0

  def __post_init__(self):
    checks.check_number(self.initial_value, 'initial_value')
    checks.check_number(self.factor, 'factor')
    if self.factor >= 1:
      raise ValueError(f'factor must be in (0, 1), got {self.factor}.')
    if isinstance(self.patience, bool) or not isinstance(
        self.patience, (int, np.integer)) or self.patience < 1:
      raise ValueError(f'patience must be an int >= 1, got {self.patience!r}.')
    checks.check_number(self.min_value, 'min_value', allow_zero=True)
    self._check_window()

  def initialize(self):
    state = super().initialize()
    state[BEST] = np.float64(np.inf)
    state[WAIT] = np.int64(0)
    return state

  def next(self, state, round_num, loss):
    del round_num
    state, updated, mean = self._observe(state, loss)
    improved = tf.logical_and(updated, mean < state[BEST])
    state[BEST] = tf.where(improved, mean, state[BEST])
    wait = tf.where(improved, tf.constant(0, tf.int64),
                    state[WAIT] + tf.cast(updated, tf.int64))
    decay = wait >= self.patience
    state[WAIT] = tf.where(decay, tf.constant(0, tf.int64), wait)
    state[VALUE] = tf.where(
        decay, tf.maximum(state[VALUE] * self.factor, self.min_value),
        state[VALUE])
    return state


def constant(value: float) -> Schedule:
  """v_t = value."""
  return Constant(value)


def exponential_decay(initial_value: float, decay_rate: float) -> Schedule:
  """v_t = initial_value * decay_rate^t (seed 000 §3); K_t = ceil(K0 d^t)."""
  return ExponentialDecay(initial_value, decay_rate)


def inverse_time_decay(initial_value: float, offset: float) -> Schedule:
  """v_t = initial_value / (offset + t) (seed 000 Theorem 2's schedule)."""
  return InverseTimeDecay(initial_value, offset)


def power_decay(initial_value: float, exponent: float) -> Schedule:
  """v_t = initial_value * (t + 1)^-exponent (seed 001's K-rounds schedule).

  The journal's analysis gives K* proportional to sqrt(F(x_t)); with F
  falling as t^(-1/2), exponent = 1/4.
  """
  return PowerDecay(initial_value, exponent)


def loss_ratio(initial_value: float, exponent: float = 0.5,
               window: int = 10) -> Schedule:
  """v_t = initial_value * (F_t / F_0)^exponent (seed 001's K-error schedule).

  F_t is the mean of the last `window` reported losses (journal Eq. 15), F_0
  the first such mean. The value stays `initial_value` until `window` losses
  have been reported; a round with no loss (NaN) leaves the state unchanged.
  """
  return LossRatio(initial_value, exponent, window)


def on_plateau(initial_value: float, factor: float, patience: int, *,
               window: int = 1, min_value: float = 0.0) -> Schedule:
  """Multiplies the value by `factor` once the loss plateaus (seed 001's K-step).

  The monitored loss is the mean of the last `window` reported losses; when it
  has not fallen below its best for `patience` consecutive rounds, the value
  becomes `max(value * factor, min_value)` and the count restarts. Used for K
  the value is floored at 1 step by `num_steps`.
  """
  return OnPlateau(initial_value, factor, patience, window, min_value)


ScheduleOrValue = Union[Schedule, int, float]


def as_schedule(value: ScheduleOrValue, name: str,
                *, integer: bool = False) -> Schedule:
  """`value` as a `Schedule` (a number becomes `constant`); checks its type.

  Args:
    value: A `Schedule` or a number.
    name: The argument's name, for errors.
    integer: Whether the schedule is for a step count: a plain number must
      then be an int >= 1, and a schedule must start at >= 1.
  """
  if isinstance(value, Schedule):
    first = float(value.initialize()[VALUE])
    if integer and first < 1:
      raise ValueError(f'{name} must start at >= 1 step, got {first}.')
    return value
  if isinstance(value, bool) or not isinstance(
      value, (int, float, np.integer, np.floating)):
    raise TypeError(
        f'{name} must be a number or a tff_mixed.schedules.Schedule, got '
        f'{type(value).__name__}.')
  if integer:
    if not isinstance(value, (int, np.integer)):
      raise TypeError(f'{name} must be an int or a schedule, got {value!r}.')
    if value < 1:
      raise ValueError(f'{name} must be >= 1, got {value}.')
  checks.check_number(value, name)
  return constant(value)


_PARAMETERS = {
    'constant': (Constant, ()),
    'exponential': (ExponentialDecay, ('decay_rate',)),
    'inverse_time': (InverseTimeDecay, ('offset',)),
    'power': (PowerDecay, ('exponent',)),
    'loss_ratio': (LossRatio, ('exponent', 'window')),
    'on_plateau': (OnPlateau, ('factor', 'patience', 'window', 'min_value')),
}


def from_name(name: str, initial_value: float, **parameters) -> Schedule:
  """Builds a schedule by name (for binaries' flags).

  Keyword arguments a schedule does not take are ignored, and None means the
  schedule's own default, so one set of flags can serve every schedule.
  """
  if name not in _PARAMETERS:
    raise ValueError(
        f'unknown schedule {name!r}; expected one of {sorted(_PARAMETERS)}.')
  cls, names = _PARAMETERS[name]
  kwargs = {k: parameters[k] for k in names if parameters.get(k) is not None}
  return cls(initial_value, **kwargs)


NAMES = tuple(_PARAMETERS)

__all__ = [
    'Schedule', 'constant', 'exponential_decay', 'inverse_time_decay',
    'power_decay', 'loss_ratio', 'on_plateau', 'num_steps', 'as_schedule',
    'from_name', 'NAMES',
]
