"""A binary's flags as a table, and the one reader of their `name=value`s.

A `Table` says what each flag is (name, kind, default, bounds, help) and
reads values two ways, with the same parsing and the same one-line
refusals: `read(args)` of a command line's `--name=value` strings, and
`values(mapping)` of Python values by name (`task_registry.spec`'s
keywords, a grid's settings, a config.json of flags). Both return
`Values`: every flag's value and which the user gave, what a run's
presets, per-algorithm rules and `training_flags.config_from_flags` read.

absl is only the binaries' command-line parser: `define_absl` defines the
table's flags in absl's `FLAGS` (parsed by this module's `Flag.parse`, so
a bad value is the same line from either door), and `from_absl` turns the
parsed flags into `Values`. Written here rather than taken from absl: a
run read in any process (a notebook, the grid runner) touches no global
flag and needs no `FlagValues`.
"""

import dataclasses
import math
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Optional

INTEGER, FLOAT, ENUM, BOOL, STRING, LIST = (
    'integer', 'float', 'enum', 'bool', 'string', 'list')
_TRUE, _FALSE = ('true', 't', '1'), ('false', 'f', '0')


class FlagError(ValueError):
  """A flag the table has not, or a value it refuses; one line."""


@dataclasses.dataclass(frozen=True)
class Flag:
  """One flag: its `kind` (`INTEGER`, ...), default, help, `choices` (an
  `ENUM`'s) and bounds (`lower`, `upper`: a number's, inclusive). A float
  must be finite."""
  name: str
  kind: str
  default: Any
  help: str
  choices: tuple[str, ...] = ()
  lower: Optional[float] = None
  upper: Optional[float] = None
  module: str = __name__  # Where it was defined (--helpfull's groups).

  def parse(self, value):
    """`value` (its text, or a Python value of the flag's type) as the
    flag's value; None stays None.

    Raises:
      ValueError: Why it is refused, without the flag's name (`Table`
        and absl put `flag --name=value: ` before it).
    """
    if value is None:
      return None
    if self.kind == BOOL:
      if isinstance(value, bool):
        return value
      if str(value).lower() in _TRUE + _FALSE:  # numpy's too, and 0 / 1.
        return str(value).lower() in _TRUE
      raise ValueError('must be true or false.')
    if self.kind in (STRING, ENUM):
      text = os.fspath(value) if isinstance(value, os.PathLike) else str(value)
      if self.kind == ENUM and text not in self.choices:
        raise ValueError(f'must be one of {", ".join(self.choices)}.')
      return text
    if self.kind == LIST:
      if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
      text = str(value)
      return [s.strip() for s in text.split(',')] if text else []
    return self._number(value)

  def _number(self, value):
    cast = int if self.kind == INTEGER else float
    kind = 'an integer' if self.kind == INTEGER else 'a finite number'
    try:
      if isinstance(value, bool) or (
          cast is int and isinstance(value, float)):
        raise ValueError
      number = cast(value)
    except (TypeError, ValueError):
      raise ValueError(f'must be {kind}.') from None
    if cast is float and not math.isfinite(number):
      raise ValueError(f'must be {kind}.')
    if ((self.lower is not None and number < self.lower)
        or (self.upper is not None and number > self.upper)):
      raise ValueError(f'must be {kind} {self.bounds}.')
    return number

  @property
  def bounds(self) -> str:
    """The bounds in words ('>= 1', 'in [0, 1]'), '' for none."""
    shown = (lambda x: str(int(x))) if self.kind == INTEGER else (
        lambda x: f'{x:g}')
    if self.lower is not None and self.upper is not None:
      return f'in [{shown(self.lower)}, {shown(self.upper)}]'
    if self.lower is not None:
      return f'>= {shown(self.lower)}'
    return f'<= {shown(self.upper)}' if self.upper is not None else ''


class Values:
  """Every flag of a table by name (`values.rounds`), and whether the user
  gave it (`values['rounds'].present`): what presets and rules change
  (`values['rounds'].value = 20`) and what a run is read from. It answers
  as absl's parsed `FlagValues` does for these, so a binary of your own
  may hand its `FLAGS` wherever `Values` go."""

  def __init__(self, table: 'Table', values: Mapping[str, Any],
               given: Sequence[str]):
    object.__setattr__(self, '_table', table)
    object.__setattr__(self, '_values', dict(values))
    object.__setattr__(self, '_given', frozenset(given))

  def __getattr__(self, name: str):
    if name.startswith('_'):
      raise AttributeError(name)
    try:
      return self._values[name]
    except KeyError:
      raise AttributeError(f'no flag --{name}') from None

  def __setattr__(self, name, value):
    raise AttributeError('set a value with values[name].value = ...')

  def __getitem__(self, name: str) -> '_Entry':
    if name not in self._values:
      raise KeyError(name)
    return _Entry(self, name)

  def __contains__(self, name) -> bool:
    return name in self._values

  def __iter__(self) -> Iterator[str]:
    return iter(self._values)

  def given(self) -> frozenset:
    """The names of the flags the user gave."""
    return self._given

  def as_dict(self) -> dict[str, Any]:
    return dict(self._values)


class _Entry:
  """`values[name]`: its `value` (settable), `present` and `default`."""

  def __init__(self, values: Values, name: str):
    self._of, self.name = values, name

  @property
  def value(self):
    return self._of._values[self.name]  # pylint: disable=protected-access

  @value.setter
  def value(self, value):
    self._of._values[self.name] = value  # pylint: disable=protected-access

  @property
  def present(self) -> bool:
    return self.name in self._of._given  # pylint: disable=protected-access

  @property
  def default(self):
    return self._of._table.flags[self.name].default  # pylint: disable=protected-access


class Table:
  """A binary's flags, defined with `define` (and `alias`), read with
  `read` or `values`."""

  def __init__(self):
    self.flags: dict[str, Flag] = {}
    self.aliases: dict[str, str] = {}

  def define(self, kind: str, name: str, default, *args,
             lower_bound: Optional[float] = None,
             upper_bound: Optional[float] = None) -> None:
    """Adds flag `name`: `define(ENUM, name, default, choices, help)`, or
    `define(kind, name, default, help, lower_bound=, upper_bound=)`.

    Raises:
      ValueError: A name defined twice, or a default its flag refuses.
    """
    if name in self.flags or name in self.aliases:
      raise ValueError(f'flag --{name} is defined twice.')
    choices, (help_text,) = ((tuple(args[0]), args[1:]) if kind == ENUM
                             else ((), args))
    flag = Flag(name, kind, None, help_text, choices, lower_bound,
                upper_bound, sys._getframe(1).f_globals.get(  # pylint: disable=protected-access
                    '__name__', __name__))
    self.flags[name] = dataclasses.replace(flag, default=flag.parse(default))

  def alias(self, alias: str, name: str) -> None:
    """`--alias` is another name of `--name`."""
    if alias in self.flags or alias in self.aliases:
      raise ValueError(f'flag --{alias} is defined twice.')
    self.aliases[alias] = name

  def __contains__(self, name) -> bool:
    return name in self.flags

  def _flag(self, name: str) -> Flag:
    flag = self.flags.get(self.aliases.get(name, name))
    if flag is None:
      raise FlagError(f'Unknown command line flag {name!r}')
    return flag

  def values(self, given: Mapping[str, Any]) -> Values:
    """`Values` of `given` (name -> its text or Python value; None: the
    default, as not given), the rest at their defaults.

    Raises:
      FlagError: `flag --name=value: why`, or an unknown name.
    """
    return self._values(given.items())

  def _values(self, given) -> Values:
    """`values` of (name as given, value) pairs, a later one winning."""
    values = {name: flag.default for name, flag in self.flags.items()}
    present = []
    for name, value in given:
      flag = self._flag(name)
      if value is None:
        continue
      try:
        values[flag.name] = flag.parse(value)
      except ValueError as e:  # By its own name, as absl says it.
        raise FlagError(f'flag --{flag.name}={_text(value)}: {e}') from None
      present.append(flag.name)
    return Values(self, values, present)

  def read(self, args: Sequence[str]) -> Values:
    """`Values` of a command line's flags: `--name=value` (or `--name
    value`), and `--name` / `--noname` for a bool; a later one wins.

    Raises:
      FlagError: One line: an unknown flag, a value refused, or (once the
        flags are read) arguments that are not flags.
    """
    given, args, stray = [], list(args), []
    while args:
      arg = args.pop(0)
      if not arg.startswith('-') or arg in ('-', '--'):
        stray.append(arg)  # Said after the flags, as a binary says it.
        continue
      name, has_value, value = arg.lstrip('-').partition('=')
      if not has_value:
        flag = self.flags.get(self.aliases.get(name, name))
        negated = (self.flags.get(self.aliases.get(name[2:], name[2:]))
                   if flag is None and name.startswith('no') else None)
        if negated is not None and negated.kind == BOOL:
          name, value = name[2:], 'false'
        elif self._flag(name).kind == BOOL:
          value = 'true'
        elif args:
          value = args.pop(0)
        else:
          raise FlagError(f'flag --{name} needs a value.')
      given.append((name, value))
    values = self._values(given)
    if stray:
      raise FlagError(f'Unexpected arguments: {" ".join(stray)}')
    return values

  def define_absl(self, flag_values) -> None:
    """Defines every flag (and alias) in absl's `flag_values`, each parsed
    by its `Flag.parse`, for a binary's command line (`--helpfull` groups
    them by the module that defined them)."""
    from absl import flags  # pylint: disable=g-import-not-at-top
    for flag in self.flags.values():
      if flag.kind == BOOL:  # absl's, for --name and --noname.
        defined = flags.BooleanFlag(flag.name, flag.default, flag.help)
        defined.parser = _parser(flag, flags.BooleanParser)
      else:
        defined = flags.Flag(
            _parser(flag, flags.ArgumentParser),
            flags.CsvListSerializer(',') if flag.kind == LIST
            else flags.ArgumentSerializer(),
            flag.name, flag.default, _help(flag))
      flags.DEFINE_flag(defined, flag_values, module_name=flag.module)
    for alias, name in self.aliases.items():
      flags.DEFINE_alias(alias, name, flag_values=flag_values,
                         module_name=self.flags[name].module)

  def from_absl(self, flag_values) -> Values:
    """`Values` of absl's parsed `flag_values` (this table's flags, as
    `define_absl` defined them)."""
    return Values(self, {name: flag_values[name].value
                         for name in self.flags},
                  [name for name in self.flags if flag_values[name].present])


def _text(value) -> str:
  if isinstance(value, (list, tuple)):
    return ','.join(map(str, value))
  return str(value)


def _help(flag: Flag) -> str:
  """The help absl shows: an `ENUM`'s choices first, as absl shows them."""
  if flag.kind == ENUM:
    return f'<{"|".join(flag.choices)}>: {flag.help}'
  return flag.help


def _parser(flag: Flag, base):
  """An absl parser (a subclass of `base`) calling `flag.parse`."""

  class Parser(base):
    # After the default in --help: the kind and bounds ('an integer >= 1').
    syntactic_help = {
        INTEGER: 'an integer', FLOAT: 'a number',
        LIST: 'a comma-separated list'}.get(flag.kind, '') + (
            f' {flag.bounds}' if flag.bounds else '')

    def parse(self, argument):
      return flag.parse(argument)

    def flag_type(self):
      return flag.kind

  return Parser()
