"""What a command writes for people to read: CSV and text tables and
figures, written atomically.

A file appears complete or not at all: each is written beside its final
path and renamed over it.
"""

import csv
import os
from collections.abc import Mapping, Sequence
from typing import Optional


def write_csv(path: str, rows: Sequence[dict]) -> None:
  """Writes `rows` (dicts with the same keys) as CSV with a header, numbers
  as metrics.csv writes them (`tff_mixed.driver.history.csv_value`: counts
  as integers, float32 values in their shortest form)."""
  from tff_mixed.driver import history  # pylint: disable=g-import-not-at-top
  if not rows:
    raise ValueError(f'no rows to write to {path}.')
  tmp = path + '.tmp'
  with open(tmp, 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows({k: history.csv_value(_plain(v)) for k, v in row.items()}
                     for row in rows)
  os.replace(tmp, path)


def _plain(value):
  """A NumPy scalar as the Python number it holds."""
  return value.item() if hasattr(value, 'item') and not isinstance(
      value, (str, bytes)) else value


def write_text(path: str, text: str) -> None:
  """Writes `text` to `path` (beside it first, then renamed over it)."""
  tmp = path + '.tmp'
  with open(tmp, 'w') as f:
    f.write(text)
  os.replace(tmp, path)


def pyplot():
  """matplotlib's pyplot on the file-only Agg backend."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  return plt


def round_axis(*axes, axis: str = 'x',
               label: Optional[str] = 'round') -> None:
  """Labels `axis` ('x' or 'y') of each of `axes` as a round axis, with
  whole-number ticks: matplotlib's default ticks a short run at round 2.5.
  The ticks step by 1, 2 or 5 times a power of 10 (the default's steps but
  2.5); an axis of under two rounds (one evaluation) spans the round
  before and after it. Call it once the data is drawn.

  Args:
    *axes: matplotlib Axes whose `axis` counts rounds.
    axis: 'x' or 'y'.
    label: The axis label; None leaves the label as it is.
  """
  from matplotlib import ticker  # pylint: disable=g-import-not-at-top
  for ax in axes:
    which = ax.xaxis if axis == 'x' else ax.yaxis
    which.set_major_locator(ticker.MaxNLocator(
        nbins='auto', steps=[1, 2, 5, 10], integer=True))
    low, high = ax.get_xlim() if axis == 'x' else ax.get_ylim()
    if high - low < 2:
      middle = round((low + high) / 2)
      (ax.set_xlim if axis == 'x' else ax.set_ylim)(middle - 1, middle + 1)
    if label is not None:
      which.set_label_text(label)


TRAINING_PLOT = 'metrics.png'


def plot_history(history: Sequence[Mapping[str, float]], path: str,
                 title: str) -> None:
  """A training binary's plot of its `metrics.csv` rows: the train losses
  (clients', and the central step's for mixed FL) and evaluation losses
  against round, and beside them every other evaluation metric (accuracy,
  AUC, recall, ...; one line per evaluation set)."""
  from tff_mixed import keys  # pylint: disable=g-import-not-at-top
  plt = pyplot()
  fig, (losses, scores) = plt.subplots(1, 2, figsize=(11, 4.2))

  def curve(ax, key, label, **style):
    points = [(row['round'], row[key]) for row in history if key in row]
    if points:
      ax.plot(*zip(*points), label=label, **style)

  curve(losses, keys.TRAIN_LOSS, 'train (clients)', color='C0')
  curve(losses, keys.CENTRAL_LOSS, 'train (central step)', color='C1')
  eval_prefix = keys.eval_column('')
  evaluated = list(dict.fromkeys(
      k for row in history for k in row if k.startswith(eval_prefix)
      and not k.rsplit('/', 1)[-1].startswith('num_')))
  # One colour an evaluation set in both panels (after the train curves'),
  # one line style a metric of it.
  sets = list(dict.fromkeys(k[len(eval_prefix):].rpartition('/')[0]
                            for k in evaluated))
  metric_names = list(dict.fromkeys(
      k.rsplit('/', 1)[-1] for k in evaluated
      if k.rsplit('/', 1)[-1] != 'loss'))
  styles = ('-', '-.', ':', (0, (5, 1)))
  for key in evaluated:
    name = key[len(eval_prefix):]
    data_set, _, metric = name.rpartition('/')
    color = f'C{2 + sets.index(data_set) % 8}'
    if metric == 'loss':
      curve(losses, key, f'eval {name}', linestyle='--', marker='.',
            color=color)
    else:
      curve(scores, key, name, marker='.', color=color,
            linestyle=styles[metric_names.index(metric) % len(styles)])
  losses.set_title('loss')
  losses.set_ylabel('loss (the model\'s, per example)')
  scores.set_title('evaluation metrics')
  scores.set_ylabel('metric value')
  if not scores.lines:
    scores.text(0.5, 0.5, 'no evaluation metrics\n(--eval_every=0, no eval data)',
                ha='center', va='center', transform=scores.transAxes)
  round_axis(losses, scores)
  for ax in (losses, scores):
    ax.grid(alpha=0.3)
    if ax.lines:  # Below the panel, off the data.
      ax.legend(fontsize='small', loc='upper center',
                bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
  fig.suptitle(title)
  fig.tight_layout()
  save_figure(fig, path)


def save_figure(fig, path: str, dpi: int = 110) -> None:
  """Saves and closes `fig`."""
  tmp = path + '.tmp.png'
  fig.savefig(tmp, dpi=dpi)
  pyplot().close(fig)
  os.replace(tmp, path)
