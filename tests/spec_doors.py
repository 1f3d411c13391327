"""One task's runs read through both doors, for tests/test_task_runs.py.

  python -m tests.spec_doors TASK

Imports `tasks.TASK.train` (its flags are absl's global ones: one binary a
process) and, for every registry algorithm with and without `--rounds` and
`--seed`, and for each preset, reads the same values as the binary's `main`
reads them (absl's global `FLAGS` parsed, then `main._from_flags()`), as its
`main.spec_of` does (a fresh `FlagValues`) and as `task_registry.spec`
does; prints one JSON line a case: `{"args", "binary", "spec_of", "spec"}`,
each the spec's JSON or `"refused: <line>"`.
"""

import contextlib
import dataclasses
import importlib
import io
import json
import sys

from absl import app
from absl import flags
from absl.testing import flagsaver

from tasks.common import registry
from tasks.common import synthetic_data
from tasks.common import task_registry

OUTPUT_DIR = '/tmp/spec_doors_never_written'


def _values(args):
  """The flags' values as a Python caller gives them: numbers as numbers,
  true as True."""
  values = {}
  for arg in args:
    name, text = arg[2:].split('=', 1)
    value = text
    if text in ('true', 'false'):
      value = text == 'true'
    else:
      for kind in (int, float):
        try:
          value = kind(text)
          break
        except ValueError:
          pass
    values[name] = value
  return values


def _as_main_reads(binary, args):
  """The run `binary.main` reads from the command line `args`: absl's
  global flags parsed, then read (what `main` does before it runs)."""
  with flagsaver.flagsaver():
    rest = flags.FLAGS([binary.__name__, *args])
    if len(rest) > 1:
      raise app.UsageError(f'Unexpected arguments: {" ".join(rest[1:])}')
    spec, probe = binary.main._from_flags()  # pylint: disable=protected-access
  assert probe is None
  return spec


def _refused_or_json(read, *args):
  try:
    return read(*args).to_json()
  except (flags.Error, app.UsageError, task_registry.TaskSpecError) as e:
    return f'refused: {str(e).splitlines()[0]}'


def _cases(task):
  cases = []
  for algorithm in registry.NAMES:
    for extra in ([], ['--rounds=7', '--seed=3']):
      cases.append([f'--algorithm={algorithm}', *extra])
  for preset in task_registry.runs(task).presets or {}:
    cases.append([f'--preset={preset}', '--algorithm=fedavg'])
  # Refusals: a flag's bound, a data directory beside synthetic data, a
  # task's own rule.
  cases.append(['--algorithm=fedavg', '--clients_per_round=0'])
  for name in synthetic_data.synthetic_data_flags(task):
    cases.append(['--use_synthetic_data=true', f'--{name}=/data'])
  cases += _TASK_CASES.get(task, [])
  return cases


_TASK_CASES = {
    'digits': [['--clients_per_round=20', '--num_clients=10']],
    'movielens': [['--algorithm=parallel_training', '--runtime=in_process'],
                  ['--algorithm=parallel_training', '--k_schedule=linear']],
    'stackoverflow_wiki': [['--algorithm=two_way_gradient_transfer',
                            '--client_learning_rate=0.5']],
}


def main(argv):
  task = argv[1]
  binary = importlib.import_module(f'tasks.{task}.train')
  with contextlib.redirect_stderr(io.StringIO()):  # Presets' notes.
    for args in _cases(task):
      given = [*args, f'--output_dir={OUTPUT_DIR}']
      print(json.dumps({
          'args': args,
          'binary': _refused_or_json(_as_main_reads, binary, given),
          'spec_of': _refused_or_json(binary.main.spec_of, given),
          'spec': _refused_or_json(
              lambda: task_registry.spec(task, **_values(args),
                                         output_dir=OUTPUT_DIR))}))
    # Without an output directory: a spec all the same, with none.
    args = ['--algorithm=fedavg', '--rounds=2']
    main_read = _as_main_reads(binary, [*args, f'--output_dir={OUTPUT_DIR}'])
    print(json.dumps({
        'args': [*args, '(no --output_dir)'],
        'binary': dataclasses.replace(
            main_read, execution=dataclasses.replace(
                main_read.execution, output_dir=None)).to_json(),
        'spec_of': binary.main.spec_of(args).to_json(),
        'spec': task_registry.spec(task, **_values(args)).to_json()}))


if __name__ == '__main__':
  main(sys.argv)
