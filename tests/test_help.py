"""Every binary's `--help` lists the flags that matter (issue 19).

One subprocess imports TensorFlow and TFF once and forks a child per binary
that runs it with `--help` (a fresh interpreter per binary would cost ~9 s
each).
"""

import json
import os
import subprocess
import sys

import pytest

from tasks.common import command

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAINING = ('--algorithm', '--rounds', '--clients_per_round',
            '--num_local_steps', '--client_learning_rate',
            '--server_learning_rate', '--seed', '--output_dir',
            '--on_non_finite')
BENCHMARK = TRAINING + ('--preset', '--data_dir', '--model')
GRID = ('--spec', '--form', '--output_dir', '--parallel', '--list', '--index',
        '--summary_only', '--total_rounds', '--clients_per_round')
BINARIES = {
    'tasks.digits.train': TRAINING + ('--client_labels',),
    'tasks.quadratic.train': TRAINING + ('--initial_x', '--preset'),
    'tasks.celeba.train': TRAINING + ('--preset', '--cache_dir'),
    'tasks.stackoverflow_wiki.train': TRAINING + ('--preset',),
    'tasks.movielens.train': TRAINING + ('--preset', '--data_dir'),
    'tasks.femnist.train': BENCHMARK,
    'tasks.shakespeare.train': BENCHMARK,
    'tasks.cifar100.train': BENCHMARK,
    'tasks.stackoverflow_tags.train': BENCHMARK,
    'tasks.sent140.train': BENCHMARK,
    'tasks.grid': GRID,
    'tasks.decaying_k': GRID,
    'tasks.adaptive_fl': GRID,
    'tasks.digits.demo': ('--output_dir',),
    'tasks.quadratic.figure1': ('--output_dir', '--server_learning_rate'),
    'tasks.movielens.table': ('--output_dir',),
    'tasks.synthetic_regression.fedavg': ('--output_dir', '--preset',
                                          '--num_local_steps'),
    'tasks.synthetic_regression.one_shot': ('--output_dir', '--num_seeds'),
    'tasks.synthetic_seq.divergence': ('--output_dir', '--preset',
                                       '--num_local_steps'),
}

_FORKING_HELP = r'''
import json, os, runpy, sys
import tensorflow  # Imported once; every child inherits it.
import tensorflow_federated
helps = {}
for module in sys.argv[1:]:
  read, write = os.pipe()
  pid = os.fork()
  if pid == 0:
    os.close(read)
    os.dup2(write, 1)
    os.dup2(write, 2)
    sys.argv = ['', '--help']
    code = 0
    try:
      runpy.run_module(module, run_name='__main__', alter_sys=True)
    except SystemExit as e:
      code = e.code or 0
    except BaseException:  # pylint: disable=broad-except
      import traceback
      traceback.print_exc()
      code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
  os.close(write)
  with os.fdopen(read) as f:
    text = f.read()
  _, status = os.waitpid(pid, 0)
  helps[module] = [os.waitstatus_to_exitcode(status), text]
print(json.dumps(helps))
'''


def test_every_binary_help_lists_its_key_flags():
  result = subprocess.run(
      [sys.executable, '-c', _FORKING_HELP, *BINARIES], cwd=REPO,
      capture_output=True, text=True, timeout=600,
      env={**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'})
  assert result.returncode == 0, result.stderr[-3000:]
  helps = json.loads(result.stdout.strip().splitlines()[-1])
  missing = {}
  for module, flags in BINARIES.items():
    code, text = helps[module]
    # absl's --help exits 1 (flags are "parsed" by printing them).
    assert code == 1 and 'Traceback' not in text, (module, text[-2000:])
    listed = {line.split(':')[0].strip().replace('[no]', '')
              for line in text.splitlines() if line.startswith('  --')}
    # google-research/federated's names (and the training binaries' for
    # what the data experiments sweep) wherever the flag they name is.
    others = [f'--{alias}' for alias, name in command.OTHER_NAMES.items()
              if f'--{name}' in listed]
    if [f for f in (*flags, *others) if f not in listed]:
      missing[module] = [f for f in (*flags, *others) if f not in listed]
    # --help stays about the binary: absl's and TensorFlow's own flags are
    # in --helpfull.
    assert '--run_with_pdb' not in listed and '--test_srcdir' not in listed
  assert not missing


def test_presets_default_to_cpu_small_and_paper_presets_say_how_long(
    capsys):
  from absl import flags  # pylint: disable=g-import-not-at-top
  from tasks.common import command  # pylint: disable=g-import-not-at-top
  presets = {'paper': {'rounds': 5000}, 'cpu_small': {'rounds': 3}}
  values = flags.FlagValues()
  flags.DEFINE_integer('rounds', 1000, 'Rounds.', flag_values=values)
  command.define_preset_flag(presets, 'Which.', flag_values=values,
                             durations={'paper': 'days (a test)'})
  values(['prog'])
  command.apply_preset(presets, values)
  assert (values.preset, values.rounds) == ('cpu_small', 3)
  assert capsys.readouterr().err == ''
  values(['prog', '--preset=paper', '--rounds=7'])
  command.apply_preset(presets, values)
  assert values.rounds == 7  # A flag given wins.
  assert capsys.readouterr().err == (
      'Note: --preset=paper takes days (a test) on a 2-core CPU; '
      '--preset=cpu_small runs in minutes.\n')


def test_importing_tensorflow_drops_only_its_three_cuda_lines():
  """Without CUDA, TensorFlow 2.14's import prints three ERROR lines
  ("Unable to register cuDNN factory ...") though nothing is wrong: a
  binary (anything importing `tasks`) drops those, and passes on every
  other line TensorFlow writes (here its INFO lines, asked for)."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='0')
  bare = subprocess.run([sys.executable, '-c', 'import tensorflow'],
                        capture_output=True, text=True, env=env, cwd='/',
                        check=True)
  if 'Unable to register' not in bare.stderr:
    pytest.skip('This TensorFlow prints no CUDA lines here (a CUDA machine).')
  assert bare.stderr.count('Unable to register') == 3, bare.stderr
  code = 'import tasks, sys; print("imported", file=sys.stderr)'
  result = subprocess.run([sys.executable, '-c', code], capture_output=True,
                          text=True, env=env, cwd=REPO, check=True)
  assert 'Unable to register' not in result.stderr
  assert 'oneDNN custom operations are on' in result.stderr
  assert result.stderr.rstrip().endswith('imported')
