"""The absl binaries: help, one-line errors, no overwriting of other runs."""

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tasks.common import run as run_lib
from tasks.common import run_config
from tasks.common import run_spec
from tasks.common import saved_run
from tasks.common import task_registry
from tasks.femnist import task as femnist_task
from tff_mixed import aggregators
from tests import binaries
from tests import runs



_run = binaries.run  # python -m MODULE FLAGS..., forked (tests/binaries.py).


def test_helpfull_documents_every_training_flag():
  result = _run('tasks.digits.train', '--helpfull')
  assert 'Traceback' not in result.stderr
  for flag in ('--algorithm', '--num_local_steps', '--client_learning_rate',
               '--server_optimizer', '--dirichlet_alpha', '--output_dir',
               '--checkpoint_every'):
    assert flag in result.stdout


def test_bad_flag_value_exits_non_zero_naming_the_flag(tmp_path):
  result = _run('tasks.digits.train', '--num_local_steps=0',
                f'--output_dir={tmp_path}')
  assert result.returncode != 0
  errors = [l for l in result.stderr.splitlines() if 'num_local_steps' in l]
  assert len(errors) == 1 and 'Flags parsing error' in errors[0]
  assert not os.listdir(tmp_path)  # Nothing written.


def test_output_dir_of_another_configuration_is_never_overwritten(tmp_path):
  out = tmp_path / 'run'
  out.mkdir()
  config = {'task': 'digits', 'num_local_steps': 3}
  (out / 'config.json').write_text(json.dumps(config))
  (out / 'metrics.csv').write_text('round\n1\n')
  result = _run('tasks.digits.train', '--num_local_steps=10',
                f'--output_dir={out}', '--rounds=1')
  assert result.returncode == 1
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith('Error: output_dir') and 'different configuration' in last
  assert json.loads((out / 'config.json').read_text()) == config
  assert (out / 'metrics.csv').read_text() == 'round\n1\n'


def test_schedule_and_runtime_flags_are_documented():
  result = _run('tasks.quadratic.train', '--helpfull')
  for flag in ('--k_schedule', '--k_decay_rate', '--k_window',
               '--client_lr_schedule', '--client_lr_patience',
               '--download_mbps', '--minibatch_seconds'):
    assert flag in result.stdout


def test_bad_schedule_exits_with_one_line_and_writes_nothing(tmp_path):
  result = _run('tasks.quadratic.train', '--k_schedule=exponential',
                '--k_decay_rate=0', f'--output_dir={tmp_path}')
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1] == (
      '--k_decay_rate must be a finite number > 0, got 0.0.')
  assert not os.listdir(tmp_path)


def test_decaying_k_and_learning_rate_from_flags(tmp_path):
  result = _run('tasks.quadratic.train', '--rounds=3', '--clients_per_round=2',
                '--num_local_steps=8', '--k_schedule=exponential',
                '--k_decay_rate=0.5', '--client_lr_schedule=exponential',
                '--client_lr_decay_rate=0.5', '--minibatch_seconds=1',
                '--noprogress', f'--output_dir={tmp_path}')
  assert result.returncode == 0, result.stderr[-2000:]
  with open(tmp_path / 'metrics.csv') as f:
    rows = list(csv.DictReader(f))
  assert [float(r['client_work/num_local_steps']) for r in rows] == [8, 4, 2]
  assert [float(r['client_work/client_learning_rate']) for r in rows] == (
      pytest.approx([0.1, 0.05, 0.025]))
  assert [float(r['sgd_steps_cumulative']) for r in rows] == [16, 24, 28]
  # One second a minibatch dominates the simulated time: about 8 + 4 + 2 s.
  assert float(rows[-1]['simulated_seconds_cumulative']) == pytest.approx(
      14, abs=0.01)


def test_k_step_on_the_evaluation_from_flags(tmp_path):
  """Seed 001's K-step on an evaluation column. x starts far left of every
  client's optimum and rises at every evaluation, so watching it with
  mode=min, K halves at every evaluation after the first."""
  common = ('tasks.quadratic.train', '--rounds=4', '--clients_per_round=2',
            '--num_local_steps=8', '--initial_x=-20',
            '--client_learning_rate=0.001', '--k_schedule=on_plateau',
            '--k_patience=1', '--eval_every=1', '--noprogress')
  result = _run(*common, '--k_monitor=eval/x', f'--output_dir={tmp_path}')
  assert result.returncode == 0, result.stderr[-2000:]
  with open(tmp_path / 'metrics.csv') as f:
    rows = list(csv.DictReader(f))
  assert [float(r['client_work/num_local_steps']) for r in rows] == [8, 8, 4, 2]
  assert [float(r['eval_plateau/num_local_steps']) for r in rows] == [
      8, 4, 2, 1]
  bad = _run(*common, '--k_monitor=eval/accuracy',
             f'--output_dir={tmp_path / "bad"}')
  assert bad.returncode == 1
  assert bad.stderr.strip().splitlines()[-1] == (
      "--k_monitor=eval/accuracy: EvalPlateau on num_local_steps: the "
      "evaluation does not report 'eval/accuracy'; it reports eval/loss, "
      'eval/num_examples, eval/x.')
  assert not (tmp_path / 'bad').exists()


def test_figure1_binary(tmp_path):
  result = _run('tasks.quadratic.figure1', '--rounds=50', '--num_seeds=1',
                '--server_learning_rate=0.1', f'--output_dir={tmp_path}')
  assert result.returncode == 0, result.stderr[-2000:]
  assert 'K_0=10, d_K=0.995' in result.stdout
  assert sorted(os.listdir(tmp_path)) == ['figure1.csv', 'figure1.png']
  bad = _run('tasks.quadratic.figure1', '--server_learning_rate=0',
             f'--output_dir={tmp_path / "bad"}')
  assert bad.returncode == 1
  assert bad.stderr.strip().splitlines()[-1] == (
      '--server_learning_rate must be > 0, got 0.0.')
  assert not os.path.exists(tmp_path / 'bad')


def test_two_local_workers_and_client_groups_from_flags(tmp_path):
  result = _run('tasks.quadratic.train', '--rounds=3', '--clients_per_round=4',
                '--num_local_steps=8', '--k_schedule=exponential',
                '--k_decay_rate=0.5', '--local_workers=2', '--runtime=tff',
                '--client_groups=3', '--noprogress', f'--output_dir={tmp_path}')
  assert result.returncode == 0, result.stderr[-2000:]
  with open(tmp_path / 'metrics.csv') as f:
    rows = list(csv.DictReader(f))
  # 4 clients in 3 groups on 2 workers: every client's K steps count.
  assert [float(r['sgd_steps_cumulative']) for r in rows] == [32, 48, 56]
  spec = saved_run.read_spec(str(tmp_path))
  assert spec.execution.client_groups.count == 3
  # How it last executed: recorded beside the spec, never compared.
  assert (spec.execution.runtime, spec.execution.local_workers) == ('tff', 2)


def test_dp_fedavg_from_flags_in_fast_mode_says_its_epsilon(tmp_path):
  """The binaries' --aggregator=dp (fast mode: the client work clips),
  with the epsilon line the run prints and the configuration it records;
  its metrics.csv has the columns `run.columns` reads off its spec before
  it trains, in their order (the DP aggregator's, dp/epsilon,
  skipped_non_finite, the evaluation's)."""
  args = ['--rounds=2', '--aggregator=dp', '--clip=0.5',
          '--noise_multiplier=0.8', '--dp_delta=1e-3', '--on_non_finite=skip',
          '--noprogress', f'--output_dir={tmp_path}']
  result = _run('tasks.digits.train', *args)
  assert result.returncode == 0, result.stderr[-2000:]
  epsilon = aggregators.epsilon(0.8, 0.1, 2, 1e-3)
  assert (f'DP-FedAvg: clip 0.5, noise multiplier 0.8, 10 of 100 clients a '
          f'round: epsilon ~= {epsilon:.3g} at delta = 0.001 after 2 rounds '
          '(client-level; RDP accountant, cohorts taken as Poisson samples; '
          'metrics.csv has dp/epsilon for each round).'
          in result.stdout.splitlines()), result.stdout
  algorithm = saved_run.read_spec(str(tmp_path)).algorithm
  assert (algorithm.aggregator, algorithm.clip, algorithm.noise_multiplier,
          algorithm.dp_delta) == ('dp', 0.5, 0.8, 1e-3)
  # The running guarantee, round by round, in metrics.csv.
  with open(tmp_path / 'metrics.csv') as f:
    rows = list(csv.DictReader(f))
  assert [float(r['dp/delta']) for r in rows] == [1e-3, 1e-3]
  np.testing.assert_allclose(
      [float(r['dp/epsilon']) for r in rows],
      [aggregators.epsilon(0.8, 0.1, 1, 1e-3), epsilon], rtol=1e-6)
  assert list(rows[0]) == run_lib.columns(
      task_registry.spec_from_args('digits', args))
  assert {'aggregator/dp_clip_norm', 'dp/epsilon', 'skipped_non_finite',
          'eval/accuracy'} <= set(rows[0])


def test_unreachable_worker_exits_with_one_line_and_writes_nothing(tmp_path):
  out = tmp_path / 'run'
  result = _run('tasks.quadratic.train', '--rounds=2', '--workers=localhost:1',
                '--runtime=tff', '--noprogress', f'--output_dir={out}')
  assert result.returncode != 0
  lines = result.stderr.strip().splitlines()
  assert lines[-1].startswith('Error: --workers/--local_workers: TFF worker at '
                              'localhost:1 is not reachable'), lines[-3:]
  assert not out.exists()
  # Several workers are TFF's runtime, which the flags must say.
  result = _run('tasks.quadratic.train', '--rounds=2', '--local_workers=2',
                '--noprogress', f'--output_dir={out}')
  assert (result.returncode, result.stderr.strip().splitlines()[-1]) == (
      1, "Error: --workers/--local_workers: several TFF workers are TFF's "
      'runtime; add --runtime=tff (runtime=in_process runs in this process).')
  assert not out.exists()


def test_fed_gbo_from_flags_moves_model_and_statistics(tmp_path):
  result = _run('tasks.digits.train', '--algorithm=fed_gbo', '--optimizer=adam',
                '--beta_1=0.6', '--client_learning_rate=0.03', '--rounds=2',
                '--num_clients=10', '--clients_per_round=2',
                '--num_local_steps=3', '--eval_every=1', '--noprogress',
                f'--output_dir={tmp_path}')
  assert result.returncode == 0, result.stderr[-2000:]
  with open(tmp_path / 'metrics.csv') as f:
    rows = list(csv.DictReader(f))
  # The digits model (64-32-10) has |x| = 2,410; Adam's s = (m, v): 2 |x|.
  # Down: x, s, the learning rate and K; up: x, the weight and the metrics.
  num_parameters = 64 * 32 + 32 + 32 * 10 + 10
  row = rows[-1]
  assert float(row['client_work/bytes_downloaded_per_client']) == (
      4 * 3 * num_parameters + 8)
  up = float(row['client_work/bytes_uploaded_per_client'])
  assert 4 * num_parameters < up < 4 * num_parameters + 100
  assert float(row['client_work/client_flops_per_client']) > 0
  algorithm = saved_run.read_spec(str(tmp_path)).algorithm
  assert algorithm.algorithm == 'fed_gbo' and algorithm.adaptive.name == 'adam'
  assert algorithm.adaptive.hparams['beta_1'] == 0.6


def test_adaptive_flag_error_exits_with_one_line_and_writes_nothing(tmp_path):
  # In-process, every flag error is in tests/test_registry.py; this checks
  # what a user sees: the exit code, the last stderr line, an empty dir.
  result = _run('tasks.digits.train', '--algorithm=fed_gbo', '--optimizer=adam',
                '--beta=0.5', f'--output_dir={tmp_path}')
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1] == (
      '--optimizer=adam takes --beta_1, --beta_2, --epsilon, not --beta.')
  assert not os.listdir(tmp_path)


@pytest.mark.parametrize('command, spec, preset', [
    ('tasks.decaying_k', 'seed001_table4', 'paper_001'),
    ('tasks.adaptive_fl', 'seed003_table4', 'paper_003')])
def test_the_comparison_commands_are_their_specs_grids(tmp_path, command,
                                                        spec, preset):
  """`tasks.decaying_k` and `tasks.adaptive_fl` run one spec's grid: the
  same runs as `tasks.grid --spec=...`, and its other flags."""
  out = f'--output_dir={tmp_path}'
  theirs = _run(command, out, '--list')
  ours = _run('tasks.grid', f'--spec={spec}', out, '--list')
  assert theirs.returncode == ours.returncode == 0, theirs.stderr[-2000:]
  assert theirs.stdout == ours.stdout and ours.stdout.count('\n') > 10
  paper = _run(command, out, '--form=femnist', '--list')
  # What the binary says of its preset, once for the grid, not on stdout.
  assert paper.stderr.count(f'Note: --preset={preset} takes ') == 1
  first = paper.stdout.splitlines()[0].split()
  assert first[1:3] == ['-m', 'tasks.femnist.train']
  assert first[4].startswith(f'--output_dir={tmp_path}/runs/')
  # The FEMNIST binary read the paper's preset into the run's spec.
  given = run_spec.RunSpec.from_json(
      open(first[3].removeprefix('--spec_json=')).read())
  assert given.task == 'femnist'
  assert given.task_args['batch_size'] == femnist_task.PRESETS[preset][
      'batch_size']


def test_one_shot_regression_binary(tmp_path):
  result = _run('tasks.synthetic_regression.one_shot', '--grid_size=5',
                '--num_seeds=2', f'--output_dir={tmp_path}')
  assert result.returncode == 0, result.stderr[-2000:]
  with open(tmp_path / 'one_shot.csv') as f:
    rows = list(csv.DictReader(f))
  assert len(rows) == 4 * 25
  by_panel = {}
  for row in rows:
    by_panel.setdefault(row['panel'], []).append(float(row['omega']))
  # Thesis §2.4: without concept drift Omega is negligible; with it, and
  # with feature shift on top, it is not.
  assert max(by_panel['fig_2_6a_no_concept_drift']) < 0.2
  assert max(by_panel['fig_2_6b_concept_drift']) > 1.0
  assert max(by_panel['fig_2_7b_feature_shift']) > 5 * max(
      by_panel['fig_2_7a_no_feature_shift'])
  # Each row is Eq. 2.19 at its point (client 1's two parameters set as the
  # row says), the mean over seeds 0 and 1 (`test_synthetic_niid` checks
  # one_shot_divergence by hand).
  from tasks.synthetic_regression import data as regression  # pylint: disable=g-import-not-at-top
  for row in rows[::7]:
    clients = regression.with_client_1(
        regression.PARAMETER_SETS[row['parameter_set']],
        **{row['x_name'][:-2]: float(row['x']),
           row['y_name'][:-2]: float(row['y'])})
    expected = np.mean([regression.one_shot_divergence(
        clients, num_points=regression.NUM_POINTS, seed=seed)
                        for seed in (0, 1)])
    assert float(row['omega']) == pytest.approx(expected, rel=1e-11), row
  assert os.path.getsize(tmp_path / 'one_shot.png') > 10_000
  bad = _run('tasks.synthetic_regression.one_shot', '--sigma_range=0,3',
             f'--output_dir={tmp_path / "bad"}')
  assert bad.returncode == 1
  assert bad.stderr.strip().splitlines()[-1] == (
      '--sigma_range must have from < to, from > 0, got 0,3.')
  assert not os.path.exists(tmp_path / 'bad')


def test_fedavg_regression_binary(tmp_path):
  result = _run('tasks.synthetic_regression.fedavg', '--learning_rates=0.02',
                '--local_steps=1,5', '--rounds=3', f'--output_dir={tmp_path}')
  assert result.returncode == 0, result.stderr[-2000:]
  with open(tmp_path / 'fedavg.csv') as f:
    rows = list(csv.DictReader(f))
  assert [(r['local_steps'], r['round']) for r in rows] == [
      ('1', '1'), ('1', '2'), ('1', '3'), ('5', '1'), ('5', '2'), ('5', '3')]
  omega = {(r['local_steps'], r['round']): float(r['omega']) for r in rows}
  assert omega['1', '3'] < omega['1', '1']
  assert omega['5', '3'] < omega['1', '3']  # More local progress per round.
  # FedAvg by hand: both clients take K full-batch gradient steps on the
  # squared error of y = a x + b from the round's (a, b), the server
  # averages them (equal sizes), Omega the distance to the pooled fit.
  from tasks.synthetic_regression import data as regression  # pylint: disable=g-import-not-at-top
  samples = regression.sample_regression(
      regression.EQ_2_18, num_points=regression.NUM_POINTS, seed=0)
  optimum = np.asarray(regression.least_squares(samples), np.float64)
  for k in (1, 5):
    theta = np.zeros(2)
    for t in range(1, 4):
      ends = []
      for x, y in samples:
        a, b = theta
        for _ in range(k):
          r = a * x + b - y
          a, b = a - 0.02 * 2 * np.mean(r * x), b - 0.02 * 2 * np.mean(r)
        ends.append((a, b))
      theta = np.mean(ends, axis=0)
      assert omega[str(k), str(t)] == pytest.approx(
          np.linalg.norm(theta - optimum), rel=1e-4), (k, t)
  assert os.path.getsize(tmp_path / 'fedavg.png') > 10_000


def test_synthetic_seq_divergence_binary(tmp_path):
  args = ('tasks.synthetic_seq.divergence', '--shift=feature',
          '--num_clusters=1,4', '--learning_rates=0.5', '--local_steps=1,3',
          '--rounds=2', f'--output_dir={tmp_path}')
  result = _run(*args)
  assert result.returncode == 0, result.stderr[-2000:]
  with open(tmp_path / 'divergence.csv') as f:
    rows = list(csv.DictReader(f))
  assert len(rows) == 2 * 2 * 2
  for row in rows:
    if row['local_steps'] == '1':  # FedAvg with E = 1 is centralised GD.
      assert abs(float(row['omega'])) < 1e-4
  sigma = {r['num_clusters']: float(r['sigma_feature']) for r in rows}
  assert sigma['4'] > sigma['1']
  assert os.path.getsize(tmp_path / 'feature_shift.png') > 10_000
  assert len(os.listdir(tmp_path / 'runs')) == 4
  again = _run(*args)  # Every run is reused.
  assert again.returncode == 0, again.stderr[-2000:]
  with open(tmp_path / 'divergence.csv') as f:
    assert list(csv.DictReader(f)) == rows
  bad = _run('tasks.synthetic_seq.divergence', '--num_clusters=30',
             f'--output_dir={tmp_path / "bad"}')
  assert bad.returncode == 1
  assert bad.stderr.strip().splitlines()[-1] == (
      '--num_clusters must be <= 20 (the clients), got 30.')
  assert not os.path.exists(tmp_path / 'bad')


def test_mixing_probe_runs_app_c1_and_advises_from_its_maximum(tmp_path):
  """Seed 004 App. C.1: K = J = 1 whatever --num_local_steps says, one run
  per seed, advice from the maximum over the counted rounds."""
  from tff_mixed.metrics import dissimilarity  # pylint: disable=g-import-not-at-top
  args = ('tasks.digits.train', '--algorithm=parallel_training',
          '--client_labels=0,1,2,3,4', '--mixing_probe=2', '--rounds=3',
          '--mixing_probe_first_round=2', '--num_local_steps=7',
          '--clients_per_round=4', '--noprogress', f'--output_dir={tmp_path}')
  result = _run(*args)
  assert result.returncode == 0, result.stderr[-2000:]
  with open(tmp_path / 'mixing_probe.csv') as f:
    rows = list(csv.DictReader(f))
  assert [(r['simulation'], r['round']) for r in rows] == [
      (s, r) for s in '01' for r in '123']
  assert rows[0]['G_squared'] != rows[3]['G_squared']  # Seeds 0 and 1.
  for simulation in (0, 1):
    with open(tmp_path / f'simulation_{simulation}' / 'metrics.csv') as f:
      steps = [float(r['client_work/num_local_steps']) for r in csv.DictReader(f)]
    assert steps == [1, 1, 1]
  counted = [r for r in rows if int(r['round']) >= 2]
  advice = dissimilarity.recommend_mixing(
      [float(r['G_squared']) for r in counted],
      [float(r['B_squared']) for r in counted])
  assert f'Advice: {advice.mixing}. {advice.reason}' in result.stdout
  # Probes recorded by an older tff_mixed (schema 1) resume with the same
  # command: nothing trained again, the same advice.
  for simulation in (0, 1):
    runs.write_as_schema1(tmp_path / f'simulation_{simulation}')
  again = _run(*args)
  assert again.returncode == 0, again.stderr[-2000:]
  with open(tmp_path / 'mixing_probe.csv') as f:
    assert list(csv.DictReader(f)) == rows
  assert f'Advice: {advice.mixing}. {advice.reason}' in again.stdout


def test_mixing_probe_needs_a_mixed_algorithm_and_its_rounds(tmp_path):
  result = _run('tasks.digits.train', '--mixing_probe=2',
                f'--output_dir={tmp_path}')
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1] == (
      '--mixing_probe is for the mixed FL algorithms, not --algorithm=fedavg.')
  result = _run('tasks.digits.train', '--algorithm=parallel_training',
                '--client_labels=0,1', '--mixing_probe=2', '--rounds=3',
                '--mixing_probe_first_round=4', f'--output_dir={tmp_path}')
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1] == (
      "the mixing probe's first counted round (4, --mixing_probe_first_round) "
      'is after the last of rounds=3.')
  assert not os.listdir(tmp_path)


def test_a_spec_file_runs_as_its_run_and_takes_only_execution_flags(
    tmp_path):
  """`--spec_json` runs a spec file (here another run's config.json, which
  records how its run was started: not compared on resume): the same run,
  as long and where the record and the flags beside it say; a flag that
  would change what it trains, or a spec of another task, is one line."""
  first, again = tmp_path / 'first', tmp_path / 'again'
  made = _run('tasks.digits.train', '--num_clients=20', '--clients_per_round=4',
              '--num_local_steps=3', '--hidden_units=8', '--rounds=2',
              '--eval_every=1', '--noprogress', f'--output_dir={first}')
  assert made.returncode == 0, made.stderr[-2000:]
  spec_file = first / 'config.json'
  assert json.loads(spec_file.read_text())['execution'] == {
      'rounds': 2, 'eval_every': 1, 'checkpoint_every': 10,
      'client_groups': {
          '__type__': 'tff_mixed.templates.client_groups:ClientGroups',
          'count': 2, 'mode': 'vectorised'},
      'runtime': 'in_process', 'progress': False, 'on_non_finite': 'stop',
      'runtime_model': {
          '__type__': 'tff_mixed.metrics.runtime:RuntimeModel',
          'download_mbps': 20.0, 'minibatch_seconds': 0.017,
          'upload_mbps': 5.0},
      'local_workers': 1, 'workers': {'__tuple__': []}, 'concurrency': 0,
      'ray_workers': 0, 'ray_address': None, 'ray_gpus_per_worker': 0.0}
  assert not set(run_config.EXECUTION) & set(
      json.loads(spec_file.read_text())['spec']['run'])
  # No --rounds or --eval_every: the record's; fast mode, as given beside.
  result = _run('tasks.digits.train', f'--spec_json={spec_file}',
                '--client_groups=0', '--noprogress', f'--output_dir={again}')
  assert result.returncode == 0, result.stderr[-2000:]
  binaries.assert_same_metrics(first / 'metrics.csv', again / 'metrics.csv')
  again_record = json.loads((again / 'config.json').read_text())
  assert again_record['spec'] == json.loads(spec_file.read_text())['spec']
  assert (again_record['execution']['client_groups'],
          again_record['execution']['rounds']) == (None, 2)
  # A fast-mode flag given alone changes only itself; in faithful mode
  # --group_mode would be ignored: refused.
  mode = _run('tasks.digits.train', f'--spec_json={spec_file}', '--rounds=1',
              '--group_mode=sequential', '--minibatch_seconds=0.5',
              '--noprogress', f'--output_dir={tmp_path / "mode"}')
  assert mode.returncode == 0, mode.stderr[-2000:]
  executed = json.loads((tmp_path / 'mode' / 'config.json').read_text())[
      'execution']
  assert (executed['client_groups']['count'],
          executed['client_groups']['mode']) == (2, 'sequential')
  assert executed['runtime_model']['minibatch_seconds'] == 0.5
  assert executed['runtime_model']['upload_mbps'] == 5.0
  ignored = _run('tasks.digits.train', f'--spec_json={again}/config.json',
                 '--group_mode=sequential', f'--output_dir={tmp_path / "no"}')
  assert ignored.returncode == 1
  assert ignored.stderr.strip().splitlines()[-1] == (
      '--group_mode=sequential is how fast mode trains a group; this run is '
      'in faithful mode (--client_groups=0): drop it, or give '
      '--client_groups=N.')
  refused = _run('tasks.digits.train', f'--spec_json={spec_file}',
                 '--num_local_steps=5', f'--output_dir={tmp_path / "no"}')
  assert refused.returncode == 1
  assert refused.stderr.strip().splitlines()[-1] == (
      f"--num_local_steps: the run is --spec_json={spec_file}'s; beside it "
      'give only where and how it executes (--output_dir, --root_output_dir, '
      '--experiment_name, --rounds, --client_groups, --group_mode, '
      '--eval_every, --checkpoint_every, --progress, --on_non_finite, '
      '--download_mbps, --upload_mbps, --minibatch_seconds, --runtime, '
      '--local_workers, --workers, --concurrency, --ray_workers, '
      '--ray_address, --ray_gpus_per_worker).')
  older = tmp_path / 'older.json'
  record = json.loads(spec_file.read_text())
  del record['execution']
  older.write_text(json.dumps(record))
  no_rounds = _run('tasks.digits.train', f'--spec_json={older}',
                   f'--output_dir={tmp_path / "no"}')
  assert no_rounds.returncode == 1
  assert no_rounds.stderr.strip().splitlines()[-1] == (
      f"--spec_json={older} is a run directory's config.json from before "
      'runs recorded their rounds: give --rounds.')
  other = _run('tasks.quadratic.train', f'--spec_json={spec_file}',
               f'--output_dir={tmp_path / "no"}')
  assert other.returncode == 1
  assert other.stderr.strip().splitlines()[-1] == (
      f'--spec_json={spec_file} is a run of task digits; run it with its '
      'binary.')
  assert not (tmp_path / 'no').exists()


def test_a_binary_of_your_own_reads_and_runs_its_own_flags(tmp_path):
  """`binary.main_for` without `runs` (tests/own_binary.py: its flags and a
  check of its own): `main.spec_of` reads a command line as the binary
  runs it (its own defaults, one line for a flag its check refuses, no
  output directory unless given), and the binary trains that run."""
  code = ('import sys; from absl import app; from tests import own_binary\n'
          'for args in (["--num_local_steps=3", "--initial_x=0.5"],'
          ' ["--initial_x=0"], ["--num_local_steps=0"]):\n'
          '  try: print(own_binary.main.spec_of(args).to_json()'
          '.replace("\\n", ""))\n'
          '  except app.UsageError as e: print("refused:", e)\n')
  result = subprocess.run([sys.executable, '-c', code], cwd=binaries.ROOT,
                          capture_output=True, text=True, timeout=600)
  assert result.returncode == 0, result.stderr[-2000:]
  read, zero_x, zero_k = result.stdout.strip().splitlines()
  spec = run_spec.RunSpec.from_json(read)
  assert (spec.task, spec.task_args['initial_x']) == ('quadratic', 0.5)
  assert spec.algorithm.num_local_steps == 3
  assert (spec.execution.rounds, spec.run.clients_per_round) == (3, 2)
  assert spec.execution.output_dir is None
  assert zero_x == 'refused: --initial_x=0 starts at the optimum.'
  assert zero_k == ('refused: flag --num_local_steps=0: must be an integer '
                    'in [1, 1073741824].')
  out = tmp_path / 'run'
  trained = _run('tests.own_binary', '--num_local_steps=3', '--initial_x=0.5',
                 '--noprogress', f'--output_dir={out}')
  assert trained.returncode == 0, trained.stderr[-2000:]
  assert run_spec.difference(saved_run.read_spec(str(out)), spec) is None
  with open(out / 'metrics.csv') as f:
    assert [int(r['round']) for r in csv.DictReader(f)] == [1, 2, 3]
