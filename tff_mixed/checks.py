"""One-line argument checks naming the argument (builders, schedules, tasks)."""

import numpy as np

# The most local steps a round can take (K is an int32 in the state; a
# schedule's K is clipped to this).
MAX_STEPS = 2**30

NUMBER_TYPES = (int, float, np.integer, np.floating)


def check_num_steps(value, name: str = 'num_local_steps') -> int:
  """Returns `value` as an int, or raises naming `name` unless it is >= 1."""
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
    raise TypeError(f'{name} must be an int, got {type(value).__name__}.')
  if value < 1:
    raise ValueError(f'{name} must be >= 1, got {value}.')
  if value > MAX_STEPS:
    raise ValueError(f'{name} must be <= 2**30 (checks.MAX_STEPS), got '
                     f'{value}.')
  return int(value)


def check_number(value, name: str, *, allow_zero: bool = False) -> float:
  """Returns `value` as a float; raises naming `name` unless finite and > 0.

  With `allow_zero`, 0 is accepted too.
  """
  if isinstance(value, bool) or not isinstance(value, NUMBER_TYPES):
    raise TypeError(f'{name} must be a number, got {type(value).__name__}.')
  if not np.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
    bound = '>= 0' if allow_zero else '> 0'
    raise ValueError(f'{name} must be a finite number {bound}, got {value}.')
  return float(value)
