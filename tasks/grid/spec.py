"""A grid spec: a binary, its flags, settings crossed from axes, seeds, and
what to summarise.

A grid is many ordinary runs: each (setting, seed) is one run of an existing
training binary (`python -m tasks.digits.train ...`) in its own run
directory, so the directory lock, resume, the non-finite guard, config.json
and provenance are the binaries' own. A spec only says which runs and how to
compare them:

    SPEC = spec.Spec(
        name='k_vs_rate', binary='tasks.digits.train',
        flags=dict(rounds=60, clients_per_round=10),
        settings=spec.cross(
            ('K', {'1': dict(num_local_steps=1), '10': dict(num_local_steps=10)}),
            ('gamma', {'0.1': dict(client_learning_rate=0.1),
                       '0.3': dict(client_learning_rate=0.3)})),
        seeds=(0, 1, 2),
        summaries=(summaries.Best(keys.eval_column('accuracy')),))

The runs are `<output_dir>/runs/<setting>/seed_<s>/`.
"""

import dataclasses
import os
import re
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional

RUNS_DIR, LOGS_DIR, SUMMARY_DIR, SPECS_DIR = 'runs', 'logs', 'summary', 'specs'
ROUND = 'round'  # metrics.csv's round column (`tff_mixed.keys.ROUND`).


@dataclasses.dataclass(frozen=True)
class Curve:
  """A plot of metrics.csv's `column`, a line a setting (the mean over
  seeds) with a band for the 95% interval.

  Attributes:
    column: The metrics.csv column.
    window: A rolling mean over this many rows first (seed 000 smooths the
      training error over 200 rounds).
    x: What the curve is drawn against: the round, or a cumulative column
      (seed 001's figures: `simulated_seconds_cumulative`, the runtime
      model's wall-clock), averaged over seeds at each round.
    running_min: Draw the lowest value so far (seed 001 Fig. 1's "minimum
      cumulative training error"), each seed's before the mean.
  """
  column: str
  window: int = 1
  x: str = ROUND
  running_min: bool = False

  @property
  def file_name(self) -> str:
    """The plot's file name in the summary directory."""
    name = self.column.replace('/', '_')
    if self.running_min:
      name += '_running_min'
    if self.x != ROUND:
      name += '_vs_' + self.x.replace('/', '_')
    return name + '.png'


def _as_curve(curve: Any, where: str) -> Curve:
  """A `Curve`, or a (column, window) pair as one."""
  if isinstance(curve, Curve):
    column, window = curve.column, curve.window
  elif isinstance(curve, (tuple, list)) and len(curve) == 2:
    column, window = curve
  else:
    column = window = None
  if not (isinstance(column, str) and isinstance(window, int)
          and not isinstance(window, bool) and window >= 1):
    raise ValueError(f'{where} = {curve!r} is not a Curve or a (metrics.csv '
                     'column, smoothing window >= 1) pair.')
  return curve if isinstance(curve, Curve) else Curve(column, window)


@dataclasses.dataclass(frozen=True)
class Setting:
  """One row of the table: a value of each axis and the flags they give.

  Attributes:
    labels: (axis, value label) pairs in the axes' order.
    flags: Flag name -> value, over the spec's flags.
  """
  labels: tuple[tuple[str, str], ...]
  flags: Mapping[str, Any]

  @property
  def name(self) -> str:
    """'K=10, variant=decaying K'."""
    return ', '.join(f'{axis}={value}' for axis, value in self.labels)

  @property
  def dir_name(self) -> str:
    """The run directory's name: the labels in lower case, every run of
    other characters one '_' ('K=10, variant=decaying K' ->
    'k_10_variant_decaying_k')."""
    return re.sub(r'[^a-z0-9.]+', '_', self.name.lower()).strip('_') or 'run'

  def label(self, axis: str) -> Optional[str]:
    """This setting's value label on `axis` (None if it has no such axis)."""
    return dict(self.labels).get(axis)


Axis = tuple[str, Mapping[str, Mapping[str, Any]]]


def cross(*axes: Axis,
          cell: Optional[Callable[[Mapping[str, str]],
                                  Optional[Mapping[str, Any]]]] = None,
          ) -> list[Setting]:
  """Every combination of the axes' values, in order (the last axis
  fastest).

  Args:
    *axes: `(name, {value label: flags})` pairs.
    cell: Optional `labels -> flags` for what depends on several axes (a
      paper's per-cell rates): its flags go over the axes', and None drops
      the combination.
  """
  settings = [Setting((), {})]
  for name, values in axes:
    if not values:
      raise ValueError(f'axis {name!r} has no values.')
    settings = [Setting(s.labels + ((name, label),), {**s.flags, **flags})
                for s in settings for label, flags in values.items()]
  if cell is None:
    return settings
  kept = []
  for s in settings:
    extra = cell(dict(s.labels))
    if extra is not None:
      kept.append(Setting(s.labels, {**s.flags, **extra}))
  return kept


@dataclasses.dataclass(frozen=True)
class Run:
  """One run of the grid: a setting at a seed, in `output_dir`.

  Attributes:
    spec_file: The run's spec (`tasks.common.run_spec.RunSpec`'s JSON, the
      flags read by the binary: `tasks.grid.run_specs.with_specs` writes it),
      which the binary is given instead of the flags; None for a binary
      that takes flags only.
  """
  setting: Setting
  seed: int
  output_dir: str
  binary: str
  flags: Mapping[str, Any]
  spec_file: Optional[str] = None

  @property
  def name(self) -> str:
    return f'{self.setting.name}, seed {self.seed}'

  @property
  def rounds(self) -> int:
    return int(self.flags['rounds'])

  def args(self) -> list[str]:
    """The binary's flags for this run."""
    return [*(f'--{k}={_flag_text(v)}' for k, v in self.flags.items()),
            f'--seed={self.seed}', f'--output_dir={self.output_dir}']

  def argv(self, python: str = sys.executable) -> list[str]:
    """The command line that runs it: `python -m <binary>
    --spec_json=<spec_file> --output_dir=<output_dir>`, or with its flags
    for a binary that takes flags only."""
    if self.spec_file is None:
      return [python, '-m', self.binary, *self.args()]
    return [python, '-m', self.binary, f'--spec_json={self.spec_file}',
            f'--output_dir={self.output_dir}']

  def command(self, python: str = 'python') -> str:
    """The shell command that runs it (for `--list`)."""
    return shlex.join(self.argv(python))


def _rounds(value: Any) -> Optional[int]:
  """`value` as a count >= 1 (an int, or its text as a command line gives
  it), or None."""
  if isinstance(value, bool) or not isinstance(value, (int, str)):
    return None
  try:
    count = int(value)
  except ValueError:
    return None
  return count if count >= 1 else None


def _flag_text(value: Any) -> str:
  if isinstance(value, bool):
    return 'true' if value else 'false'
  if isinstance(value, (list, tuple)):
    return ','.join(str(v) for v in value)
  return str(value)


@dataclasses.dataclass(frozen=True)
class Spec:
  """A grid: `binary` run at every setting and seed.

  Attributes:
    name: Names the summary files.
    binary: The training binary's module (`tasks.digits.train`).
    settings: The table's rows (`cross` builds them).
    seeds: Each setting runs once per seed (`--seed`).
    flags: Flags of every run; a setting's flags go over them. Must give
      `rounds`, an integer >= 1 (a grid compares runs of a fixed length; a
      run is finished when its metrics.csv reaches it).
    summaries: What the table reports (`tasks.grid.summaries`).
    curves: What is plotted over seeds: `Curve`s, or (column, smoothing
      window) pairs for a column against the round.
    description: What the grid reproduces and how it departs from it.
  """
  name: str
  binary: str
  settings: Sequence[Setting]
  seeds: Sequence[int]
  summaries: Sequence[Any]
  flags: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  curves: Sequence[Any] = ()
  description: str = ''

  def __post_init__(self):
    if not self.settings:
      raise ValueError(f'grid {self.name!r} has no settings.')
    if not self.seeds:
      raise ValueError(f'grid {self.name!r} has no seeds.')
    if len(set(self.seeds)) != len(self.seeds):
      raise ValueError(f'grid {self.name!r} repeats a seed: {self.seeds}.')
    dirs = [s.dir_name for s in self.settings]
    clash = sorted({d for d in dirs if dirs.count(d) > 1})
    if clash:
      raise ValueError(f'grid {self.name!r}: two settings share the run '
                       f'directory {clash[0]!r}; give them other labels.')
    for s in self.settings:
      flags = {**self.flags, **s.flags}
      reserved = {'seed', 'output_dir'} & set(flags)
      if reserved:
        raise ValueError(
            f'grid {self.name!r}, {s.name}: --{sorted(reserved)[0]} is the '
            "grid's to set (from the seeds and the run's directory).")
      if 'rounds' not in flags:
        raise ValueError(f'grid {self.name!r}, {s.name}: give --rounds in '
                         'the flags (runs of a grid have a fixed length).')
      if _rounds(flags['rounds']) is None:
        raise ValueError(f'grid {self.name!r}, {s.name}: '
                         f'--rounds={flags["rounds"]!r} is not a number of '
                         'rounds (give an integer >= 1).')
    for i, summary in enumerate(self.summaries):
      if not isinstance(getattr(summary, 'name', None), str):
        raise ValueError(f'grid {self.name!r}: summaries[{i}] = {summary!r} '
                         'is not a summary (see tasks.grid.summaries).')
    object.__setattr__(self, 'curves', tuple(
        _as_curve(curve, f'grid {self.name!r}: curves[{i}]')
        for i, curve in enumerate(self.curves)))
    names = [c.file_name for c in self.curves]
    if len(set(names)) != len(names):
      raise ValueError(f'grid {self.name!r}: two curves draw the same plot '
                       f'({sorted(n for n in names if names.count(n) > 1)[0]}'
                       '); drop one.')

  def reduced(self, *, values_per_axis: int = 2, num_seeds: int = 2,
              rounds: Optional[int] = None,
              values: Optional[Mapping[str, Sequence[str]]] = None
              ) -> 'Spec':
    """The grid on the first `values_per_axis` values of each axis (or the
    `values` given for an axis) and the first `num_seeds` seeds, with
    `rounds` rounds if given: a check that every part of a grid runs, in
    minutes (the tests run the specs so)."""
    axes = [axis for axis, _ in self.settings[0].labels]
    first = {a: list(dict.fromkeys(s.label(a) for s in self.settings))
             [:values_per_axis] for a in axes}
    first.update(values or {})
    settings = [s for s in self.settings
                if all(s.label(a) in first[a] for a in axes)]
    if rounds is not None:
      settings = [Setting(s.labels, {**s.flags, 'rounds': rounds})
                  if 'rounds' in s.flags else s for s in settings]
    flags = dict(self.flags) if rounds is None else {**self.flags,
                                                     'rounds': rounds}
    return dataclasses.replace(self, name=f'{self.name}_reduced',
                               settings=settings,
                               seeds=tuple(self.seeds[:num_seeds]),
                               flags=flags)

  def with_flags(self, extra: Mapping[str, Any]) -> 'Spec':
    """The grid with `extra` (where the data is, say) over every run's
    flags."""
    if not extra:
      return self
    return dataclasses.replace(self, settings=[
        Setting(s.labels, {**s.flags, **extra}) for s in self.settings])

  def runs(self, output_dir: str) -> list[Run]:
    """Every run, setting by setting, seed by seed."""
    return [Run(setting=s, seed=seed, binary=self.binary,
                # A log has no use for a progress bar.
                flags={'progress': False, **self.flags, **s.flags},
                output_dir=os.path.join(output_dir, RUNS_DIR, s.dir_name,
                                        f'seed_{seed}'))
            for s in self.settings for seed in self.seeds]
