"""Schedules driven by the training loss the clients report (seed 001 Eqs.
13 and 14, §3.5)."""

import dataclasses

import numpy as np
import tensorflow as tf

from tff_mixed import checks
from tff_mixed.schedules.base import BEST
from tff_mixed.schedules.base import LOSSES
from tff_mixed.schedules.base import OBSERVED
from tff_mixed.schedules.base import REFERENCE
from tff_mixed.schedules.base import Schedule
from tff_mixed.schedules.base import State
from tff_mixed.schedules.base import VALUE
from tff_mixed.schedules.base import WAIT


class _LossSchedule(Schedule):
  """Keeps the rolling mean over `window` rounds of the reported loss."""

  uses_loss = True
  window: int

  def _check_window(self):
    if isinstance(self.window, bool) or not isinstance(
        self.window, (int, np.integer)) or self.window < 1:
      raise checks.ArgumentError(
          'window', f'must be an int >= 1, got {self.window!r}.')

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
  """v_t = initial_value * (F_t / F_0)^exponent over a `window`-round mean
  of the reported loss (`schedules.loss_ratio`)."""
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
  """v <- max(v * factor, min_value) after `patience` rounds without a new
  best loss (`schedules.on_plateau`)."""
  initial_value: float
  factor: float
  patience: int
  window: int = 1
  min_value: float = 0.0

  def __post_init__(self):
    checks.check_number(self.initial_value, 'initial_value')
    checks.check_number(self.factor, 'factor')
    if self.factor >= 1:
      raise checks.ArgumentError('factor',
                                 f'must be in (0, 1), got {self.factor}.')
    if isinstance(self.patience, bool) or not isinstance(
        self.patience, (int, np.integer)) or self.patience < 1:
      raise checks.ArgumentError(
          'patience', f'must be an int >= 1, got {self.patience!r}.')
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
