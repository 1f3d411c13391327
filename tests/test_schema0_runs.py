"""Run directories written before run specs still resume and load.

Until run specs, a binary's config.json held its flag values by name
(schema 0). The fixtures under tests/fixtures/schema0_runs/ are such
directories, written by the binaries themselves (commit c57d4f4, one round
each, the commands below): three whole (config.json, metrics.csv and the
round's checkpoint), three a config.json only. The same command resumes a
whole one, keeping its config.json as it was; another seed is refused in
the spec's words; `saved_run` loads each as the run its flags say.
"""

import csv
import os
import shutil

import numpy as np
import pytest

from tasks.common import saved_run
from tests import binaries
from tff_mixed.templates import client_groups

FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures', 'schema0_runs')

# Fixture -> the command that wrote it (with --noprogress and --output_dir).
COMMANDS = {
    'digits': ('tasks.digits.train', '--algorithm=parallel_training',
               '--client_labels=0,1,2,3,4', '--num_clients=20',
               '--clients_per_round=4', '--num_local_steps=2',
               '--hidden_units=8', '--rounds=1', '--eval_every=1'),
    'quadratic': ('tasks.quadratic.train', '--preset=cpu_small',
                  '--num_local_steps=3', '--server_learning_rate=0.001',
                  '--rounds=1'),
    'stackoverflow_wiki': ('tasks.stackoverflow_wiki.train',
                           '--use_synthetic_data',
                           '--algorithm=two_way_gradient_transfer',
                           '--rounds=1'),
    # config.json only:
    'femnist': ('tasks.femnist.train', '--use_synthetic_data', '--model=dnn',
                '--client_batch_size=3', '--rounds=1', '--eval_every=1',
                '--clients_per_round=2', '--num_local_steps=2'),
    'celeba': ('tasks.celeba.train', '--use_synthetic_data',
               '--algorithm=one_way_gradient_transfer', '--hidden_units=8',
               '--rounds=1'),
    'movielens': ('tasks.movielens.train', '--use_synthetic_data',
                  '--algorithm=parallel_training', '--rounds=1'),
}
WHOLE = ('digits', 'quadratic', 'stackoverflow_wiki')


@pytest.mark.parametrize('name', WHOLE)
def test_the_same_command_resumes_and_another_is_refused(name, tmp_path):
  run_dir = tmp_path / name
  shutil.copytree(os.path.join(FIXTURES, name), run_dir)
  before = (run_dir / 'config.json').read_text()
  command = (*COMMANDS[name], '--noprogress', f'--output_dir={run_dir}')
  result = binaries.run(*command)
  assert result.returncode == 0, result.stderr[-2000:]
  assert f'{run_dir}: already complete (1 round); nothing to train.' in (
      result.stderr)
  assert (run_dir / 'config.json').read_text() == before
  if name != 'digits':  # The refusal is the same code for every task.
    return
  other = binaries.run(*command, '--seed=1')
  assert other.returncode == 1
  assert other.stderr.strip().splitlines()[-1] == (
      f'Error: output_dir {run_dir} holds a run with a different '
      'configuration (spec.run.seed: 0 there, 1 now); choose another '
      'output_dir or delete it.')
  assert (run_dir / 'config.json').read_text() == before


def test_a_run_of_flags_loads_and_evaluates_as_it_did():
  run = saved_run.load_run(os.path.join(FIXTURES, 'digits'))
  with open(os.path.join(FIXTURES, 'digits', 'metrics.csv')) as f:
    row = list(csv.DictReader(f))[-1]
  evaluated = run.evaluate()
  assert run.round_num == 1 and evaluated
  for name, value in evaluated.items():
    np.testing.assert_allclose(value, float(row[name]), rtol=1e-5)


@pytest.mark.parametrize('name', sorted(COMMANDS))
def test_a_config_of_flags_reads_as_the_run_its_flags_say(name):
  spec = saved_run.read_spec(os.path.join(FIXTURES, name))
  flags = dict(arg[2:].partition('=')[::2] for arg in COMMANDS[name][1:])
  assert spec.task == name
  assert spec.algorithm.algorithm == flags.get('algorithm', 'fedavg')
  if 'num_local_steps' in flags:
    assert spec.algorithm.num_local_steps == int(flags['num_local_steps'])
  if 'clients_per_round' in flags:
    assert spec.run.clients_per_round == int(flags['clients_per_round'])
  assert spec.task_args.get('use_synthetic_data', False) == (
      'use_synthetic_data' in flags)
  for arg in ('model', 'hidden_units', 'num_clients'):
    if arg in flags:
      assert str(spec.task_args[arg]) == flags[arg]
  if 'client_batch_size' in flags:
    assert spec.task_args['batch_size'] == int(flags['client_batch_size'])
  # MovieLens's selected rows run one TFF client per client.
  assert spec.execution.client_groups == (
      None if name == 'movielens' else
      client_groups.ClientGroups(2))
