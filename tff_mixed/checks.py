"""One-line argument checks naming the argument (builders, schedules, tasks)."""

import numpy as np


def check_num_steps(value, name: str = 'num_local_steps') -> int:
  """Returns `value` as an int, or raises naming `name` unless it is >= 1."""
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
    raise TypeError(f'{name} must be an int, got {type(value).__name__}.')
  if value < 1:
    raise ValueError(f'{name} must be >= 1, got {value}.')
  return int(value)


def check_number(value, name: str, *, allow_zero: bool = False) -> float:
  """Returns `value` as a float; raises naming `name` unless finite and > 0.

  With `allow_zero`, 0 is accepted too.
  """
  if isinstance(value, bool) or not isinstance(
      value, (int, float, np.integer, np.floating)):
    raise TypeError(f'{name} must be a number, got {type(value).__name__}.')
  if not np.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
    bound = '>= 0' if allow_zero else '> 0'
    raise ValueError(f'{name} must be a finite number {bound}, got {value}.')
  return float(value)
