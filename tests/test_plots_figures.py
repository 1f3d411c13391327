"""The experiment binaries' figures (issue 19, item 8): one colour per run in
every panel, whole-number round ticks, signed Omega on one scale centred at
0. The grids' figures are in tests/test_grid.py.

Each figure is built from small made-up histories and checked as drawn
(`reports.save_figure` is wrapped to keep the figure). The binaries'
modules define absl flags (`--output_dir`, ...) that clash with each other
in one interpreter, so those checks run in their own (`_in_own_interpreter`).
"""

import os
import subprocess
import sys

import numpy as np
import pytest

from tasks.common import reports

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _Kept:
  """Wraps `reports.save_figure`: the figure is saved and kept."""

  def __init__(self):
    self.figures = []
    self._save = reports.save_figure

  def __call__(self, fig, path, dpi=110):
    self.figures.append(fig)
    self._save(fig, path, dpi=dpi)


@pytest.fixture
def kept(monkeypatch):
  keep = _Kept()
  monkeypatch.setattr(reports, 'save_figure', keep)
  return keep


def _in_own_interpreter(check, tmp_path):
  """Runs `check(tmp_path)`, a function of this module, in a fresh
  interpreter (its own absl flags) under tff_mixed's execution context."""
  code = ('from tff_mixed import execution\n'
          'execution.set_local_execution_context()\n'
          'try:\n'
          '  from tests import test_plots_figures as t\n'
          f'  t.{check.__name__}({str(tmp_path)!r})\n'
          'finally:\n'
          '  execution.shutdown()\n')
  result = subprocess.run(
      [sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True,
      timeout=300, env={**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'})
  assert result.returncode == 0, result.stderr[-3000:]


def _drawn(fig):
  fig.canvas.draw()
  return fig


def _assert_whole_round_ticks(*axes):
  """The visible ticks of each round (x) axis are whole numbers."""
  for ax in axes:
    low, high = sorted(ax.get_xlim())
    ticks = [t for t in ax.get_xticks() if low <= t <= high]
    assert ticks and all(float(t).is_integer() for t in ticks), ticks


def _result(rows):
  from tff_mixed import driver  # pylint: disable=g-import-not-at-top
  return driver.ExperimentResult(state=None, history=rows, final_eval={},
                                 wall_time_seconds=0.0)


def test_round_axis_helper_gives_whole_number_ticks():
  plt = reports.pyplot()
  fig, (default, rounds) = plt.subplots(1, 2)
  for ax in (default, rounds):
    ax.plot([1, 2], [0.1, 0.2])
  reports.round_axis(rounds)
  _drawn(fig)
  # What the helper prevents: matplotlib's default ticks round 1.2.
  assert not all(float(t).is_integer() for t in default.get_xticks())
  _assert_whole_round_ticks(rounds)
  assert rounds.get_xlabel() == 'round'
  plt.close(fig)


def test_one_evaluation_plots_as_a_point_on_a_round_axis(monkeypatch, tmp_path):
  """A grid's curve of one evaluation: each setting a visible point, the
  axis from the round before to the round after, whole rounds only."""
  from tasks.grid import spec as spec_lib  # pylint: disable=g-import-not-at-top
  from tasks.grid import table  # pylint: disable=g-import-not-at-top
  plt = reports.pyplot()
  fig, ax = plt.subplots()
  ax.plot([5], [0.5])
  reports.round_axis(ax)
  _drawn(fig)
  assert ax.get_xlim() == (4, 6)
  _assert_whole_round_ticks(ax)
  plt.close(fig)
  saved = []
  monkeypatch.setattr(reports, 'save_figure',
                      lambda figure, path: saved.append(figure))
  spec = spec_lib.Spec(
      name='one', binary='tests.grid_fake_binary', flags=dict(rounds=1),
      settings=spec_lib.cross(('k', {'1': {}, '2': {}})), seeds=(0,),
      summaries=())
  histories = {(s.name, 0): [{'round': 1.0, 'eval/accuracy': 0.25 * i}]
               for i, s in enumerate(spec.settings, 1)}
  table.plot(spec, histories, spec_lib.Curve('eval/accuracy'),
             str(tmp_path / 'one.png'))
  axes = saved[0].axes[0]
  assert [line.get_marker() for line in axes.lines] == ['o', 'o']
  assert [list(line.get_ydata()) for line in axes.lines] == [[0.25], [0.5]]
  assert axes.get_xlim() == (0, 2)
  plt.close(saved[0])


def test_label_skew_figure_one_colour_per_run_and_a_legend_below(
    tmp_path, kept):
  from tasks.digits import label_skew  # pylint: disable=g-import-not-at-top
  results = {}
  for i, name in enumerate(label_skew.RUNS):
    rows = []
    for r in (1, 2, 3, 4):
      row = {'round': r}
      if r % 2 == 0:
        row.update({'eval/accuracy': 0.1 * r + 0.01 * i,
                    'eval/loss': 2.0 / r + 0.1 * i})
      if name in ('PT', '1-way GT', '2-way GT'):
        row.update({'gradient_dissimilarity/G_squared': 0.5 * r + i,
                    'gradient_dissimilarity/B_squared': 1.0 + 0.2 * r + i})
      rows.append(row)
    results[name] = _result(rows)
  path = str(tmp_path / 'label_skew.png')
  label_skew.plot(label_skew.Comparison(results, {}, {}), path)
  assert os.path.getsize(path) > 10_000
  fig = _drawn(kept.figures[-1])
  axes = fig.axes
  assert len(axes) == 4
  colours = {}  # Run -> the colours of its lines in every panel.
  for ax in axes:
    for line in ax.get_lines():
      if line.get_label() in label_skew.RUNS:
        colours.setdefault(line.get_label(), set()).add(line.get_color())
  for name in label_skew.RUNS:
    assert colours[name] == {label_skew.COLORS[name]}, name
  assert len(set(label_skew.COLORS.values())) == len(label_skew.RUNS)
  # G~^2 and B~^2 panels: the three mixed runs each.
  for ax in axes[2:]:
    assert sorted(l.get_label() for l in ax.get_lines()
                  if l.get_label() in label_skew.RUNS) == [
                      '1-way GT', '2-way GT', 'PT']
  texts = [t for ax in axes for t in (ax.get_title(), ax.get_ylabel())]
  assert all(ax.get_ylabel() for ax in axes)
  assert not any('~' in t for t in texts)  # Mathtext, not ASCII G~^2.
  assert any(r'\tilde G' in t for t in texts)
  assert any(r'\tilde B' in t for t in texts)
  _assert_whole_round_ticks(*axes)
  # One figure legend, with every run once, below every panel.
  assert not any(ax.get_legend() for ax in axes)
  (legend,) = fig.legends
  assert [t.get_text() for t in legend.get_texts()] == list(label_skew.RUNS)
  top = legend.get_window_extent().y1
  assert all(top < ax.get_window_extent().y0 for ax in axes)


def test_divergence_figure_cells_on_one_scale_centred_at_zero(tmp_path, kept):
  from matplotlib import collections  # pylint: disable=g-import-not-at-top
  from matplotlib import contour  # pylint: disable=g-import-not-at-top
  from tasks.synthetic_seq import experiment  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  local_steps, rates = [1, 2, 5], [1.0, 0.1]
  results = {('concept', value, lr, e):
             np.clip(rng.normal(0.0, 1.0, 4), -2.0, 2.0) * (e > 1)
             for value in (1.0, 10.0) for lr in rates for e in local_steps}
  results['concept', 10.0, 0.1, 5][2] = -3.0  # The largest |Omega|.
  path = str(tmp_path / 'concept_drift.png')
  experiment.plot(results, 'concept', rates, local_steps, path)
  assert os.path.getsize(path) > 10_000
  fig = _drawn(kept.figures[-1])
  panels = [ax for ax in fig.axes if ax.get_label() != '<colorbar>']
  assert len(panels) == 4 and len(fig.axes) == 5  # One colour bar.
  meshes = []
  for ax in panels:
    assert not any(isinstance(c, contour.ContourSet)
                   for c in ax.collections)  # No interpolation across E.
    (mesh,) = [c for c in ax.collections
               if isinstance(c, collections.QuadMesh)]
    assert mesh.get_array().shape == (len(local_steps), 4)  # Cell per value.
    meshes.append(mesh)
  norms = {id(m.norm) for m in meshes}
  assert len(norms) == 1  # One scale for every panel.
  norm = meshes[0].norm
  assert norm.vmin == -norm.vmax == pytest.approx(-3.0)  # Centred at 0.
  assert norm(0.0) == pytest.approx(0.5)
  assert meshes[0].get_cmap().name == 'RdBu_r'  # Diverging.
  colorbar = [ax for ax in fig.axes if ax.get_label() == '<colorbar>'][0]
  assert 'Omega' in colorbar.get_ylabel()
  _assert_whole_round_ticks(*panels)


def test_figure1_round_ticks_are_whole(tmp_path, kept):
  from tasks.quadratic import figure1  # pylint: disable=g-import-not-at-top
  curves = {(0.1, 'K=1'): ('a', np.array([0.40, 0.45, 0.50])),
            (0.1, 'K_0=10, d_K=0.99'): ('b', np.array([0.41, 0.47, 0.52]))}
  figure1._plot(str(tmp_path / 'figure1.png'), curves, 0.52)  # pylint: disable=protected-access
  _assert_whole_round_ticks(*_drawn(kept.figures[-1]).axes)


def check_fedavg_regression_figure(tmp_path):
  """(Own interpreter.) One colour scale and bar for every learning rate."""
  from tasks.synthetic_regression import fedavg  # pylint: disable=g-import-not-at-top
  keep = _Kept()
  reports.save_figure = keep
  rates, steps = [0.005, 0.02], [1, 5]
  curves = {(lr, k): np.array([1.0, 0.5, 0.1]) * lr * 100 * k
            for lr in rates for k in steps}
  fedavg.plot(curves, rates, steps, os.path.join(tmp_path, 'fedavg.png'))
  fig = _drawn(keep.figures[-1])
  panels = [ax for ax in fig.axes if ax.get_label() != '<colorbar>']
  assert len(panels) == 2 and len(fig.axes) == 3
  images = [ax.get_images()[0] for ax in panels]
  assert images[0].norm is images[1].norm
  assert images[0].norm.vmax == pytest.approx(np.log10(0.02 * 100 * 5))
  _assert_whole_round_ticks(*panels)


def test_fedavg_regression_figure(tmp_path):
  _in_own_interpreter(check_fedavg_regression_figure, tmp_path)


def test_training_binaries_plot_losses_and_every_evaluation_metric(
    tmp_path, kept):
  """`reports.plot_history`, which every `tasks.<task>.train` calls: train
  and eval losses on the left, the other eval metrics (not the counts) on
  the right, per evaluation set; evaluations only where they happened."""
  history = [{'round': r, 'client_work/train/loss': 2.0 / r,
              'central/loss': 1.0 / r} for r in range(1, 5)]
  for row in history[1::2]:
    row.update({'eval/a/loss': 1.5, 'eval/a/accuracy': 0.5,
                'eval/a/num_examples': 60, 'eval/b/accuracy': 0.25})
  reports.plot_history(history, str(tmp_path / 'metrics.png'), 'a title')
  (fig,) = kept.figures
  losses, scores = fig.axes
  assert [line.get_label() for line in losses.lines] == [
      'train (clients)', 'train (central step)', 'eval a/loss']
  assert [line.get_label() for line in scores.lines] == [
      'a/accuracy', 'b/accuracy']
  np.testing.assert_array_equal(scores.lines[0].get_xdata(), [2, 4])
  np.testing.assert_array_equal(losses.lines[0].get_ydata(),
                                [2.0, 1.0, 2 / 3, 0.5])
  assert fig._suptitle.get_text() == 'a title'  # pylint: disable=protected-access
  assert losses.get_xlabel() == 'round'
