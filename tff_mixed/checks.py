"""One-line argument checks naming the argument (builders, schedules, tasks)."""

import collections.abc
import inspect
import typing
from collections.abc import Mapping
from typing import Any, Optional

import numpy as np
import tensorflow as tf

# The most local steps a round can take (K is an int32 in the state; a
# schedule's K is clipped to this).
MAX_STEPS = 2**30

NUMBER_TYPES = (int, float, np.integer, np.floating)


class ArgumentError(ValueError):
  """A bad argument, in one line `f'{argument} {reason}'`.

  `argument` names it as the library spells it and `reason` says what is
  wrong, so a caller with its own names for the arguments (the binaries'
  flags) can say the same with its name (`--k_decay_rate must be ...`)
  without parsing the message.
  """

  def __init__(self, argument: str, reason: str):
    super().__init__(f'{argument} {reason}')
    self.argument = argument
    self.reason = reason


class ArgumentTypeError(ArgumentError, TypeError):
  """An argument of the wrong type (an `ArgumentError` and a `TypeError`)."""


def a_kind(value) -> str:
  """`value`'s type with its article, for messages: 'an int', 'a str'."""
  name = type(value).__name__
  return f'{"an" if name[:1].lower() in "aeiou" else "a"} {name}'


def check_num_steps(value, name: str = 'num_local_steps') -> int:
  """Returns `value` as an int, or raises naming `name` unless it is >= 1."""
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
    raise ArgumentTypeError(name,
                            f'must be an int, got {type(value).__name__}.')
  if value < 1:
    raise ArgumentError(name, f'must be >= 1, got {value}.')
  if value > MAX_STEPS:
    raise ArgumentError(name, 'must be <= 2**30 (checks.MAX_STEPS), got '
                        f'{value}.')
  return int(value)


def check_number(value, name: str, *, allow_zero: bool = False) -> float:
  """Returns `value` as a float; raises naming `name` unless finite and > 0.

  With `allow_zero`, 0 is accepted too.
  """
  if isinstance(value, bool) or not isinstance(value, NUMBER_TYPES):
    raise ArgumentTypeError(
        name, f'must be a number, got {type(value).__name__}.')
  if not np.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
    bound = '>= 0' if allow_zero else '> 0'
    raise ArgumentError(name, f'must be a finite number {bound}, got {value}.')
  return float(value)


def check_decay(value, name: str, *, allow_one: bool) -> float:
  """Returns `value` as a float; raises naming `name` unless it is in
  [0, 1] (`allow_one`) or [0, 1)."""
  if isinstance(value, bool) or not isinstance(value, NUMBER_TYPES):
    raise ArgumentTypeError(
        name, f'must be a number, got {type(value).__name__}.')
  upper_ok = value <= 1.0 if allow_one else value < 1.0
  if not (value >= 0.0 and upper_ok):
    interval = '[0, 1]' if allow_one else '[0, 1)'
    raise ArgumentError(name, f'must be in {interval}, got {value}.')
  return float(value)


# What TensorFlow says when a graph is handed a tensor of the eager context.
_EAGER_CAPTURE = 'Attempting to capture an EagerTensor'


def check_dataset_fn(data_fn, name: str, *, argument: Optional[str] = None,
                     returns: str = 'a tf.data.Dataset') -> None:
  """Raises naming `name` unless `data_fn` is a function building datasets.

  Args:
    data_fn: The argument.
    name: Its name, for the error.
    argument: What `data_fn` takes (e.g. 'a client id'); None: nothing, and a
      function with required parameters is refused too.
    returns: What `data_fn` returns, for the error.

  Raises:
    TypeError: If `data_fn` is not callable (a dataset itself is the usual
      mistake: the error says to build it in a function), or, with no
      `argument`, needs arguments.
  """
  takes = f'a function of {argument}' if argument else 'a no-argument function'
  expected = f'{name} must be {takes} returning {returns}'
  if not callable(data_fn):
    hint = ''
    if isinstance(data_fn, tf.data.Dataset):
      hint = ('; pass a function that builds the dataset when called, e.g. '
              '`lambda: tf.data.Dataset.from_tensor_slices(...)`'
              if argument is None else
              '; pass a function that builds the dataset when called')
    raise TypeError(f'{expected}, got {a_kind(data_fn)}{hint}.')
  if argument is None:
    try:
      signature = inspect.signature(data_fn)
    except (TypeError, ValueError):  # Some builtins have none: call it.
      return
    try:
      signature.bind()
    except TypeError:
      function = getattr(data_fn, '__name__', type(data_fn).__name__)
      parameters = ', '.join(signature.parameters)
      raise TypeError(f'{expected}, got {function}({parameters}), which needs '
                      'arguments.') from None


def dataset_fn_element_spec(data_fn, name: str):
  """`data_fn()`'s element spec, called in a graph of its own as TFF will.

  TFF traces a data function into its own graph (`tf.Graph`), where a
  dataset or tensor of the eager context cannot be used: `data_fn` must
  build its dataset when called. This checks it once, at build time, with
  one line naming `name` instead of TFF's tracing error.

  Raises:
    TypeError: If `data_fn` is not a no-argument function
      (`check_dataset_fn`) or returns something other than a
      `tf.data.Dataset`.
    ValueError: If the dataset, or a tensor it is built from, was created
      outside `data_fn` (it captures an eager tensor).
  """
  check_dataset_fn(data_fn, name)
  with tf.Graph().as_default():
    try:
      data = data_fn()
    except RuntimeError as e:
      if _EAGER_CAPTURE not in str(e):
        raise
      raise ValueError(
          f'{name} builds its dataset from a tensor created outside the '
          f'function (it captures an eager tensor, and TFF traces {name} into '
          f'its own graph); create the tensors inside {name}, or pass NumPy '
          'arrays.') from None
    if not isinstance(data, tf.data.Dataset):
      raise TypeError(f'{name} must return a tf.data.Dataset, got a '
                      f'{type(data).__name__}.')
    try:
      data.cardinality()  # An op on the dataset, as TFF's graph will add.
    except RuntimeError as e:
      if _EAGER_CAPTURE not in str(e):
        raise
      raise ValueError(
          f'{name} returned a dataset built outside the function (it captures '
          f'an eager tensor, and TFF traces {name} into its own graph); build '
          f'the dataset inside {name}.') from None
    return data.element_spec


def check_type(value, hint, where: str) -> None:
  """Raises `ValueError` (one line, naming `where`) unless `value` is of the
  annotated type `hint` (numbers: an int where a float goes; a sequence:
  a tuple or a list)."""
  if value_is(value, hint):
    return
  raise ValueError(f'{where} is {a_kind(value)} {_shown(value)}, not '
                   f'{_type_text(hint)}.')


def value_is(value, hint) -> bool:
  """Whether `value` is of the annotated type `hint` (`check_type`)."""
  if hint is Any or isinstance(hint, typing.TypeVar):
    return True
  if hint is type(None):
    return value is None
  origin = typing.get_origin(hint)
  args = typing.get_args(hint)
  if origin is typing.Union:
    return any(value_is(value, arg) for arg in args)
  if origin in (tuple, collections.abc.Sequence):
    if not isinstance(value, (tuple, list)):
      return False
    item = args[0] if args else Any
    return all(value_is(v, item) for v in value)
  if origin in (dict, collections.abc.Mapping):
    return isinstance(value, Mapping) and all(
        isinstance(k, str) for k in value)
  if origin is not None:  # A generic this reader does not check further.
    return isinstance(value, origin) if isinstance(origin, type) else True
  if hint is float:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
  if hint is int:
    return isinstance(value, int) and not isinstance(value, bool)
  if isinstance(hint, type):
    return isinstance(value, hint)
  return True  # A forward reference or a special form: not checked.


def _type_text(hint) -> str:
  if typing.get_origin(hint) is typing.Union:
    return ' or '.join(_type_text(a) for a in typing.get_args(hint))
  if hint is type(None):
    return 'None'
  return getattr(hint, '__name__', None) or str(hint).replace('typing.', '')


def _shown(value) -> str:
  text = repr(value)
  return text if len(text) <= 40 else text[:37] + '...'
