"""What every schedule is: `Schedule`, its state's keys, and K from a
value (`num_steps`)."""

import abc
import collections

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
    """The state before the first round (NumPy values: it can sit in a TFF
    server state and be checkpointed); `value` of it is the first round's
    value."""
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
