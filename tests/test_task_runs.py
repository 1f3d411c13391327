"""One run from every door: `task_registry.spec(task, **values)` is the run
the task's binary reads from the same flags (tasks.common.task_runs)."""

import dataclasses
import json

import pytest

from tasks.common import task_registry
from tests import binaries


@pytest.mark.parametrize('task', sorted(task_registry.names()))
def test_the_binary_and_task_registry_spec_read_the_same_run(task):
  """Every registry algorithm, with and without --rounds and --seed, each
  preset, refusals (a flag's bound, a data directory beside synthetic data,
  the task's own rules) and a run without an output directory: the
  binary's `main` (absl's global flags), its `main.spec_of` (a fresh
  `FlagValues`, as the grid runner reads a run) and `task_registry.spec`
  give the same spec, or refuse with the same line (tests/spec_doors.py, in
  a process of the binary's own)."""
  result = binaries.run('tests.spec_doors', task)
  assert result.returncode == 0, result.stderr[-2000:]
  cases = [json.loads(line) for line in result.stdout.splitlines()]
  assert len(cases) >= 23, len(cases)  # 11 algorithms x 2, and more.
  for case in cases:
    assert case['spec'] == case['binary'] == case['spec_of'], case['args']
  specs = [c for c in cases if c['binary'].startswith('{')]
  refused = [c for c in cases if c['binary'].startswith('refused: ')]
  assert len(specs) + len(refused) == len(cases)
  assert len(specs) >= 20 and refused  # Both kinds were compared.
  # `main.spec_of` needs no output directory (the last case gives none).
  unplaced = json.loads(cases[-1]['binary'])['execution']
  assert cases[-1]['args'][-1] == '(no --output_dir)'
  assert (unplaced['output_dir'], unplaced['rounds']) == (None, 2)


def test_a_task_spec_is_its_papers_run():
  """The run the issue found two ways apart: 2-way GT on Stack Overflow +
  Wikipedia is the binary's paper setting (K = 16, w = 0.73 / 0.27) with
  its per-algorithm rules (client rate 1.0; central batch 800 under
  --preset=paper, the cpu_small preset's 32 by default)."""
  small = task_registry.spec('stackoverflow_wiki',
                             algorithm='two_way_gradient_transfer')
  paper = task_registry.spec('stackoverflow_wiki',
                             algorithm='two_way_gradient_transfer',
                             preset='paper', rounds=20)
  for spec in (small, paper):
    assert spec.algorithm.num_local_steps == 16
    assert spec.algorithm.client.learning_rate == 1.0
    assert (spec.algorithm.federated_weight,
            spec.algorithm.central_weight) == (0.73, 0.27)
    assert spec.execution.output_dir is None
  assert small.task_args['central_batch_size'] == 32
  assert (small.execution.rounds, small.run.clients_per_round) == (5, 4)
  assert paper.task_args['central_batch_size'] == 800
  assert (paper.execution.rounds, paper.run.clients_per_round) == (20, 100)
  given = task_registry.spec('stackoverflow_wiki', preset='paper',
                             algorithm='two_way_gradient_transfer',
                             client_learning_rate=0.5, central_batch_size=64)
  assert given.algorithm.client.learning_rate == 0.5
  assert given.task_args['central_batch_size'] == 64


@pytest.mark.parametrize('values, line', [
    (dict(task='nope'), r"^no task 'nope'; the tasks are "),
    (dict(task='digits', nope=1), r'^task digits has no flag --nope\.$'),
    (dict(task='digits', preset='paper'),
     r'^--preset: task digits has no presets\.$'),
    (dict(task='celeba', preset='big'),
     r"^flag --preset=big: must be one of paper, cpu_small\.$"),
    (dict(task='digits', rounds=0),
     r'^flag --rounds=0: must be an integer >= 1\.$'),
    (dict(task='digits', clients_per_round=20, num_clients=10),
     r'^--clients_per_round must not exceed --num_clients\.$'),
    (dict(task='digits', client_labels='1,01'),
     r'^--client_labels must be distinct digits 0-9, not all ten; got '
     r'1,01\.$'),
    (dict(task='digits', client_labels=list(range(10))),
     r'^--client_labels must be distinct digits 0-9, not all ten; got '),
])
def test_a_spec_that_cannot_be_is_refused_in_one_line(values, line):
  task = values.pop('task')
  with pytest.raises(task_registry.TaskSpecError, match=line) as raised:
    task_registry.spec(task, **values)
  assert len(str(raised.value).splitlines()) == 1


def test_a_spec_files_repeated_label_is_refused_when_it_is_built():
  """`task_args` written by hand (a spec file, code) are checked as the
  flags are: a label twice is not a skew of two digits."""
  from tasks.common import run as run_lib  # pylint: disable=g-import-not-at-top
  spec = dataclasses.replace(task_registry.spec('digits'), task_args={
      **task_registry.spec('digits').task_args, 'client_labels': ['1', '1']})
  with pytest.raises(run_lib.ConfigError,
                     match=r'^--client_labels must be distinct digits 0-9, '
                     r'not all ten; got 1,1\.$'):
    run_lib.build_task(spec)


def test_a_run_from_python_resumes_from_its_binary_and_back(tmp_path):
  """Two rounds started from `run(task_registry.spec(...))` with a task
  argument given as a tuple (as Python holds it) resume for a third from
  the binary's flags (which hold a list), and a run the binary started
  resumes from Python: the same values are the same run whatever their
  container (`run_spec.difference`)."""
  from tasks.common import run as run_lib  # pylint: disable=g-import-not-at-top
  from tasks.common import run_spec  # pylint: disable=g-import-not-at-top
  from tasks.common import saved_run  # pylint: disable=g-import-not-at-top
  flags = dict(algorithm='fedavg', num_clients=20, clients_per_round=3,
               eval_every=1, checkpoint_every=1)
  args = [f'--{k}={v}' for k, v in flags.items()]
  python_first, binary_first = tmp_path / 'python', tmp_path / 'binary'
  spec = task_registry.spec('digits', **flags, rounds=2, progress=False,
                            output_dir=str(python_first))
  spec = dataclasses.replace(spec, task_args={**spec.task_args,
                                              'client_labels': ()})
  assert run_spec.difference(spec, task_registry.spec(
      'digits', **flags, output_dir=str(python_first))) is None
  run_lib.run(spec)
  # The record is the run: what ran, read back.
  for read in (saved_run.read_spec(str(python_first)),
               run_spec.RunSpec.from_json(
                   (python_first / 'config.json').read_text())):
    assert (read.execution.rounds, read.execution.eval_every,
            read.execution.checkpoint_every,
            read.execution.runtime) == (2, 1, 1, 'in_process')
    assert run_spec.difference(read, spec) is None
  resumed = binaries.run('tasks.digits.train', *args, '--rounds=3',
                         '--noprogress', f'--output_dir={python_first}')
  assert resumed.returncode == 0, resumed.stderr[-1500:]
  assert 'resuming from the checkpoint of round 2 of 3' in resumed.stderr
  assert 'digits: round 3 (resumed from round 2) done in ' in resumed.stdout
  assert saved_run.read_spec(str(python_first)).execution.rounds == 3
  started = binaries.run('tasks.digits.train', *args, '--rounds=2',
                         f'--output_dir={binary_first}')
  assert started.returncode == 0, started.stderr[-1500:]
  assert 'digits fedavg: 100%' in started.stderr  # The bar names both.
  result = run_lib.run(task_registry.spec(
      'digits', **flags, rounds=3, progress=False,
      output_dir=str(binary_first)))
  assert result.resumed_from == 2
  binaries.assert_same_metrics(python_first / 'metrics.csv',
                               binary_first / 'metrics.csv')
  # A value that differs is still a different run, named.
  other = dataclasses.replace(spec, task_args={**spec.task_args,
                                               'client_labels': ('1',)})
  assert run_spec.difference(spec, other) == (
      'spec.task_args.client_labels', [], ['1'])
