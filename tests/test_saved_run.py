"""A trained model out of a run directory (`python -m tasks.evaluate`,
`python -m tasks.export` over `tasks.common.saved_run`): rebuilt from
config.json alone, its checkpoint's model evaluates to the run's own
evaluation of that round, in Keras too.

The commands run in child processes, as a user runs them.
"""

import csv
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from tasks.digits import task as digits_task
from tests import binaries

TRAIN = ('tasks.digits.train', '--rounds=4', '--eval_every=2',
         '--checkpoint_every=2', '--num_clients=20', '--clients_per_round=5',
         '--num_local_steps=3', '--hidden_units=8', '--noprogress')


@pytest.fixture(scope='module')
def run_dir(tmp_path_factory):
  out = tmp_path_factory.mktemp('runs') / 'digits'
  result = binaries.run(*TRAIN, f'--output_dir={out}')
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout.splitlines()[-1].startswith(
      'digits: 4 rounds done in ')
  return str(out)


def _evaluation(run_dir, round_num):
  with open(os.path.join(run_dir, 'metrics.csv')) as f:
    row = next(r for r in csv.DictReader(f) if int(r['round']) == round_num)
  return {k: float(v) for k, v in row.items() if k.startswith('eval/')}


def _printed(stdout):
  return {k: float(v) for k, _, v in (
      line.partition('=') for line in stdout.splitlines() if '=' in line)}


@pytest.mark.parametrize('round_num', [None, 2])
def test_a_run_evaluates_to_its_own_evaluation_of_that_round(run_dir,
                                                             round_num):
  flags = [f'--round={round_num}'] if round_num else []
  result = binaries.run('tasks.evaluate', f'--run_dir={run_dir}', *flags)
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout.startswith(f'digits: round {round_num or 4} of')
  got, want = _printed(result.stdout), _evaluation(run_dir, round_num or 4)
  assert set(got) == set(want)
  for name, value in want.items():
    np.testing.assert_allclose(got[name], value, rtol=1e-5)


def test_the_exported_keras_model_predicts_what_the_run_evaluated(
    run_dir, tmp_path):
  path = tmp_path / 'digits.keras'
  result = binaries.run('tasks.export', f'--run_dir={run_dir}',
                        f'--out={path}')
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout.strip() == (
      f'digits: round 4 of {run_dir} saved to {path}')
  model = tf.keras.models.load_model(path)
  _, _, x, y = digits_task.load_digits(0)
  accuracy = np.mean(model.predict(x, verbose=0).argmax(1) == y)
  np.testing.assert_allclose(accuracy, _evaluation(run_dir, 4)['eval/accuracy'],
                             rtol=1e-6)
  again = binaries.run('tasks.export', f'--run_dir={run_dir}',
                       f'--out={path}')
  assert again.returncode == 1
  assert again.stderr.strip().splitlines()[-1] == (
      f'Error: --out={path} exists; choose a new path.')
  saved_model = tmp_path / 'model'
  result = binaries.run('tasks.export', f'--run_dir={run_dir}', '--round=2',
                        f'--out={saved_model}')
  assert result.returncode == 0, result.stderr[-2000:]
  assert (saved_model / 'saved_model.pb').exists()


def test_running_a_finished_run_again_says_so(run_dir):
  result = binaries.run(*TRAIN, f'--output_dir={run_dir}')
  assert result.returncode == 0, result.stderr[-2000:]
  assert f'{run_dir}: already complete (4 rounds); nothing to train.' in (
      result.stderr)
  assert result.stdout.splitlines()[-1].startswith(
      'digits: already complete (4 rounds); final eval: accuracy=')


@pytest.mark.parametrize('flags, message', [
    (['--round=3'], '{run_dir} has no checkpoint of round 3 (it has 2, 4).'),
    (['--binary=tasks.digits.train'],
     "--binary is retired: the run's task and configuration are read from "
     'its config.json alone; drop it.'),
])
def test_what_does_not_load_is_one_line(run_dir, flags, message):
  result = binaries.run('tasks.evaluate', f'--run_dir={run_dir}', *flags)
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1].startswith(
      'Error: ' + message.format(run_dir=run_dir)), result.stderr[-1000:]


def test_a_run_of_a_task_there_is_not_is_one_line(run_dir, tmp_path):
  shutil.copytree(run_dir, tmp_path / 'run')
  config = json.loads((tmp_path / 'run' / 'config.json').read_text())
  assert config['schema'] == 3  # The run's spec.
  config['spec']['task'] = 'nothing'
  (tmp_path / 'run' / 'config.json').write_text(json.dumps(config))
  result = binaries.run('tasks.evaluate', f'--run_dir={tmp_path}/run')
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1].startswith(
      f"Error: {tmp_path}/run does not rebuild: no task 'nothing'; the tasks "
      'are digits, quadratic, ')


def test_a_directory_that_is_not_a_run_is_one_line(tmp_path):
  result = binaries.run('tasks.evaluate', f'--run_dir={tmp_path}')
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1] == (
      f'Error: {tmp_path}/config.json does not exist: is {tmp_path} a run '
      'directory?')
