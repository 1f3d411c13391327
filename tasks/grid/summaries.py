"""What a grid's table reports: one number a run, from its metrics.csv, then
the mean and a 95% confidence interval over seeds.

Each summary is a function of one run's history (the rows of metrics.csv);
`Ratio` divides by the same seed's run of a baseline setting, and
`OfMeanCurve` reads a summary off the curve averaged over seeds instead (one
number a setting, no interval: how seed 000 Table 1 reads its figures; the
mean of each seed's best is at least as good as the best of the mean curve,
so the two readings differ). A summary that
a run cannot give (a target never reached) is NaN for that run, and the
table says in how many seeds it was reached. The metrics.csv columns a
summary reads are its `columns`: a finished run without one is an error of
the spec (`tasks.grid.table.check_columns`), not a NaN.
"""

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Optional

import numpy as np
from scipy import stats

from tff_mixed import keys

Row = Mapping[str, float]


def _values(history: Sequence[Row], column: str) -> list[tuple[int, float]]:
  """(round, value) of every row holding `column`."""
  return [(int(r[keys.ROUND]), float(r[column])) for r in history
          if column in r]


def _column(history, column) -> list[tuple[int, float]]:
  values = _values(history, column)
  if not values:
    raise KeyError(column)
  return values


def columns(summary) -> tuple[str, ...]:
  """The metrics.csv columns `summary` reads: its `columns`, or its
  `column` (a summary of one's own making), or none known."""
  if hasattr(summary, 'columns'):
    return tuple(summary.columns)
  column = getattr(summary, 'column', None)
  return (column,) if isinstance(column, str) else ()


@dataclasses.dataclass(frozen=True)
class Final:
  """The mean of the last `last` values of `column` (of the last `last`
  evaluations, for an `eval/` column); `last=0`: of every value; times
  `scale` (a paper's unit: 1e-8 for FLOPs in units of 10^8)."""
  column: str
  last: int = 1
  label: Optional[str] = None
  scale: float = 1.0

  @property
  def name(self) -> str:
    if self.label:
      return self.label
    if self.last == 0:
      return f'mean {self.column}'
    return (f'final {self.column}' if self.last == 1 else
            f'{self.column}, mean of last {self.last}')

  @property
  def columns(self) -> tuple[str, ...]:
    return (self.column,)

  def __call__(self, history: Sequence[Row]) -> float:
    values = [v for _, v in _column(history, self.column)]
    return float(np.mean(values[-self.last:] if self.last else values)
                 * self.scale)


@dataclasses.dataclass(frozen=True)
class Best:
  """The highest (`mode='max'`) or lowest value `column` reached, after a
  rolling mean over `window` rows (seed 000 smooths the training error
  over 200 rounds)."""
  column: str
  mode: str = 'max'
  window: int = 1
  label: Optional[str] = None

  @property
  def name(self) -> str:
    smooth = f', smoothed over {self.window}' if self.window > 1 else ''
    return self.label or f'{self.mode} {self.column}{smooth}'

  @property
  def columns(self) -> tuple[str, ...]:
    return (self.column,)

  def __call__(self, history: Sequence[Row]) -> float:
    values = np.array([v for _, v in _column(history, self.column)])
    if self.window > 1:
      if len(values) < self.window:
        return math.nan  # Fewer rows than the window: no smoothed value.
      values = np.convolve(values, np.ones(self.window) / self.window,
                           mode='valid')
    return float(values.max() if self.mode == 'max' else values.min())


# What `ToTarget` counts until the target: a metrics.csv column read at the
# row where the target is first reached.
COST_COLUMNS = {
    'rounds': keys.ROUND,
    'sgd_steps': keys.SGD_STEPS_CUMULATIVE,
    'simulated_seconds': keys.SIMULATED_SECONDS_CUMULATIVE,
}


@dataclasses.dataclass(frozen=True)
class ToTarget:
  """Rounds, SGD steps or simulated seconds (`cost`) until `column` first
  reaches `target` (>= for mode 'max', <= for 'min'); NaN if it never does."""
  column: str
  target: float
  cost: str = 'rounds'
  mode: str = 'max'
  label: Optional[str] = None

  def __post_init__(self):
    if self.cost not in COST_COLUMNS:
      raise ValueError(f'cost must be one of {sorted(COST_COLUMNS)}, got '
                       f'{self.cost!r}.')

  @property
  def name(self) -> str:
    sign = '>=' if self.mode == 'max' else '<='
    return self.label or f'{self.cost} to {self.column} {sign} {self.target:g}'

  @property
  def columns(self) -> tuple[str, ...]:
    return (self.column, COST_COLUMNS[self.cost])

  def __call__(self, history: Sequence[Row]) -> float:
    cost = COST_COLUMNS[self.cost]
    for row in history:
      if self.column in row:
        value = row[self.column]
        if (value >= self.target if self.mode == 'max'
            else value <= self.target):
          return float(row[cost])
    return math.nan


@dataclasses.dataclass(frozen=True)
class Total:
  """The sum over rounds of a per-round `column` (e.g. bytes uploaded per
  client), times the round's participating clients if `per_client`."""
  column: str
  per_client: bool = False
  label: Optional[str] = None

  @property
  def name(self) -> str:
    return self.label or f'total {self.column}'

  @property
  def columns(self) -> tuple[str, ...]:
    return (self.column,) + ((keys.ROUND_PARTICIPATING,) if self.per_client
                             else ())

  def __call__(self, history: Sequence[Row]) -> float:
    total = 0.0
    for row in history:
      if self.column in row:
        weight = row.get(keys.ROUND_PARTICIPATING, 0) if self.per_client else 1
        total += float(row[self.column]) * weight
    return total


@dataclasses.dataclass(frozen=True)
class Ratio:
  """`summary` of a run over `summary` of the same seed's run of the
  setting whose labels are these run's with `baseline` put over them (e.g.
  `{'variant': 'constant'}`: SGD steps relative to constant K)."""
  summary: object
  baseline: Mapping[str, str]
  label: Optional[str] = None

  @property
  def name(self) -> str:
    base = ', '.join(f'{k}={v}' for k, v in self.baseline.items())
    return self.label or f'{self.summary.name} vs {base}'

  @property
  def columns(self) -> tuple[str, ...]:
    return columns(self.summary)


@dataclasses.dataclass(frozen=True)
class OfMeanCurve:
  """`summary` of the mean curve: each column averaged over the finished
  seeds at every round they all have (`mean_history`), then summarised once.
  A paper that reports the best point of a figure's averaged curve reads
  its table so; the table gives no interval for it, and `n` counts the
  seeds averaged."""
  summary: object
  label: Optional[str] = None

  @property
  def name(self) -> str:
    return self.label or f'{self.summary.name}, of the mean curve'

  @property
  def columns(self) -> tuple[str, ...]:
    return columns(self.summary)

  def __call__(self, histories: Sequence[Sequence[Row]]) -> float:
    return self.summary(mean_history(histories, self.columns))


def mean_history(histories: Sequence[Sequence[Row]],
                 columns_: Sequence[str]) -> list[dict[str, float]]:
  """Rows of `columns_` averaged over `histories`: for each column, the
  rounds where every history has it, with the mean value."""
  by_round: dict[int, dict[str, float]] = {}
  for column in columns_:
    series = [dict(_values(h, column)) for h in histories]
    if not series or not all(series):
      continue
    for r in sorted(set.intersection(*(set(s) for s in series))):
      by_round.setdefault(r, {keys.ROUND: r})[column] = float(
          np.mean([s[r] for s in series]))
  return [by_round[r] for r in sorted(by_round)]


def confidence_interval(values: Sequence[float],
                        level: float = 0.95) -> tuple[float, float, int]:
  """(mean, half-width, n) of the finite `values`: Student's t interval
  t_{(1+level)/2, n-1} s / sqrt(n); the half-width is NaN below 2 values."""
  finite = np.array([v for v in values if math.isfinite(v)], np.float64)
  n = len(finite)
  if not n:
    return math.nan, math.nan, 0
  mean = float(finite.mean())
  if n < 2:
    return mean, math.nan, n
  half = stats.t.ppf((1 + level) / 2, n - 1) * finite.std(ddof=1) / math.sqrt(n)
  return mean, float(half), n
