"""A grid's table (CSV and Markdown) and curves, from its run directories.

Each cell is the mean ± the 95% confidence-interval half-width (Student t)
of a summary over the seeds whose run is finished; `n` says how many. An
unfinished or failed run is left out and named, so a partial grid can be
summarised while the rest runs. A summary or curve reading a column that no
finished run's metrics.csv has is an error of the spec (`check_columns`: a
misspelt column, a metric the binary does not write), not a column of
empty cells; a column only some runs have (`dp/epsilon` beside runs
without DP) is n/a in the others.
"""

import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any, Optional

import numpy as np

from tasks.common import reports
from tasks.grid import run_specs
from tasks.grid import runner
from tasks.grid import spec as spec_lib
from tasks.grid import summaries
from tff_mixed import keys
from tff_mixed.driver import errors
from tff_mixed.driver import history as history_lib
from tff_mixed.driver import layout


class MissingColumnError(errors.RunError, ValueError):
  """A summary or curve of the spec reads a column a finished run's
  metrics.csv does not have (a misspelt column, or a metric the binary does
  not write); its message is one line."""


def read_runs(spec: spec_lib.Spec, output_dir: str
              ) -> tuple[dict[tuple[str, int], list], list[spec_lib.Run]]:
  """{(setting name, seed): history} of the finished runs, and the others."""
  histories, missing = {}, []
  for run in spec.runs(output_dir):
    if runner.is_done(run):
      histories[run.setting.name, run.seed] = history_lib.read_history(
          os.path.join(run.output_dir, layout.METRICS_FILE), run.rounds)
    else:
      missing.append(run)
  return histories, missing


def _wanted(spec: spec_lib.Spec) -> list[tuple[str, str]]:
  """(what reads it, column) of every column the spec's summaries and
  curves read."""
  wanted = [(f'summary {s.name!r}', column) for s in spec.summaries
            for column in summaries.columns(s)]
  return wanted + [(f'curve {c.column!r}', column) for c in spec.curves
                   for column in (c.column, c.x)]


def check_columns(spec: spec_lib.Spec, output_dir: str,
                  histories=None) -> None:
  """Raises MissingColumnError, naming the summary or curve, the column and
  a metrics.csv, if no finished run has a column the spec reads (a column
  some have is n/a in the others). Runs not finished yet are not read: a
  grid with none finished passes (`check_planned_columns` reads them)."""
  if histories is None:
    histories, _ = read_runs(spec, output_dir)
  finished = [(run, list(dict.fromkeys(
      k for row in histories[run.setting.name, run.seed] for k in row)))
              for run in spec.runs(output_dir)
              if (run.setting.name, run.seed) in histories]
  if not finished:
    return
  for what, column in _wanted(spec):
    if not any(column in has for _, has in finished):
      run, has = finished[0]
      others = (f' (nor does any of the other {len(finished) - 1} finished '
                'runs)' if len(finished) > 1 else '')
      raise MissingColumnError(
          f'grid {spec.name!r}: {what} reads the column {column!r}, which '
          f'{os.path.join(run.output_dir, layout.METRICS_FILE)} does not '
          f'have (its columns: {", ".join(has)}){others}.')


def check_planned_columns(spec: spec_lib.Spec, output_dir: str,
                          todo: Sequence[spec_lib.Run],
                          columns_of=None) -> None:
  """Before any run of `todo` (runs given their spec files) starts: raises
  MissingColumnError if a summary or curve reads a column that no finished
  run has and no run of `todo` will write, so a misspelt column is said
  before anything trains, not after every run has.

  What a run will write is `columns_of(run_spec)` (default
  `tasks.common.run.columns`: its task and process built, not trained),
  read for one setting after another only while a column is still
  unaccounted for: one build when the spec is right. Runs without a spec
  file (a binary of your own that takes flags only) cannot be read; a grid
  with one checks its finished runs only (`check_columns`).
  """
  histories, _ = read_runs(spec, output_dir)
  written = {k for history in histories.values() for row in history
             for k in row}
  missing = [(what, c) for what, c in _wanted(spec) if c not in written]
  if not missing or any(run.spec_file is None for run in todo):
    return
  if columns_of is None:
    from tasks.common import run as run_lib  # pylint: disable=g-import-not-at-top
    columns_of = run_lib.columns
  from tasks.common import saved_run  # pylint: disable=g-import-not-at-top
  read, first = set(), None
  for run in todo:
    run_spec = saved_run.read_spec_file(run.spec_file)
    # Seeds and output directories do not change the columns.
    key = dataclasses.replace(
        run_spec, run=dataclasses.replace(run_spec.run, seed=0),
        execution=dataclasses.replace(run_spec.execution,
                                      output_dir=None)).to_json()
    if key in read:
      continue
    read.add(key)
    try:
      has = columns_of(run_spec)
    except (ValueError, RuntimeError) as e:  # Its own one line, named.
      raise run_specs.SpecError(f'run {run.name}: {e}') from None
    first = first or (run, has)
    missing = [(what, c) for what, c in missing if c not in has]
    if not missing:
      return
  if first is None:  # Nothing left to train: the finished runs decide.
    return
  what, column = missing[0]
  run, has = first
  finished = 'no finished run has and ' if histories else ''
  raise MissingColumnError(
      f'grid {spec.name!r}: {what} reads the column {column!r}, which '
      f'{finished}none of the {len(todo)} runs to train would write (run '
      f'{run.name} writes {", ".join(has)}); nothing was trained.')


def _per_run(summary, setting, seed, spec, histories) -> float:
  """`summary` of one run: NaN if the run, or the baseline run a Ratio
  divides by, is not finished, or lacks a column the summary reads (that
  other runs have: `check_columns` refused one none has), and whatever NaN
  the summary itself means (a target never reached, fewer rows than a
  rolling window)."""
  history = histories.get((setting.name, seed))
  if history is None:
    return math.nan
  if isinstance(summary, summaries.Ratio):
    labels = {**dict(setting.labels), **summary.baseline}
    base = next((s for s in spec.settings if dict(s.labels) == labels), None)
    if base is None:
      raise ValueError(f'{summary.name}: no setting has the labels '
                       f'{labels}.')
    denominator = _per_run(summary.summary, base, seed, spec, histories)
    return _per_run(summary.summary, setting, seed, spec,
                    histories) / denominator
  try:
    return summary(history)
  except KeyError:  # A column this run has not: n/a here.
    return math.nan


def _of_mean_curve(summary, setting, spec, histories):
  """(value, NaN, seeds averaged) of an `OfMeanCurve` summary."""
  finished = [histories[setting.name, seed] for seed in spec.seeds
              if (setting.name, seed) in histories]
  if not finished:
    return math.nan, math.nan, 0
  return summary(finished), math.nan, len(finished)


def rows(spec: spec_lib.Spec, histories) -> list[dict[str, Any]]:
  """One row a setting: its labels, then mean, ci and n of each summary.

  Raises:
    MissingColumnError: A summary of one's own (its columns not known to
      `check_columns`) that every finished run lacks a column of.
  """
  for summary in spec.summaries:
    if summaries.columns(summary) or not histories:
      continue
    lacking = []
    for history in histories.values():
      try:
        summary(history)
      except KeyError as e:
        lacking.append(e)
      except Exception:  # pylint: disable=broad-except
        pass  # Said when the row is made.
    if len(lacking) == len(histories):
      raise MissingColumnError(
          f'grid {spec.name!r}: summary {summary.name!r} reads the column '
          f'{lacking[0]}, which no finished run has.')
  table = []
  for setting in spec.settings:
    row = dict(setting.labels)
    for summary in spec.summaries:
      if isinstance(summary, summaries.OfMeanCurve):
        mean, half, n = _of_mean_curve(summary, setting, spec, histories)
      else:
        values = [_per_run(summary, setting, seed, spec, histories)
                  for seed in spec.seeds]
        mean, half, n = summaries.confidence_interval(values)
      row[summary.name] = mean
      row[f'{summary.name} ±95%'] = half
      row[f'{summary.name} n'] = n
    table.append(row)
  return table


def _number(value: float) -> str:
  # n/a: no finished seed (the cell says 0/n seeds), or no seed's run gave a
  # value (a target never reached, fewer rows than the rolling window, a
  # column these runs have not); a column no finished run has is an error
  # before this (`check_columns`).
  if not math.isfinite(value):
    return 'n/a'
  if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
    return f'{value:.3g}'
  return f'{value:.4g}' if abs(value) < 100 else f'{value:.0f}'


def markdown(spec: spec_lib.Spec, table: Sequence[Mapping[str, Any]],
             num_seeds: int) -> str:
  axes = [axis for axis, _ in spec.settings[0].labels]
  header = [*axes, *(s.name for s in spec.summaries)]
  lines = ['| ' + ' | '.join(header) + ' |',
           '|' + '---|' * len(header)]
  for row in table:
    cells = [str(row[a]) for a in axes]
    for s in spec.summaries:
      mean, half, n = row[s.name], row[f'{s.name} ±95%'], row[f'{s.name} n']
      cell = _number(mean)
      if math.isfinite(half):  # Float noise around equal values is 0.
        cell += f' ± {_number(0.0 if half <= 1e-12 * abs(mean) else half)}'
      if n != num_seeds:
        cell += f' ({n}/{num_seeds} seeds)'
      cells.append(cell)
    lines.append('| ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines) + '\n'


def _curve(histories, setting, seeds, curve: spec_lib.Curve):
  """(x, mean, half-width) over the seeds of `curve.column` (a rolling mean
  over `curve.window` rows, then its running minimum if asked), on the
  rounds every finished seed has; x is the round or the mean over seeds of
  `curve.x` at it."""
  series, xs = [], []
  window = curve.window
  for seed in seeds:
    history = histories.get((setting.name, seed))
    if history is None:
      continue
    points = [(int(r[keys.ROUND]), float(r[curve.column])) for r in history
              if curve.column in r and curve.x in r]
    if len(points) < window:
      continue
    rounds = np.array([p[0] for p in points])
    values = np.convolve([p[1] for p in points], np.ones(window) / window,
                         mode='valid')
    if curve.running_min:
      values = np.minimum.accumulate(values)
    series.append(dict(zip(rounds[window - 1:].tolist(), values)))
    xs.append({int(r[keys.ROUND]): float(r[curve.x]) for r in history
               if curve.x in r})
  if not series:
    return None
  common = sorted(set.intersection(*(set(s) for s in series)))
  stats = [summaries.confidence_interval([s[r] for s in series])
           for r in common]
  x = np.array([np.mean([seed_x[r] for seed_x in xs]) for r in common])
  return (x, np.array([m for m, _, _ in stats]),
          np.array([h for _, h, _ in stats]))


_LINE_STYLES = ('-', '--', ':', '-.')


def _styles(settings) -> list[tuple[str, str]]:
  """(colour, line style) a setting: the colour by the first axis's value
  and the style by the second's (K by colour, the scheme by line), or a
  colour a setting on one axis or more than four values of the second."""
  axes = [axis for axis, _ in settings[0].labels]
  values = [list(dict.fromkeys(s.label(a) for s in settings)) for a in axes]
  if len(axes) < 2 or len(values[1]) > len(_LINE_STYLES):
    return [(f'C{i % 10}', '-') for i in range(len(settings))]
  return [(f'C{values[0].index(s.label(axes[0])) % 10}',
           _LINE_STYLES[values[1].index(s.label(axes[1]))]) for s in settings]


# Where a metrics.csv column's values can lie, by the end of its name.
_UNIT_RANGE = ('accuracy', 'auc', 'recall', 'precision')
_NONNEGATIVE = ('loss', 'seconds', 'bytes', 'flops', 'steps')
# Readable words for the metrics.csv prefixes (tff_mixed.keys).
_PREFIXES = (('client_work/train/', 'training '),
             ('train_eval/', "global model's training "),
             ('validation/', 'validation '), ('eval/', 'test '))


def metric_range(column: str) -> tuple[float, float]:
  """(low, high) the values of `column` lie in: [0, 1] for an accuracy,
  AUC, recall or precision, [0, inf) for a loss or a count, else
  unbounded."""
  last = column.rsplit('/', 1)[-1]
  if last.startswith(_UNIT_RANGE):
    return 0.0, 1.0
  if any(word in last for word in _NONNEGATIVE) or last.startswith('num_'):
    return 0.0, np.inf
  return -np.inf, np.inf


def readable(column: str) -> str:
  """`column` in words, with its id: 'test accuracy (eval/accuracy)'."""
  for prefix, words in _PREFIXES:
    if column.startswith(prefix):
      rest = column[len(prefix):].replace('/', ' ').replace('_', ' ')
      return f'{words}{rest} ({column})'
  return column


def plot(spec: spec_lib.Spec, histories, curve: spec_lib.Curve,
         path: str) -> None:
  """`curve.column` against the round or `curve.x`: a line a setting (mean
  over seeds), a band for the 95% interval."""
  column, window = curve.column, curve.window
  plt = reports.pyplot()
  fig, ax = plt.subplots(figsize=(9.5, 5), layout='constrained')
  drawn = 0
  for setting, (color, style) in zip(spec.settings, _styles(spec.settings)):
    points = _curve(histories, setting, spec.seeds, curve)
    if points is None:
      continue
    drawn += 1
    x, mean, half = points
    # A curve of a few points (an evaluation or two) shows them.
    ax.plot(x, mean, color=color, ls=style, lw=1.5, label=setting.name,
            marker='o' if len(x) < 3 else None, ms=5)
    band = np.nan_to_num(half)
    # A t interval of few seeds runs past what the metric can be (an
    # accuracy above 1): the band stops at the metric's range.
    low, high = metric_range(column)
    ax.fill_between(x, np.clip(mean - band, low, high),
                    np.clip(mean + band, low, high), color=color,
                    alpha=0.2, lw=0)
  if curve.x == keys.ROUND:
    reports.round_axis(ax)
  else:
    name = ('simulated wall-clock (s)'
            if curve.x == keys.SIMULATED_SECONDS_CUMULATIVE else curve.x)
    ax.set_xlabel(f'{name}, mean over seeds')
  smooth = f' (rolling mean over {window} rounds)' if window > 1 else ''
  ax.set_ylabel(('lowest so far: ' if curve.running_min else '')
                + readable(column) + smooth)
  ax.grid(alpha=0.3)
  ax.set_title(f'{spec.name}: mean over {len(spec.seeds)} seeds, band = 95% '
               'confidence interval', fontsize=10)
  if drawn:
    # Outside the axes, right: the curves keep the whole panel.
    ax.legend(fontsize=7, ncol=2 if len(spec.settings) > 12 else 1,
              loc='upper left', bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
  else:
    ax.text(0.5, 0.5, f'no finished run has {window} values of {column}',
            ha='center', va='center', transform=ax.transAxes)
  reports.save_figure(fig, path)


def summarise(spec: spec_lib.Spec, output_dir: str,
              out=None) -> Optional[list[dict[str, Any]]]:
  """Writes `summary/<name>.csv`, `.md` and a plot per curve; returns the
  table (None if no run is finished)."""
  histories, missing = read_runs(spec, output_dir)
  if not histories:
    print(f'{spec.name}: no run is finished yet; no summary.', file=out)
    return None
  check_columns(spec, output_dir, histories)  # Before anything is written.
  directory = os.path.join(output_dir, spec_lib.SUMMARY_DIR)
  os.makedirs(directory, exist_ok=True)
  table = rows(spec, histories)
  reports.write_csv(os.path.join(directory, f'{spec.name}.csv'), table)
  text = markdown(spec, table, len(spec.seeds))
  if missing:
    text += (f'\n{len(missing)} of {len(missing) + len(histories)} runs not '
             'finished: ' + '; '.join(r.name for r in missing) + '.\n')
  md = os.path.join(directory, f'{spec.name}.md')
  reports.write_text(md, text)
  for curve in spec.curves:
    plot(spec, histories, curve, os.path.join(directory, curve.file_name))
  print(text, file=out)
  print(f'summary: {md} (and .csv'
        + (', ' + ', '.join(c.file_name for c in spec.curves)
           if spec.curves else '') + ')', file=out)
  return table
