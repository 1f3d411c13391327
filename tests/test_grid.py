"""The grid runner (`python -m tasks.grid`): specs, summaries with
confidence intervals, parallel runs that skip, resume and survive a failure,
the cluster commands, and every shipped spec end to end on a reduced grid.

Most tests run `tests/grid_fake_binary.py`, a stand-in binary without TFF
whose metrics are known exactly; `test_seed000_table1_runs_end_to_end` runs
the real digits binary.
"""

import dataclasses
import io
import json
import math
import os
import re
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from tasks.common import run_spec
from tasks.common import saved_run
from tasks.grid import run_specs
from tasks.grid import runner
from tasks.grid import specs
from tasks.grid import spec as spec_lib
from tasks.grid import summaries
from tasks.grid import table
from tasks.grid.specs import seed000_search
from tasks.grid.specs import seed000_table1
from tasks.grid.specs import seed001_table4
from tasks.grid.specs import seed003_search
from tasks.grid.specs import seed003_table4
from tasks.grid.specs import seed004_label_skew
from tasks.grid.specs import seed004_search
from tasks.grid.specs import seed004_tasks
from tests import binaries
from tff_mixed import keys
from tff_mixed.driver import lock

ACCURACY = keys.eval_column('accuracy')
T_975_2 = 4.302652729911275  # Student t, 97.5% quantile, 2 degrees of freedom.


def _fake_spec(fail_high_b=False, rounds=4):
  return spec_lib.Spec(
      name='fake', binary='tests.grid_fake_binary', flags=dict(rounds=rounds),
      settings=spec_lib.cross(
          ('acc', {'low': dict(accuracy=0.5), 'high': dict(accuracy=0.7)}),
          ('x', {'a': {}, 'b': {}}),
          cell=lambda l: (dict(fail=True) if fail_high_b and l == {
              'acc': 'high', 'x': 'b'} else {})),
      seeds=(0, 1, 2),
      summaries=(summaries.Final(ACCURACY, label='final'),
                 summaries.Ratio(summaries.Final(keys.SGD_STEPS_CUMULATIVE),
                                 {'x': 'a'}, label='steps vs a')),
      curves=((ACCURACY, 1),))


def _write_specs(request_path):
  """`run_specs.with_specs`'s `write`, forked from the tests' zygote."""
  return binaries.run('tasks.grid.write_specs', request_path)


def _run_grid(spec, output_dir, parallel=2, **kwargs):
  """Runs `spec`'s grid as `python -m tasks.grid` does: its runs' specs
  written (a real binary's; the fake binary takes flags), then run."""
  out = io.StringIO()
  runs = run_specs.with_specs(spec.runs(output_dir), output_dir,
                              unfinished_only=True, write=_write_specs)
  failed = runner.run_all(runs, output_dir, parallel=parallel, out=out,
                          **kwargs)
  return failed, out.getvalue()


class _Ended:
  """What `_forked` returns: a run's process, already ended."""

  def __init__(self, returncode):
    self.returncode = returncode

  def poll(self):
    return self.returncode

  def send_signal(self, signum):
    del signum


def _forked(run, log_file):
  """`runner.run_all`'s `start` for the real binaries: runs `run` to its
  end in a child of the tests' zygote (tests/binaries.py), not a new
  Python that imports TensorFlow again (~4 s a run); the runner's own
  start, `_LAUNCH`, signals and parallel runs are tested on the fake
  binary below."""
  python, dash_m, module, *args = run.argv()
  assert (python, dash_m) == (sys.executable, '-m')
  result = binaries.run(module, *args)
  log_file.write(result.stdout + result.stderr)
  log_file.flush()
  return _Ended(result.returncode)


# ------------------------------------------------------------------ the spec
def test_cross_orders_settings_and_applies_cells():
  settings = spec_lib.cross(('K', {'1': dict(k=1), '10': dict(k=10)}),
                            ('s', {'c': {}, 'd': dict(d=0.5)}),
                            cell=lambda l: None if l == {'K': '1', 's': 'd'}
                            else dict(cell=l['K']))
  assert [s.name for s in settings] == ['K=1, s=c', 'K=10, s=c', 'K=10, s=d']
  assert [dict(s.flags) for s in settings] == [
      dict(k=1, cell='1'), dict(k=10, cell='10'),
      dict(k=10, d=0.5, cell='10')]
  assert settings[2].dir_name == 'k_10_s_d'


def test_runs_are_ordinary_run_directories_with_the_flags():
  run = _fake_spec().runs('/g')[7]  # Setting by setting: high, a, seed 1.
  assert run.output_dir == '/g/runs/acc_high_x_a/seed_1'
  assert run.command('python') == (
      'python -m tests.grid_fake_binary --progress=false --rounds=4 '
      '--accuracy=0.7 --seed=1 --output_dir=/g/runs/acc_high_x_a/seed_1')


@pytest.mark.parametrize('change, message', [
    (dict(seeds=()), "grid 'fake' has no seeds."),
    (dict(seeds=(1, 1)), "grid 'fake' repeats a seed: (1, 1)."),
    (dict(flags={}), "grid 'fake', acc=low, x=a: give --rounds in the flags"),
    (dict(flags=dict(rounds=2, seed=3)), "grid 'fake', acc=low, x=a: --seed "
     "is the grid's to set"),
    (dict(settings=spec_lib.cross(('a', {'x y': {}, 'x_y': {}}))),
     "grid 'fake': two settings share the run directory 'a_x_y'"),
])
def test_a_bad_spec_is_one_line(change, message):
  fields = dict(name='fake', binary='b', flags=dict(rounds=2),
                settings=spec_lib.cross(('acc', {'low': {}}), ('x', {'a': {}})),
                seeds=(0,), summaries=())
  with pytest.raises(ValueError) as e:
    spec_lib.Spec(**{**fields, **change})
  assert str(e.value).startswith(message)


@pytest.mark.parametrize('change, message', [
    (dict(flags=dict(rounds='six')), "grid 'fake', acc=low, x=a: "
     "--rounds='six' is not a number of rounds (give an integer >= 1)."),
    (dict(flags=dict(rounds=0)), "grid 'fake', acc=low, x=a: --rounds=0 is "
     'not a number of rounds (give an integer >= 1).'),
    (dict(flags=dict(rounds=None)), "grid 'fake', acc=low, x=a: "
     '--rounds=None is not a number of rounds (give an integer >= 1).'),
    (dict(flags=dict(rounds=2.5)), "grid 'fake', acc=low, x=a: "
     '--rounds=2.5 is not a number of rounds (give an integer >= 1).'),
    (dict(summaries=('eval/accuracy',)), "grid 'fake': summaries[0] = "
     "'eval/accuracy' is not a summary (see tasks.grid.summaries)."),
    (dict(curves=('eval/accuracy',)), "grid 'fake': curves[0] = "
     "'eval/accuracy' is not a Curve or a (metrics.csv column, smoothing "
     'window >= 1) pair.'),
    (dict(curves=(('eval/accuracy', 1), spec_lib.Curve('eval/accuracy'))),
     "grid 'fake': two curves draw the same plot (eval_accuracy.png); drop "
     'one.'),
])
def test_rounds_summaries_and_curves_are_checked_when_a_spec_is_made(
    change, message):
  """What a run or the table would otherwise trip on after runs were
  written; rounds as the command line gives them ('6') are a count."""
  fields = dict(name='fake', binary='b', flags=dict(rounds=2),
                settings=spec_lib.cross(('acc', {'low': {}}), ('x', {'a': {}})),
                seeds=(0,), summaries=())
  with pytest.raises(ValueError) as e:
    spec_lib.Spec(**{**fields, **change})
  assert str(e.value) == message
  spec = spec_lib.Spec(**fields).with_flags({'rounds': '6'})
  assert spec.runs('/g')[0].rounds == 6
  with pytest.raises(ValueError, match="--rounds='six' is not a number"):
    spec.with_flags({'rounds': 'six'})


# ---------------------------------------------------------------- summaries
def test_confidence_interval_is_student_t():
  mean, half, n = summaries.confidence_interval([1.0, 2.0, 3.0, math.nan])
  assert (mean, n) == (2.0, 3)
  assert half == pytest.approx(T_975_2 * 1.0 / math.sqrt(3), rel=1e-12)
  assert summaries.confidence_interval([4.0])[:2] == (4.0, pytest.approx(
      math.nan, nan_ok=True))
  assert summaries.confidence_interval([])[2] == 0


HISTORY = [
    {'round': 1, keys.TRAIN_LOSS: 4.0, keys.SGD_STEPS_CUMULATIVE: 10,
     keys.ROUND_PARTICIPATING: 2, keys.ROUND_BYTES_UPLOADED: 100},
    {'round': 2, keys.TRAIN_LOSS: 2.0, keys.SGD_STEPS_CUMULATIVE: 30,
     ACCURACY: 0.4, keys.ROUND_PARTICIPATING: 3,
     keys.ROUND_BYTES_UPLOADED: 100},
    {'round': 3, keys.TRAIN_LOSS: 3.0, keys.SGD_STEPS_CUMULATIVE: 60,
     keys.ROUND_PARTICIPATING: 1, keys.ROUND_BYTES_UPLOADED: 100},
    {'round': 4, keys.TRAIN_LOSS: 1.0, keys.SGD_STEPS_CUMULATIVE: 70,
     ACCURACY: 0.8, keys.ROUND_PARTICIPATING: 2,
     keys.ROUND_BYTES_UPLOADED: 100},
]


def test_summaries_of_one_history():
  assert summaries.Final(ACCURACY)(HISTORY) == 0.8
  assert summaries.Final(ACCURACY, last=2)(HISTORY) == pytest.approx(0.6)
  assert summaries.Final(keys.SGD_STEPS_CUMULATIVE, last=0)(HISTORY) == 42.5
  assert summaries.Best(ACCURACY)(HISTORY) == 0.8
  # Rolling means over 2 rows: 3.0, 2.5, 2.0.
  assert summaries.Best(keys.TRAIN_LOSS, 'min', window=2)(HISTORY) == 2.0
  assert math.isnan(summaries.Best(keys.TRAIN_LOSS, 'min', window=5)(HISTORY))
  assert summaries.ToTarget(ACCURACY, 0.5)(HISTORY) == 4
  assert summaries.ToTarget(ACCURACY, 0.4, cost='sgd_steps')(HISTORY) == 30
  assert summaries.ToTarget(keys.TRAIN_LOSS, 2.0, mode='min')(HISTORY) == 2
  assert math.isnan(summaries.ToTarget(ACCURACY, 0.9)(HISTORY))
  assert summaries.Total(keys.ROUND_BYTES_UPLOADED)(HISTORY) == 400
  assert summaries.Total(keys.ROUND_BYTES_UPLOADED,
                         per_client=True)(HISTORY) == 800
  with pytest.raises(ValueError, match='cost must be one of'):
    summaries.ToTarget(ACCURACY, 0.5, cost='minutes')


def test_seed003_forms_average_clients_uniformly_over_5_trials():
  """Seed 003 §1: "The server averages all uploaded client models", FedAvg
  included; Figs. 1-2: "average over 5 random trials"; Table 4's FLOPs in
  units of 10^8."""
  for name, form in seed003_table4.FORMS.items():
    for run in form.runs('/g'):
      assert run.flags['client_weighting'] == 'uniform', (name, run.name)
    if name != 'cpu_small':
      assert tuple(form.seeds) == (0, 1, 2, 3, 4), name
    flops = form.summaries[0]
    assert flops.name == 'client FLOPs per round (x 10^8, mean)'
    assert flops([{'round': 1, keys.ROUND_CLIENT_FLOPS: 4.98e9},
                  {'round': 2, keys.ROUND_CLIENT_FLOPS: 4.98e9}]) == (
                      pytest.approx(49.8))


def test_of_mean_curve_reads_the_best_of_the_averaged_curve():
  """Two seeds peak at different rounds: each seed's best is 0.9, so their
  mean is 0.9, while the mean curve (0.5, 0.65, 0.5) peaks at 0.65."""
  seed_a = [{'round': 1, ACCURACY: 0.9}, {'round': 2, ACCURACY: 0.4},
            {'round': 3, ACCURACY: 0.1}]
  seed_b = [{'round': 1, ACCURACY: 0.1}, {'round': 2, ACCURACY: 0.9},
            {'round': 3, ACCURACY: 0.9}]
  best = summaries.Best(ACCURACY)
  assert np.mean([best(seed_a), best(seed_b)]) == 0.9
  assert summaries.OfMeanCurve(best)([seed_a, seed_b]) == pytest.approx(0.65)
  # Smoothing commutes with the mean: rolling means over 2 rounds of the
  # mean curve (0.5, 0.65, 0.5) are 0.575 and 0.575.
  assert summaries.OfMeanCurve(summaries.Best(ACCURACY, window=2))(
      [seed_a, seed_b]) == pytest.approx(0.575)
  # Only the rounds every seed has are averaged.
  assert summaries.mean_history([seed_a, seed_b[:2]], [ACCURACY]) == [
      {'round': 1, ACCURACY: 0.5}, {'round': 2, ACCURACY: 0.65}]


# ------------------------------------------------------------ shipped specs
# Before the runner's tests: `make test`'s worksteal splits the suite in two
# halves and this module ends the first, so its longest tests (the real
# binaries end to end) at the module's end left one worker idle ~50 s.
SPECS = {'seed000_search': seed000_search, 'seed000_table1': seed000_table1,
         'seed001_table4': seed001_table4, 'seed003_search': seed003_search,
         'seed003_table4': seed003_table4,
         'seed004_label_skew': seed004_label_skew,
         'seed004_search': seed004_search, 'seed004_tasks': seed004_tasks}


def test_every_spec_module_is_tested_here():
  assert specs.names() == sorted(SPECS)


_NUMBER_WORDS = {'two': 2, 'three': 3, 'four': 4, 'five': 5, 'ten': 10}


@pytest.mark.parametrize('name', sorted(SPECS))
def test_a_spec_s_docstring_counts_are_its_forms(name):
  """Every count of runs, seeds or algorithms a spec's docstring gives (not
  in a quotation of the paper) is one of its forms' (a docstring said 2
  seeds where every form ran 5)."""
  module = SPECS[name]
  ours = re.sub(r'"[^"]*"', '', module.__doc__)  # The paper's words aside.
  forms = list(module.FORMS.values())
  counts = {
      'runs': {len(f.runs('/unused')) for f in forms},
      'seeds': {len(f.seeds) for f in forms},
      'algorithms': {len({dict(s.labels).get('algorithm')
                          for s in f.settings}) for f in forms}}
  for what, known in counts.items():
    said = re.findall(rf'\b(\d[\d,]*|{"|".join(_NUMBER_WORDS)}) {what}\b',
                      ours)
    for text in said:
      number = _NUMBER_WORDS.get(text) or int(text.replace(',', ''))
      assert number in known, (name, f'{text} {what}', sorted(known))


@pytest.mark.parametrize('name, form', [
    (name, form) for name, module in sorted(SPECS.items())
    for form in sorted(module.FORMS)])
def test_every_run_of_every_form_reads_as_a_spec(tmp_path, name, form):
  """Each run's flags are read by its binary (its preset, defaults and
  checks) into the spec the grid gives it. A search's thousands of
  settings are products of their axes: the settings that together give
  every value of every axis are read."""
  runs = _covering(SPECS[name].FORMS[form].runs(str(tmp_path)))
  for run in run_specs.with_specs(runs, str(tmp_path), write=_write_specs):
    spec = run_spec.RunSpec.from_json(open(run.spec_file).read())
    assert (spec.run.seed, spec.execution.rounds) == (run.seed, run.rounds)


def _covering(runs):
  """The runs in order, each kept if it brings an (axis, value) or seed no
  kept run had."""
  seen, kept = set(), []
  for run in runs:
    new = {*run.setting.labels, ('seed', run.seed)} - seen
    if new:
      seen |= new
      kept.append(run)
  return kept


def test_the_searches_are_the_papers_grids():
  """Seed 000 App. B Table 4, seed 003 App. B.5 and seed 004 C.4.2-C.4.3,
  counted: 4 K x (6 eta_0 x 4 d_eta x 6 gamma x (1 + 4 + 4 decays)); 7
  FedAvg rates + 9 cells x 7 x 6 + 3 AdaptiveFedOpt cells x 7 x 6 x 4."""
  assert len(seed000_search.FORMS['femnist'].settings) == 4 * 6 * 4 * 6 * 9
  assert len(seed000_search.FORMS['stackoverflow'].settings) == 4 * 6 * 6 * 9
  assert len(seed003_search.FORMS['sent140_k50'].settings) == (
      7 + 9 * 42 + 3 * 168)
  values = lambda form, axis: sorted({s.label(axis) for s in form.settings})
  femnist = seed000_search.FORMS['femnist']
  assert values(femnist, 'eta0') == ['0.01', '0.03', '0.1', '0.3', '1', '3']
  assert values(femnist, 'K') == ['10', '100', '3', '33']
  cell = next(s for s in femnist.settings if s.name == (
      'K=33, scheme=decaying K, eta0=1, d_eta=0.9996, gamma0=0.3, d=0.999'))
  # seed000_table1's FEMNIST K = 33 cell, the search's pick (Table 5).
  assert cell.flags == {
      'num_local_steps': 33, **seed000_table1.cell_flags(
          seed000_table1.TABLE5['femnist'][33], 'decaying K')}
  shakespeare = seed003_search.FORMS['shakespeare']
  assert values(shakespeare, 'eta_l') == ['-', '0.001', '0.01', '0.1', '1']
  cell = next(s for s in shakespeare.settings if s.name == (
      'algorithm=FedGBO, optimizer=SGDm, eta=1, beta=0.9, eta_l=-'))
  assert cell.flags == seed003_table4.cell_flags(
      'FedGBO', 'SGDm', seed003_table4.TABLE8['shakespeare'][10]['FedGBO'][
          'SGDm'])
  traded = {s.name: (s.flags['num_local_steps'], s.flags['client_learning_rate'])
            for s in seed004_search.FORMS['stackoverflow_wiki'].settings}
  assert traded['algorithm=2-way GT, f=4'] == (64, 0.25)
  assert traded['algorithm=PT, f=2'] == (32, 1.0)
  assert {s.name: s.flags['client_learning_rate'] for s in seed004_search.FORMS[
      'stackoverflow_wiki_fig10'].settings} == {
          'algorithm=PT': 3.0, 'algorithm=1-way GT': 3.0,
          'algorithm=2-way GT': 1.0}


# A smaller model where the task's own dominates the run (CelebA's MLP on
# 84x84x3 images: 28 s a run at its 256 hidden units, here).
SMALLER = {'seed004_tasks': {'hidden_units': 8},
           'seed004_search': {'hidden_units': 8}}


@pytest.mark.parametrize('name, values', [
    # Its table's steps are relative to K-fixed, which it needs; lr-step
    # (the client rate halved on the validation loss's plateau, as K-step
    # halves K: tests/test_validation_split.py runs that).
    ('seed001_table4', {'schedule': ['K-fixed', 'lr-step']}),
    ('seed003_table4', None),
    ('seed004_label_skew', {'run': ['PT']}),
    # The oracle: the only setting of it no other test runs from a spec.
    ('seed004_tasks', {'algorithm': ['oracle']}),
    ('seed000_search', {'scheme': ['decaying K'], 'd': ['0.999']}),
    ('seed003_search', {'algorithm': ['AdaptiveFedOpt'],
                        'optimizer': ['SGDm'], 'beta': ['0.9'],
                        'eta_l': ['0.1']}),
    # 2-way GT (run from a spec only here) at twice K_0 and half eta_0.
    ('seed004_search', {'algorithm': ['2-way GT'], 'f': ['2']}),
])
def test_a_spec_runs_end_to_end(tmp_path, name, values):
  """The cpu_small form reduced to one setting (two for seed 001) x its
  first seed, 4 rounds, with the real binary: every run finishes and the
  table's row has every cell (but targets, and rolling means longer than 4
  rounds). Intervals over seeds and tables of many settings are tested on
  the fake binary above and in test_seed000_table1_runs_end_to_end."""
  spec = SPECS[name].FORMS['cpu_small'].reduced(
      values_per_axis=1, num_seeds=1, rounds=4, values=values)
  spec = dataclasses.replace(spec, flags={**spec.flags, 'eval_every': 2,
                                          **SMALLER.get(name, {})})
  failed, out = _run_grid(spec, str(tmp_path), start=_forked)
  assert not failed, out
  rows = table.summarise(spec, str(tmp_path), out=io.StringIO())
  assert len(rows) == len(spec.settings) == (2 if name == 'seed001_table4'
                                             else 1)
  for row in rows:
    assert all(row[f'{s.name} n'] == len(spec.seeds) for s in spec.summaries
               if not isinstance(s, summaries.ToTarget)
               and getattr(s, 'window', 1) <= 4), row


def test_seed000_table1_runs_end_to_end(tmp_path):
  """The cpu_small form on K = 10 x 2 schemes x 2 seeds, 6 rounds, with the
  real digits binary: every run finishes and the table's fraction of SGD
  steps is the runs' own ratio; on TFF's runtime seed 0's table is the
  same."""
  spec = seed000_table1.FORMS['cpu_small'].reduced(
      rounds=6, values={'scheme': ['constant', 'decaying K'], 'K': ['10']})
  assert [s.name for s in spec.settings] == [
      'K=10, scheme=constant', 'K=10, scheme=decaying K']
  failed, out = _run_grid(spec, str(tmp_path), start=_forked)
  assert not failed, out
  rows = table.summarise(spec, str(tmp_path), out=io.StringIO())
  histories, missing = table.read_runs(spec, str(tmp_path))
  assert not missing
  for row, setting in zip(rows, spec.settings):
    assert row['fraction of SGD steps n'] == 2
    ratios = [histories[setting.name, s][-1][keys.SGD_STEPS_CUMULATIVE]
              / histories[f'K={row["K"]}, scheme=constant', s][-1][
                  keys.SGD_STEPS_CUMULATIVE] for s in spec.seeds]
    assert row['fraction of SGD steps'] == pytest.approx(np.mean(ratios))
    # The paper's reading: the best of the seeds' mean curve.
    curves = [{r['round']: r[ACCURACY] for r in histories[setting.name, s]
               if ACCURACY in r} for s in spec.seeds]
    assert row['max test accuracy of the mean curve'] == pytest.approx(
        max((curves[0][r] + curves[1][r]) / 2 for r in curves[0]), abs=1e-12)
    assert row['max test accuracy of the mean curve n'] == 2
    # Beside it, the global model's training loss on every training client.
    losses = [{r['round']: r['train_eval/loss']
               for r in histories[setting.name, s] if 'train_eval/loss' in r}
              for s in spec.seeds]
    assert sorted(losses[0]) == [5.0, 6.0]  # Every evaluation, and the last.
    assert row['min global-model train loss of the mean curve'] == (
        pytest.approx(min((losses[0][r] + losses[1][r]) / 2
                          for r in losses[0]), abs=1e-12))
  assert (tmp_path / 'summary' / 'eval_accuracy.png').exists()
  assert (tmp_path / 'summary' / 'train_eval_loss.png').exists()
  # Each binary was given its run's spec, the grid's flags as the digits
  # binary reads them (seed and rounds included): it trained and recorded
  # that spec.
  for run in spec.runs(str(tmp_path)):
    spec_file = (tmp_path / 'specs' / run.setting.dir_name
                 / f'seed_{run.seed}.json')
    given = run_spec.RunSpec.from_json(spec_file.read_text())
    assert (given.task, given.run.seed, given.execution.rounds) == (
        'digits', run.seed, 6)
    assert run_spec.difference(saved_run.read_spec(run.output_dir),
                               given) is None
  # Seed 0's runs on TFF's runtime give the same table, digit for digit, as
  # they do in process (issue 38: the in-process runtime, the default,
  # trains what TFF's does); one seed keeps the test's runs few.
  seed_0 = dataclasses.replace(spec, seeds=(0,))
  on_tff = seed_0.with_flags({'runtime': 'tff'})
  failed, out = _run_grid(on_tff, str(tmp_path / 'tff'), start=_forked)
  assert not failed, out
  name = f'{spec.name}.md'
  for grid, grid_spec in ((tmp_path / 'tff', on_tff), (tmp_path, seed_0)):
    table.summarise(grid_spec, str(grid), out=io.StringIO())
  assert ((tmp_path / 'tff' / 'summary' / name).read_text()
          == (tmp_path / 'summary' / name).read_text())


def _bad_digits_spec():
  """A digits grid whose second setting has a flag the binary refuses."""
  return spec_lib.Spec(
      name='bad', binary='tasks.digits.train', flags=dict(rounds=2),
      settings=spec_lib.cross(('K', {'1': dict(num_local_steps=1),
                                     '0': dict(num_local_steps=0)})),
      seeds=(0,), summaries=(summaries.Final(ACCURACY),))


def test_a_repository_binary_s_runs_are_read_in_the_runner_s_process(
    tmp_path):
  """A grid of a repository task's binary writes its runs' specs without
  starting a process: each is the run `task_registry.spec` gives for the
  run's flags, the grid's seed and output directory among them; the
  runner's own flags are untouched."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  from tasks.common import task_registry  # pylint: disable=g-import-not-at-top

  def no_process(request_path):
    raise AssertionError(f'a process was started for {request_path}')

  grid = spec_lib.Spec(
      name='labels', binary='tasks.digits.train',
      flags=dict(rounds=2, client_labels='0,1,2,3,4', num_clients=20),
      settings=spec_lib.cross(('alg', {'pt': dict(
          algorithm='parallel_training'), 'avg': dict(algorithm='fedavg')})),
      seeds=(0, 3), summaries=(summaries.Final(ACCURACY),))
  before = flags.FLAGS.flags_into_string()
  runs = run_specs.with_specs(grid.runs(str(tmp_path)), str(tmp_path),
                              write=no_process)
  assert flags.FLAGS.flags_into_string() == before
  assert len(runs) == 4
  for run in runs:
    written = run_spec.RunSpec.from_json(open(run.spec_file).read())
    expected = task_registry.spec(
        'digits', **{**run.flags, 'client_labels': [0, 1, 2, 3, 4]},
        seed=run.seed, output_dir=run.output_dir)
    assert written == expected, run_spec.difference(written, expected)
    assert (written.algorithm.algorithm, written.run.seed) == (
        run.setting.flags['algorithm'], run.seed)
    assert written.task_args['client_labels'] == ['0', '1', '2', '3', '4']


def test_a_flag_wrong_in_one_run_is_one_line_before_any_run(tmp_path):
  """The runs' flags are read into specs by the binary's own reading, all
  before any run starts: the list of commands runs specs, and one run's
  wrong flag is one line naming the run and the flag, with no spec, run
  or log written."""
  good = _bad_digits_spec().reduced(values_per_axis=1)
  runs = run_specs.with_specs(good.runs(str(tmp_path)), str(tmp_path),
                              write=_write_specs)
  assert runs[0].command('python') == (
      f'python -m tasks.digits.train --spec_json={tmp_path}/specs/k_1/'
      f'seed_0.json --output_dir={tmp_path}/runs/k_1/seed_0')
  bad_dir = tmp_path / 'bad'
  with pytest.raises(run_specs.SpecError) as e:
    run_specs.with_specs(_bad_digits_spec().runs(str(bad_dir)),
                         str(bad_dir), write=_write_specs)
  assert str(e.value) == ('run K=0, seed 0: flag --num_local_steps=0: must '
                          'be an integer in [1, 1073741824].')
  assert not bad_dir.exists()  # Nothing written.
  spec_file = tmp_path / 'spec.py'
  spec_file.write_text('from tests import test_grid\nFORMS = {"cpu_small": '
                       'test_grid._bad_digits_spec()}\n')
  grid = binaries.run('tasks.grid', f'--spec={spec_file}',
                      f'--output_dir={bad_dir}')
  assert (grid.returncode, grid.stderr.strip().splitlines()[-1]) == (
      1, f'--spec={spec_file} --form=cpu_small: run K=0, seed 0: flag '
      '--num_local_steps=0: must be an integer in [1, 1073741824].')
  assert not bad_dir.exists()  # No specs/, no lock, no directory.
  typo = dataclasses.replace(_bad_digits_spec(), binary='tasks.digitz.train')
  with pytest.raises(run_specs.SpecError) as e:
    run_specs.with_specs(typo.runs(str(bad_dir)), str(bad_dir),
                         write=_write_specs)
  assert str(e.value) == ("binary tasks.digitz.train: No module named "
                          "'tasks.digitz'")
  assert not (bad_dir / 'specs').exists()


# ------------------------------------------------------------------- runner
def test_a_grid_runs_skips_what_is_done_and_reports_failures(tmp_path):
  spec = _fake_spec(fail_high_b=True)
  failed, out = _run_grid(spec, str(tmp_path))
  assert [r.name for r in failed] == [f'acc=high, x=b, seed {s}'
                                      for s in (0, 1, 2)]
  log = tmp_path / 'logs' / 'acc_high_x_b.seed_0.log'
  assert (f'FAILED   acc=high, x=b, seed 0 (exit 3; '
          f'{tmp_path}/runs/acc_high_x_b/seed_0; log {log}): Error: this '
          'setting cannot run.') in out
  assert out.count('finished acc=') == 9
  # Each finished run but the last says about how long the rest takes.
  assert len(re.findall(r'finished acc=.* in \d+s; about \d+ (s|min) left '
                        r'\(\d+ runs\)$', out, re.M)) >= 7
  assert out.splitlines()[-2].startswith('[####################] 12/12 ')
  assert out.splitlines()[-1] == 'grid: 9 of 12 runs finished, 3 failed.'
  failed, out = _run_grid(spec, str(tmp_path))
  assert out.splitlines()[0] == (
      f'grid: 12 runs, 9 already finished, 3 to run, 2 at once (how long the '
      f'rest takes is said as runs finish); logs in {tmp_path}/logs')
  assert out.count('started') == 3 and len(failed) == 3


def test_the_time_left_is_the_mean_run_over_what_is_left():
  # 15 s a run; 3 queued and 1 half done, two at a time: 26 s.
  assert runner._left([10, 20], [1, 2, 3], [4], 2) == (  # pylint: disable=protected-access
      'about 26 s left (4 runs)')
  assert runner._left([600], [1] * 16, [], 2) == (  # pylint: disable=protected-access
      'about 80 min left (16 runs)')
  assert runner._left([3600], [1] * 10, [2, 3], 2) == (  # pylint: disable=protected-access
      'about 5.5 h left (12 runs)')
  assert runner._left([600], [], [1], 2) == (  # pylint: disable=protected-access
      'about 2 min left (1 run)')


def test_an_interrupted_run_resumes(tmp_path):
  spec = _fake_spec()
  run = spec.runs(str(tmp_path))[0]
  os.makedirs(run.output_dir)
  with open(os.path.join(run.output_dir, 'metrics.csv'), 'w') as f:
    f.write('round,eval/accuracy,sgd_steps_cumulative\n1,0.1,10\n2,0.1,20\n')
  failed, out = _run_grid(spec, str(tmp_path))
  assert not failed
  assert ('  started  acc=low, x=a, seed 0 (stopped at round 2; resumes from '
          'its last checkpoint)') in out
  assert runner.rounds_done(run) == 4
  with open(runner.log_path(str(tmp_path), run)) as f:
    assert f.read() == 'rounds 3-4 done\n'


def test_the_failed_line_quotes_the_error_not_absls_hint(tmp_path):
  spec = dataclasses.replace(_fake_spec(), seeds=(0,)).with_flags(
      {'fail': 'usage'})
  failed, out = _run_grid(spec, str(tmp_path))
  assert len(failed) == 4
  assert out.count('): FATAL Flags parsing error: flag --rounds=x: not an '
                   'int\n') == 4


def test_a_run_another_process_holds_is_running_elsewhere(tmp_path):
  """Not failed: left to its holder, said so, and done on a later call."""
  spec = _fake_spec()
  held = spec.runs(str(tmp_path))[0]
  release = lock.lock_output_dir(held.output_dir)
  try:
    failed, out = _run_grid(spec, str(tmp_path))
  finally:
    release()
  assert not failed
  assert (f'  running elsewhere  acc=low, x=a, seed 0 (pid {os.getpid()} on '
          f'{socket.gethostname()}; left to it)') in out
  assert out.splitlines()[-1] == (
      'grid: 11 of 12 runs finished, 1 running elsewhere (run the same '
      'command again once they end).')
  failed, out = _run_grid(spec, str(tmp_path))
  assert not failed and out.splitlines()[-1] == (
      'grid: 12 of 12 runs finished.')


def _spec_file(tmp_path):
  spec_file = tmp_path / 'spec.py'
  spec_file.write_text(
      'from tests import test_grid\nFORMS = {"cpu_small": '
      'test_grid._fake_spec()}\n')
  return spec_file


def test_one_runner_per_grid_directory(tmp_path, capsys):
  grid = tmp_path / 'grid'
  release = runner.lock_grid(str(grid))
  try:
    started = json.loads((grid / '.lock').read_text())['started']
    second = binaries.run('tasks.grid', f'--spec={_spec_file(tmp_path)}',
                          f'--output_dir={grid}')
  finally:
    release()
  assert second.returncode == 1, second.stderr
  assert second.stderr.strip().splitlines()[-1] == (
      f'Error: grid {grid} is being run by pid {os.getpid()} on '
      f'{socket.gethostname()} (since {started}); one runner per grid '
      'directory: wait for it, or stop it and run this again.')
  assert not (grid / 'runs').exists()
  # A runner that died holding it: its lock is taken over, the grid named.
  dead = subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'],
                        capture_output=True, text=True, check=True)
  (grid / '.lock').write_text(json.dumps(
      {'pid': int(dead.stdout), 'host': socket.gethostname(), 'started': '-'}))
  capsys.readouterr()
  runner.lock_grid(str(grid))()
  assert capsys.readouterr().err == (
      f'Warning: grid {grid}: taking over the lock of pid {dead.stdout.strip()},'
      ' which has ended.\n')


def _binaries_of(grid) -> set[int]:
  """The pids of fake binaries running in `grid`."""
  pids = set()
  for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
      with open(f'/proc/{pid}/cmdline', 'rb') as f:
        argv = f.read().split(b'\0')
    except OSError:
      continue
    if any(b'grid_fake_binary' in a for a in argv) and any(
        str(grid).encode() in a for a in argv):
      pids.add(int(pid))
  return pids


def test_the_binaries_end_with_a_killed_runner(tmp_path):
  """`kill -9` of the runner ends its binaries (SIGTERM from the kernel);
  the same command then finishes the grid, nothing failed."""
  grid = tmp_path / 'grid'
  command = [sys.executable, '-m', 'tasks.grid',
             f'--spec={_spec_file(tmp_path)}', f'--output_dir={grid}',
             '--parallel=2']
  grid_runner = subprocess.Popen(command + ['--run_flag=sleep=3600'],
                                 cwd=binaries.ROOT, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
  try:
    while len(_binaries_of(grid)) < 2:
      assert grid_runner.poll() is None
      time.sleep(0.2)
  finally:
    grid_runner.kill()
    grid_runner.wait()
  started = time.monotonic()
  while _binaries_of(grid):  # SIGTERM ends a sleeping binary at once.
    assert time.monotonic() - started < 120, _binaries_of(grid)
    time.sleep(0.2)
  again = subprocess.run(command, cwd=binaries.ROOT, capture_output=True,
                         text=True, check=False)
  assert again.returncode == 0, again.stderr
  assert 'FAILED' not in again.stdout
  assert 'grid: 12 of 12 runs finished.\n' in again.stdout


def test_the_table_is_mean_and_confidence_interval_over_seeds(tmp_path):
  spec = _fake_spec(fail_high_b=True)
  _run_grid(spec, str(tmp_path))
  out = io.StringIO()
  rows = table.summarise(spec, str(tmp_path), out=out)
  # final = accuracy + 0.01 seed + 0.004: mean + 0.014, sd 0.01 over seeds.
  low_a = rows[0]
  assert low_a['final'] == pytest.approx(0.514, abs=1e-9)
  assert low_a['final ±95%'] == pytest.approx(T_975_2 * 0.01 / math.sqrt(3),
                                              rel=1e-4)
  assert (low_a['final n'], low_a['steps vs a']) == (3, 1.0)
  assert rows[3]['final n'] == 0 and math.isnan(rows[3]['final'])
  with open(tmp_path / 'summary' / 'fake.md') as f:
    text = f.read()
  assert text.splitlines()[:6] == [
      '| acc | x | final | steps vs a |',
      '|---|---|---|---|',
      '| low | a | 0.514 ± 0.02484 | 1 ± 0 |',
      '| low | b | 0.514 ± 0.02484 | 1 ± 0 |',
      '| high | a | 0.714 ± 0.02484 | 1 ± 0 |',
      '| high | b | n/a (0/3 seeds) | n/a (0/3 seeds) |']
  assert '3 of 12 runs not finished: acc=high, x=b, seed 0;' in text
  assert (tmp_path / 'summary' / 'fake.csv').exists()
  assert (tmp_path / 'summary' / 'eval_accuracy.png').stat().st_size > 0


def _column_fault_grid(tmp_path, what):
  """A spec file whose summary or curve (`what`) reads a column the fake
  binary does not write, and a grid holding one finished run of it (and
  one unfinished, without even eval/accuracy)."""
  spec_file = tmp_path / 'spec.py'
  change = ('summaries=(summaries.Final("eval/acuracy", label="final"),)'
            if what == 'summary' else 'curves=(("eval/los", 1),)')
  spec_file.write_text(
      'import dataclasses\nfrom tasks.grid import summaries\n'
      'from tests import test_grid\nFORMS = {"cpu_small": '
      f'dataclasses.replace(test_grid._fake_spec(), {change})}}\n')
  grid = tmp_path / 'grid'
  unfinished = grid / 'runs' / 'acc_low_x_a' / 'seed_0'
  unfinished.mkdir(parents=True)
  (unfinished / 'metrics.csv').write_text(
      'round,sgd_steps_cumulative\n1,10\n2,20\n')
  return spec_file, grid


@pytest.mark.parametrize('what, args', [('summary', ['--summary_only']),
                                        ('curve', ['--summary_only']),
                                        ('summary', [])])
def test_a_summary_of_a_column_finished_runs_lack_is_one_line(tmp_path, what,
                                                             args):
  """Not a table of n/a: exit 1 naming the summary or curve, the column and
  the metrics.csv (and what it has), before the summary (or, without
  --summary_only, any other run) is written."""
  spec_file, grid = _column_fault_grid(tmp_path, what)
  finished = grid / 'runs' / 'acc_low_x_b' / 'seed_1'
  finished.mkdir(parents=True)
  (finished / 'metrics.csv').write_text(
      'round,eval/accuracy,sgd_steps_cumulative\n' +
      ''.join(f'{r},0.5,{10 * r}\n' for r in range(1, 5)))
  result = binaries.run('tasks.grid', f'--spec={spec_file}',
                        f'--output_dir={grid}', *args)
  named = ("summary 'final' reads the column 'eval/acuracy'"
           if what == 'summary' else "curve 'eval/los' reads the column "
           "'eval/los'")
  assert (result.returncode, result.stderr) == (1, (
      f"Error: grid 'fake': {named}, which {finished}/metrics.csv does not "
      'have (its columns: round, eval/accuracy, sgd_steps_cumulative).\n'))
  assert sorted(os.listdir(grid)) == ['runs']  # No logs/, no summary/.
  assert sorted(os.listdir(grid / 'runs')) == ['acc_low_x_a', 'acc_low_x_b']


def test_a_column_only_some_runs_have_is_n_a_in_the_others(tmp_path):
  """DP rows beside rows without DP: the table keeps every row, the DP
  column n/a where the runs have none of it."""
  spec = spec_lib.Spec(
      name='dp', binary='tests.grid_fake_binary', flags=dict(rounds=3),
      settings=spec_lib.cross(('dp', {'on': dict(epsilon=2.0), 'off': {}})),
      seeds=(0, 1), summaries=(summaries.Final(ACCURACY, label='final'),
                               summaries.Final('dp/epsilon', label='eps')))
  failed, _ = _run_grid(spec, str(tmp_path))
  assert not failed
  table.summarise(spec, str(tmp_path), out=io.StringIO())
  text = (tmp_path / 'summary' / 'dp.md').read_text()
  on = next(line for line in text.splitlines() if line.startswith('| on '))
  off = next(line for line in text.splitlines() if line.startswith('| off '))
  # eval/accuracy 0.5 + 0.01 seed + 0.003 at round 3: 0.503 and 0.513.
  assert on == '| on | 0.508 ± 0.06353 | 6 ± 0 |'
  assert off == '| off | 0.508 ± 0.06353 | n/a (0/2 seeds) |'


def test_a_summary_of_a_missing_column_waits_for_a_finished_run(tmp_path):
  """No finished run: nothing to check the column against, no error."""
  spec_file, grid = _column_fault_grid(tmp_path, 'summary')
  result = binaries.run('tasks.grid', f'--spec={spec_file}',
                        f'--output_dir={grid}', '--summary_only')
  assert (result.returncode, result.stdout, result.stderr) == (
      0, 'fake: no run is finished yet; no summary.\n', '')
  assert sorted(os.listdir(grid)) == ['runs']


def _digits_k_spec(*summaries_):
  """A digits grid, K = 1 and 2, two seeds each, reading `summaries_`."""
  return spec_lib.Spec(
      name='k', binary='tasks.digits.train', flags=dict(rounds=2),
      settings=spec_lib.cross(('K', {'1': dict(num_local_steps=1),
                                     '2': dict(num_local_steps=2)})),
      seeds=(0, 1), summaries=summaries_)


def test_summary_columns_are_checked_against_what_runs_will_write(tmp_path):
  """Before any run trains, each column is looked for in what the runs to
  train will write (`columns_of` of their specs, one setting after
  another, seeds read once): one build for a right spec, another only for
  a column the first setting lacks, and a column no run writes is one
  line."""
  built = []

  def columns_of(spec):
    built.append(spec.algorithm.num_local_steps)
    return ['round', ACCURACY] + (['only_k2'] if spec.algorithm.num_local_steps
                                  == 2 else [])

  def check(*summaries_):
    built.clear()
    spec = _digits_k_spec(*summaries_)
    runs = run_specs.with_specs(spec.runs(str(tmp_path)), str(tmp_path))
    table.check_planned_columns(spec, str(tmp_path), runs,
                                columns_of=columns_of)
    return list(built)

  assert check(summaries.Final(ACCURACY)) == [1]
  assert check(summaries.Final(ACCURACY), summaries.Final('only_k2')) == [1, 2]
  with pytest.raises(table.MissingColumnError) as e:
    check(summaries.Final('eval/acuracy'))
  assert built == [1, 2]
  # Nothing left to train: the finished runs decide (`check_columns`).
  spec = _digits_k_spec(summaries.Final('eval/acuracy'))
  assert table.check_planned_columns(spec, str(tmp_path), [],
                                     columns_of=columns_of) is None
  assert str(e.value) == (
      "grid 'k': summary 'final eval/acuracy' reads the column "
      "'eval/acuracy', which none of the 4 runs to train would write (run "
      "K=1, seed 0 writes round, eval/accuracy); nothing was trained.")
  # A finished run with the column: nothing to build.
  done = tmp_path / 'runs' / 'k_1' / 'seed_0'
  done.mkdir(parents=True, exist_ok=True)
  (done / 'metrics.csv').write_text('round,eval/accuracy\n1,0.5\n2,0.5\n')
  assert check(summaries.Final(ACCURACY)) == []


def test_a_misspelt_column_refuses_the_grid_before_any_run_trains(tmp_path):
  """The real columns of a digits run (its process built, not trained):
  exit 1 with one line, and nothing written."""
  spec_file = tmp_path / 'spec.py'
  spec_file.write_text(
      'import dataclasses\nfrom tasks.grid import summaries\n'
      'from tests import test_grid\nFORMS = {"cpu_small": dataclasses.replace('
      'test_grid._digits_k_spec(summaries.Final("eval/acuracy")), '
      'settings=test_grid._digits_k_spec().settings[:1])}\n')
  grid = tmp_path / 'grid'
  result = binaries.run('tasks.grid', f'--spec={spec_file}',
                        f'--output_dir={grid}')
  line = result.stderr.strip().splitlines()[-1]
  assert (result.returncode, line[:line.index(' (run')]) == (1, (
      "Error: grid 'k': summary 'final eval/acuracy' reads the column "
      "'eval/acuracy', which none of the 2 runs to train would write"))
  assert line.endswith(", eval/accuracy, eval/loss, eval/num_examples, "
                       "eval/num_batches); nothing was trained."), line
  assert not grid.exists()
  listed = binaries.run('tasks.grid', f'--spec={spec_file}',
                        f'--output_dir={grid}', '--list')
  assert (listed.returncode, listed.stdout,
          listed.stderr.strip().splitlines()[-1]) == (1, '', line)
  assert not grid.exists()


# ------------------------------------------------------------- the commands
def test_list_and_index_hand_the_runs_to_a_scheduler(tmp_path):
  spec_file = tmp_path / 'spec.py'
  spec_file.write_text(
      'from tests import test_grid\nFORMS = {"cpu_small": '
      'test_grid._fake_spec()}\n')
  grid = tmp_path / 'grid'
  listed = binaries.run('tasks.grid', f'--spec={spec_file}',
                        f'--output_dir={grid}', '--list')
  assert listed.returncode == 0, listed.stderr
  commands = listed.stdout.splitlines()
  assert len(commands) == 12
  assert commands[7].endswith(f'--accuracy=0.7 --seed=1 '
                              f'--output_dir={grid}/runs/acc_high_x_a/seed_1')
  one = binaries.run('tasks.grid', f'--spec={spec_file}',
                     f'--output_dir={grid}', '--index=7')
  assert one.returncode == 0, one.stderr
  run = _fake_spec().runs(str(grid))[7]
  assert runner.rounds_done(run) == 4
  assert sorted(os.listdir(grid / 'runs')) == ['acc_high_x_a']
  again = binaries.run('tasks.grid', f'--spec={spec_file}',
                       f'--output_dir={grid}', '--index=7')
  assert again.stdout.strip() == f'acc=high, x=a, seed 1: finished ({run.output_dir})'
  data = binaries.run('tasks.grid', f'--spec={spec_file}',
                      f'--output_dir={grid}', '--list',
                      '--run_flag=accuracy=0.9', '--run_flag=--fail=false')
  assert data.stdout.splitlines()[7].endswith(
      f'--accuracy=0.9 --fail=false --seed=1 '
      f'--output_dir={grid}/runs/acc_high_x_a/seed_1')
  # google-research/federated's names reach every run.
  names = binaries.run('tasks.grid', f'--spec={spec_file}',
                       f'--output_dir={grid}', '--list', '--total_rounds=9',
                       '--clients_per_round=2', '--rounds_per_eval=3')
  assert names.stdout.splitlines()[7].endswith(
      f'--progress=false --rounds=9 --accuracy=0.7 --clients_per_round=2 '
      f'--eval_every=3 --seed=1 --output_dir={grid}/runs/acc_high_x_a/seed_1')
  # The runtime reaches every run too (execution only).
  runtime = binaries.run('tasks.grid', f'--spec={spec_file}',
                         f'--output_dir={grid}', '--list',
                         '--runtime=in_process')
  assert runtime.stdout.splitlines()[7].endswith(
      f'--progress=false --rounds=4 --accuracy=0.7 --runtime=in_process '
      f'--seed=1 --output_dir={grid}/runs/acc_high_x_a/seed_1')
  clash = binaries.run('tasks.grid', f'--spec={spec_file}',
                       f'--output_dir={grid}', '--run_flag=seed=3')
  assert clash.stderr.strip().splitlines()[-1].startswith(
      "--run_flag: grid 'fake', acc=low, x=a: --seed is the grid's to set")
  bad = binaries.run('tasks.grid', f'--spec={spec_file}',
                     f'--output_dir={grid}', '--index=12')
  assert (bad.returncode, bad.stderr.strip().splitlines()[-1]) == (
      1, '--index=12: the grid has 12 runs (0 to 11).')
  unknown = binaries.run('tasks.grid', '--spec=table9', f'--output_dir={grid}')
  assert unknown.stderr.strip().splitlines()[-1] == (
      '--spec=table9: not a spec; choose from ' + ', '.join(specs.names())
      + ' or give a .py file.')


_HEAD = 'import dataclasses\nfrom tests import test_grid\n'


@pytest.mark.parametrize('text, message', [
    # A syntax error: its line.
    ('from tests import test_grid\nFORMS = {"cpu_small": '
     'test_grid._fake_spec(\n}\n',
     "line 3: SyntaxError: closing parenthesis '}' does not match opening "
     "parenthesis '(' on line 2"),
    # A form that is not a Spec (every form is checked, not only --form's).
    (_HEAD + 'FORMS = {"cpu_small": test_grid._fake_spec(),\n'
     '         "paper": dict(rounds=6)}\n',
     "form 'paper' is a dict, not a tasks.grid.spec.Spec."),
    # Module code that raises: the line.
    (_HEAD + '\nraise RuntimeError("x")\n', 'line 4: RuntimeError: x'),
    (_HEAD + 'FORMS = {"cpu_small": test_grid._fake_spek()}\n',
     "line 3: AttributeError: module 'tests.test_grid' has no attribute "
     "'_fake_spek'"),
    (_HEAD + 'FORMS = {"cpu_small": fake_spec()}\n',
     "line 3: NameError: name 'fake_spec' is not defined"),
    # A Spec without rounds, or rounds not a count: the Spec refuses them
    # when made, naming the grid and setting; the line is the form's.
    (_HEAD + 'FORMS = {\n    "cpu_small": dataclasses.replace(\n'
     '        test_grid._fake_spec(), flags={})}\n',
     "line 4: ValueError: grid 'fake', acc=low, x=a: give --rounds in the "
     'flags (runs of a grid have a fixed length).'),
    (_HEAD + 'FORMS = {"cpu_small": dataclasses.replace(\n'
     '    test_grid._fake_spec(), flags=dict(rounds="six"))}\n',
     "line 3: ValueError: grid 'fake', acc=low, x=a: --rounds='six' is not "
     'a number of rounds (give an integer >= 1).'),
], ids=['syntax', 'not_a_spec', 'raises', 'attribute_error', 'name_error',
        'no_rounds', 'rounds_six'])
def test_a_bad_spec_file_is_one_line_and_writes_nothing(tmp_path, text,
                                                       message):
  spec_file = tmp_path / 'spec.py'
  spec_file.write_text(text)
  grid = tmp_path / 'grid'
  result = binaries.run('tasks.grid', f'--spec={spec_file}',
                        f'--output_dir={grid}', '--parallel=2')
  separator = ': ' if message.startswith('form') else ', '
  assert (result.returncode, result.stdout, result.stderr) == (
      1, '', f'--spec={spec_file}{separator}{message}\n')
  assert not grid.exists()


def test_the_comparisons_retired_flags_say_what_replaced_them(tmp_path):
  """`tasks.decaying_k --task=femnist`, as the docs of 2026-11-23 gave it,
  is one line naming the grid's way, not absl's unknown-flag error."""
  result = binaries.run('tasks.decaying_k', '--task=femnist',
                        f'--output_dir={tmp_path / "dk"}')
  assert (result.returncode, result.stdout, result.stderr) == (
      1, '', "--task is retired: the comparisons are grids now; give "
      "--form=<task> (--spec=list lists each spec's forms) (CHANGELOG.md, "
      '2026-11-24).\n')
  assert not (tmp_path / 'dk').exists()
  # Whatever else is given: a flag the grid does not know, the old boolean.
  for args, retired in (
      (['--task=femnist', '--use_synthetic_data', '--bogus=1'], 'task'),
      (['--nouse_synthetic_data', '--task=femnist'], 'use_synthetic_data')):
    result = binaries.run('tasks.adaptive_fl', *args,
                          f'--output_dir={tmp_path / "dk"}')
    assert (result.returncode, result.stdout) == (1, '')
    assert result.stderr.startswith(f'--{retired} is retired: the '
                                    'comparisons are grids now; give ')
  assert not (tmp_path / 'dk').exists()


def test_a_list_read_in_part_ends_quietly(tmp_path):
  """`--list | head -1`: the runner stops at the closed pipe with 141
  (SIGPIPE's code, as a shell tool's) and no traceback."""
  process = subprocess.Popen(
      # 889 runs: more than a pipe holds (a short list could be written
      # whole before the reader closes it).
      [sys.executable, '-m', 'tasks.grid', '--spec=seed003_search',
       '--form=femnist', f'--output_dir={tmp_path}', '--list'],
      cwd=binaries.ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
      text=True)
  first = process.stdout.readline()
  process.stdout.close()
  stderr = process.stderr.read()
  assert process.wait() == 141
  assert ' -m tasks.femnist.train ' in first
  assert 'Traceback' not in stderr and 'BrokenPipe' not in stderr, stderr


def test_plot_bands_stay_in_the_metrics_range_and_labels_are_words():
  assert table.metric_range(ACCURACY) == (0.0, 1.0)
  assert table.metric_range('eval/all/auc') == (0.0, 1.0)
  assert table.metric_range(keys.TRAIN_LOSS) == (0.0, math.inf)
  assert table.metric_range('eval/x') == (-math.inf, math.inf)
  assert table.readable(ACCURACY) == 'test accuracy (eval/accuracy)'
  assert table.readable(keys.TRAIN_LOSS) == (
      f'training loss ({keys.TRAIN_LOSS})')
  assert table.readable('train_eval/loss') == (
      "global model's training loss (train_eval/loss)")
