"""The absl binaries: help, one-line errors, no overwriting of other runs."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*args, timeout=300):
  return subprocess.run(
      [sys.executable, '-m', *args], cwd=ROOT, capture_output=True, text=True,
      timeout=timeout,
  )


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
