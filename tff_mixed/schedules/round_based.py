"""Schedules of the round alone (seed 000 §3 and Eq. 11, seed 001 Eqs. 10
and 12)."""

import abc
import dataclasses

import numpy as np
import tensorflow as tf

from tff_mixed import checks
from tff_mixed.schedules.base import num_steps
from tff_mixed.schedules.base import Schedule
from tff_mixed.schedules.base import State
from tff_mixed.schedules.base import VALUE


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
  """v_t = initial_value (`schedules.constant`)."""
  initial_value: float

  def __post_init__(self):
    checks.check_number(self.initial_value, 'initial_value')

  def value_at(self, round_num):
    del round_num
    return tf.constant(self.initial_value, tf.float64)


@dataclasses.dataclass(frozen=True)
class ExponentialDecay(_RoundSchedule):
  """v_t = initial_value * decay_rate^t (`schedules.exponential_decay`)."""
  initial_value: float
  decay_rate: float

  def __post_init__(self):
    checks.check_number(self.initial_value, 'initial_value')
    checks.check_number(self.decay_rate, 'decay_rate')
    if self.decay_rate > 1:
      raise checks.ArgumentError(
          'decay_rate', f'must be in (0, 1], got {self.decay_rate}.')

  def value_at(self, round_num):
    return self.initial_value * tf.pow(
        tf.constant(self.decay_rate, tf.float64), round_num)


@dataclasses.dataclass(frozen=True)
class InverseTimeDecay(_RoundSchedule):
  """v_t = initial_value / (offset + t), t = first_round at the first round."""
  initial_value: float
  offset: float
  first_round: int = 0

  def __post_init__(self):
    checks.check_number(self.initial_value, 'initial_value')
    checks.check_number(self.offset, 'offset')
    _check_first_round(self.first_round)

  def initialize(self):
    return State([(VALUE, np.float64(
        self.initial_value / (self.offset + self.first_round)))])

  def value_at(self, round_num):
    return self.initial_value / (self.offset + self.first_round + round_num)


def _check_first_round(first_round) -> None:
  if (isinstance(first_round, bool)
      or not isinstance(first_round, (int, np.integer)) or first_round < 0):
    raise checks.ArgumentError(
        'first_round', f'must be an int >= 0 (the t of the first round), '
        f'got {first_round!r}.')


@dataclasses.dataclass(frozen=True)
class PowerDecay(_RoundSchedule):
  """v_t = initial_value * (t + 1)^-exponent (`schedules.power_decay`)."""
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
  """eta_t = 3 / ((b + t) phi_mu(gamma, K_t)), K_t the steps clients take,
  t = first_round at the first round."""
  num_local_steps: Schedule
  client_learning_rate: float
  mu: float
  offset: float
  first_round: int = 1

  def __post_init__(self):
    if not isinstance(self.num_local_steps, _RoundSchedule):
      raise ValueError(
          'theorem2_learning_rate needs K to follow a schedule of the round '
          f'(constant, exponential, inverse_time, power), got '
          f'{type(self.num_local_steps).__name__}.')
    checks.check_number(self.client_learning_rate, 'client_learning_rate')
    checks.check_number(self.mu, 'mu')
    checks.check_number(self.offset, 'offset')
    _check_first_round(self.first_round)
    k_first = getattr(self.num_local_steps, 'first_round', self.first_round)
    if k_first != self.first_round:
      raise checks.ArgumentError(
          'first_round', f'is {self.first_round} but K\'s inverse_time '
          f'schedule starts at t = {k_first}; Eq. 11 counts both from the '
          'same round (give both the same first_round).')
    # eta_0 in NumPy, once: `initialize` also runs while TFF traces a graph.
    k0 = num_steps(self.num_local_steps.initialize()[VALUE])
    gamma, mu = self.client_learning_rate, self.mu
    phi0 = (1.0 - (1.0 - gamma * mu) ** int(k0)) / gamma
    object.__setattr__(self, 'initial_value', 3.0 / (
        (self.offset + self.first_round) * phi0))

  def initialize(self):
    return State([(VALUE, np.float64(self.initial_value))])

  def value_at(self, round_num):
    k = num_steps(self.num_local_steps.value_at(round_num))
    return 3.0 / ((self.offset + self.first_round + round_num)
                  * phi(self.mu, self.client_learning_rate, k))
