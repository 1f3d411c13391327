"""A trained model out of a run directory (`tasks.common.saved_run`,
`python -m tasks.export`, `python -m tasks.evaluate`): rebuilt from
config.json alone, its checkpoint's model evaluates to the run's own last
evaluation, in Keras too."""

import csv
import os

import numpy as np
import pytest
import tensorflow as tf

from tasks import export
from tasks.common import saved_run
from tasks.digits import task as digits_task
from tests import binaries


@pytest.fixture(scope='module')
def run_dir(tmp_path_factory):
  out = tmp_path_factory.mktemp('runs') / 'digits'
  result = binaries.run(
      'tasks.digits.train', '--rounds=4', '--eval_every=2',
      '--checkpoint_every=2', '--num_clients=20', '--clients_per_round=5',
      '--num_local_steps=3', '--hidden_units=8', '--noprogress',
      f'--output_dir={out}')
  assert result.returncode == 0, result.stderr[-2000:]
  return str(out)


def _last_eval(run_dir, round_num=None):
  with open(os.path.join(run_dir, 'metrics.csv')) as f:
    rows = [r for r in csv.DictReader(f) if r['eval/accuracy']]
  row = rows[-1] if round_num is None else next(
      r for r in rows if int(r['round']) == round_num)
  return {k: float(v) for k, v in row.items() if k.startswith('eval/')}


def test_a_run_loads_and_evaluates_to_its_own_last_evaluation(run_dir):
  run = saved_run.load_run(run_dir)
  assert run.round_num == 4 and run.task.name == 'digits'
  assert run.config.num_local_steps == 3 and run.config.seed == 0
  got, want = run.evaluate(), _last_eval(run_dir)
  assert set(got) == set(want)
  for name, value in want.items():
    np.testing.assert_allclose(got[name], value, rtol=1e-6)
  earlier = saved_run.load_run(run_dir, round_num=2)
  np.testing.assert_allclose(earlier.evaluate()['eval/accuracy'],
                             _last_eval(run_dir, 2)['eval/accuracy'])


def test_the_exported_keras_model_predicts_what_the_run_evaluated(
    run_dir, tmp_path):
  run = saved_run.load_run(run_dir)
  path = export.export(run, str(tmp_path / 'digits.keras'))
  model = tf.keras.models.load_model(path)
  _, _, x, y = digits_task.load_digits(0)
  accuracy = np.mean(model.predict(x, verbose=0).argmax(1) == y)
  np.testing.assert_allclose(accuracy, _last_eval(run_dir)['eval/accuracy'],
                             rtol=1e-6)
  with pytest.raises(saved_run.SavedRunError, match='exists; choose a new'):
    export.export(run, path)


def test_the_commands(run_dir, tmp_path):
  result = binaries.run('tasks.evaluate', f'--run_dir={run_dir}')
  assert result.returncode == 0, result.stderr[-2000:]
  accuracy = _last_eval(run_dir)['eval/accuracy']
  assert f'eval/accuracy={accuracy:.6g}' in result.stdout.splitlines()
  out = tmp_path / 'model'
  result = binaries.run('tasks.export', f'--run_dir={run_dir}', '--round=2',
                        f'--out={out}')
  assert result.returncode == 0, result.stderr[-2000:]
  assert os.path.exists(out / 'saved_model.pb')


def test_what_does_not_load_is_one_line(run_dir, tmp_path):
  with pytest.raises(saved_run.SavedRunError, match=(
      r'config.json does not exist: is .* a run directory\?')):
    saved_run.load_run(str(tmp_path))
  with pytest.raises(saved_run.SavedRunError, match=(
      r'has no checkpoint of round 3 \(it has 2, 4\)')):
    saved_run.load_run(run_dir, round_num=3)
  with pytest.raises(saved_run.SavedRunError, match=(
      'binary tasks.nothing.train does not import')):
    saved_run.load_run(run_dir, binary='tasks.nothing.train')
  result = binaries.run('tasks.evaluate', f'--run_dir={tmp_path}')
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1].startswith(
      f'Error: {tmp_path}/config.json does not exist')
