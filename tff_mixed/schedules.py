"""Round schedules for the number of local steps K and the client learning rate.

Seed 000 (*Faster Federated Learning with Decaying Number of Local SGD Steps*)
decays K exponentially (§3) and as Theorem 2's K0 / (b + t); its journal
version (seed 001, §3.4-3.5) adds a round-based K-rounds schedule, a K-error
schedule driven by the training loss, and a K-step schedule that decays on a
plateau. The journal's extracted text lost its formulas; the forms below are
this project's reading of it:

  constant(v)                      v_t = v
  exponential_decay(v0, d)         v_t = v0 * d^t                 (000 §3)
  inverse_time_decay(v0, b)        v_t = v0 / (b + t)             (000 Eq. 11)
  power_decay(v0, p)               v_t = v0 * (t + 1)^(-p)        (001 Eqs. 10
                                                                   and 12)
  loss_ratio(v0, e, window)        v_t = v0 * (F_t / F_0)^e       (001 Eqs. 13
                                                                   and 14)
  on_plateau(v0, factor, patience) v <- v * factor after `patience` rounds
                                   without improvement            (001 §3.5)

where F_t is the mean over the last `window` rounds of the training loss
clients report after their first local step (journal Eq. 15) and F_0 the first
such mean. What we assumed where the journal's formulas were lost:

* K-rounds and lr-rounds (Eqs. 10 and 12) follow from Theorem 2 (Eq. 9)
  and Corollary 2.1 (Eq. 11) with computation time negligible; the text
  keeps only that K* decreases "at least as fast as" a power of the round
  and scales with sqrt(F). With F falling as t^(-1/2) that is t^(-1/4):
  `power_decay`'s default exponent 1/4 is our reading, not a printed value.
* K-error and lr-error (Eqs. 13 and 14) substitute F_t for F_0 in Eq. 9 /
  Eq. 11 and divide; we read Eq. 9's K* as proportional to sqrt(F), so
  `loss_ratio`'s default exponent is 1/2 for K (and the same form for the
  learning rate). Until `window` losses have been seen the value stays v0,
  as the journal says.
* K-step is "decay when the validation error plateaus" (§3.5, last
  paragraph). Inside a process `on_plateau` watches the clients'
  training-loss estimate F_t, the only error the process sees; on the
  validation error it is `tff_mixed.driver.EvalPlateau` (flags:
  `--k_monitor=eval/loss`), which advances the same `on_plateau` with the
  driver's evaluation and sets K by `set_hparams`.

A schedule gives a real value v_t; used for K it becomes
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
MAX_STEPS = checks.MAX_STEPS


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


def phi(lam, gamma, num_steps_):
  """phi_lambda(gamma, K) = (1 - (1 - gamma lambda)^K) / gamma (seed 000 Eq. 6)."""
  as_float64 = lambda x: tf.cast(
      tf.convert_to_tensor(x, dtype_hint=tf.float64), tf.float64)
  lam, gamma, k = as_float64(lam), as_float64(gamma), as_float64(num_steps_)
  return (1.0 - tf.pow(1.0 - gamma * lam, k)) / gamma


@dataclasses.dataclass(frozen=True)
class Theorem2LearningRate(_RoundSchedule):
  """eta_t = 3 / ((b + t) phi_mu(gamma, K_t)), K_t the steps clients take."""
  num_local_steps: Schedule
  client_learning_rate: float
  mu: float
  offset: float

  def __post_init__(self):
    if not isinstance(self.num_local_steps, _RoundSchedule):
      raise ValueError(
          'theorem2_learning_rate needs K to follow a schedule of the round '
          f'(constant, exponential, inverse_time, power), got '
          f'{type(self.num_local_steps).__name__}.')
    checks.check_number(self.client_learning_rate, 'client_learning_rate')
    checks.check_number(self.mu, 'mu')
    checks.check_number(self.offset, 'offset')
    # eta_0 in NumPy, once: `initialize` also runs while TFF traces a graph.
    k0 = num_steps(self.num_local_steps.initialize()[VALUE])
    gamma, mu = self.client_learning_rate, self.mu
    phi0 = (1.0 - (1.0 - gamma * mu) ** int(k0)) / gamma
    object.__setattr__(self, 'initial_value', 3.0 / (self.offset * phi0))

  def initialize(self):
    return State([(VALUE, np.float64(self.initial_value))])

  def value_at(self, round_num):
    k = num_steps(self.num_local_steps.value_at(round_num))
    return 3.0 / ((self.offset + round_num)
                  * phi(self.mu, self.client_learning_rate, k))


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
  the value is floored at 1 step by `num_steps`. Given to a builder it
  watches the clients' reported loss each round; given to
  `tff_mixed.driver.EvalPlateau` it watches an evaluation metric instead
  (seed 001's reading).
  """
  return OnPlateau(initial_value, factor, patience, window, min_value)


def theorem2_learning_rate(num_local_steps: Schedule, *,
                           client_learning_rate: float, mu: float,
                           offset: float) -> Schedule:
  """Seed 000 Theorem 2's server rate (Eq. 11), coupled to K.

    eta_t = a_t / (b + t),  a_t = 3 / phi_mu(gamma, K_t),
    phi_mu(gamma, K) = (1 - (1 - gamma mu)^K) / gamma          (Eq. 6)

  with b = `offset` (the theorem takes b = 3 kappa^2 and
  K_t = max(K_0 / (b + t), 1): pass `inverse_time_decay(K_0, b)` as K),
  gamma the constant client learning rate (the theorem needs
  gamma <= ln(2) / (K_0 mu)) and mu the objective's strong convexity. K_t
  is the number of steps clients actually take, `num_steps(K schedule)`,
  where the theorem's K_t is real.

  Args:
    num_local_steps: K's schedule (a schedule of the round).
    client_learning_rate: gamma, > 0.
    mu: mu, > 0.
    offset: b, > 0.
  """
  return Theorem2LearningRate(num_local_steps, client_learning_rate, mu,
                              offset)


ScheduleOrValue = Union[Schedule, int, float]
# A step count (K): an int, or a schedule (its values become steps).
ScheduleOrSteps = Union[Schedule, int]


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
    if integer and first > MAX_STEPS:
      raise ValueError(f'{name} must start at <= 2**30 steps, got {first}.')
    return value
  if isinstance(value, bool) or not isinstance(
      value, (int, float, np.integer, np.floating)):
    raise TypeError(
        f'{name} must be a number or a tff_mixed.schedules.Schedule, got '
        f'{type(value).__name__}.')
  if integer:
    if not isinstance(value, (int, np.integer)):
      raise TypeError(f'{name} must be an int or a schedule, got {value!r}.')
    checks.check_num_steps(value, name)
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


def parameter_names(name: str) -> tuple[str, ...]:
  """The keyword arguments `from_name(name, ...)` reads."""
  return _PARAMETERS[name][1]

__all__ = [
    'Schedule', 'constant', 'exponential_decay', 'inverse_time_decay',
    'power_decay', 'loss_ratio', 'on_plateau', 'theorem2_learning_rate',
    'phi', 'num_steps', 'as_schedule',
    'from_name', 'NAMES',
]
