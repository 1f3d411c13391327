"""Malformed spec files, every kind the trust trial tried (issue 56): each
is one line naming the file and what is wrong, when it is read or (for a
value only the builders know) when its run is built; none is accepted, none
is a traceback. `--spec_json` reads a file through the same
`saved_run.read_spec_file`, and a binary prints these lines as its error."""

import json
import re

import pytest

from tasks.common import run as run_lib
from tasks.common import run_spec
from tasks.common import saved_run
from tasks.common import task_registry

_BASE = json.loads(task_registry.spec('digits', algorithm='fedavg',
                                      rounds=2).to_json())
_ENUM = ('tensorflow_federated.python.learning.client_weight_lib:'
         'ClientWeighting')


def _with(**changes) -> str:
  """The base spec's JSON with `changes` ('run__seed' -> value;
  'run____type__' is run's `__type__`; 'execution__rounds' is in the
  execution written beside the spec)."""
  data = json.loads(json.dumps(_BASE))
  for path, value in changes.items():
    names = path.split('__')
    if path.endswith('____type__'):
      names = path[:-len('____type__')].split('__') + ['__type__']
    *parents, last = names
    place = data if names[0] == 'execution' else data['spec']
    for name in parents:
      place = place[name]
    place[last] = value
  return json.dumps(data)


def _nested(depth):
  return '{"schema": 1, "spec": ' + '[' * depth + ']' * depth + '}'


# name -> (file content, where it is refused, the line's pattern after the
# file's path).
CASES = {
    'empty': ('', 'read', r'does not read: '),
    'not JSON': ('{"schema": 1,', 'read', r'does not read: '),
    'not UTF-8': (b'\xff\xfe garbage', 'read', r'does not read: .*utf-8'),
    'a list': ('[1, 2]', 'read', r'not a run spec: a list'),
    'a newer schema': ('{"schema": 7, "spec": {}}', 'read',
                       r'run spec schema 7: this tff_mixed reads'),
    'no spec': ('{"schema": 1}', 'read', r'not a run spec: its spec is a '
                'NoneType'),
    'a string spec': ('{"schema": 1, "spec": "digits"}', 'read',
                      r'not a run spec: its spec is a str'),
    'a function': (_with(run____type__='os:system'), 'read',
                   r"type 'os:system' is not one a spec holds"),
    "a binary's main": (_with(run____type__='tasks.digits.train:main'),
                        'read', r"no type 'tasks.digits.train:main'"),
    'another dataclass type': (
        _with(run____type__='tasks.common.binary:TrainingMain'), 'read',
        r"no type 'tasks.common.binary:TrainingMain'"),
    'a type name not a string': (_with(run____type__=[1]), 'read',
                                 r'type \[1\] is not one a spec holds'),
    'a bad enum member': (
        _with(algorithm__client_weighting={'__enum__': _ENUM,
                                           'name': 'HEAVY'}),
        'read', r"ClientWeighting has no 'HEAVY'"),
    'a dataclass as an enum': (
        _with(algorithm__client_weighting={
            '__enum__': 'tasks.common.run_config:RunConfig', 'name': 'X'}),
        'read', r'is not an enum'),
    'a list where hparams go': (
        _with(algorithm__adaptive={'__adaptive__': 'adam',
                                   'hparams': [1, 2]}),
        'read', r'an adaptive optimizer is a name and a mapping'),
    'an unknown adaptive optimizer': (
        _with(algorithm__adaptive={'__adaptive__': 'nesterov'}), 'read',
        r'spec\.algorithm\.adaptive: '),
    'deep nesting': (_nested(40), 'read', r'nested deeper than 16 levels'),
    'very deep nesting': (_nested(100000), 'read', r'does not read: '),
    'a huge file': ('{"schema": 1, "pad": "' + 'x' * (1 << 20) + '"}',
                    'read', r'bytes, where a spec is a few thousand'),
    'NaN': (_with(algorithm__client__learning_rate=float('nan')), 'read',
            r'NaN is not a value a spec holds'),
    'a seed in words': (_with(run__seed='three'), 'read',
                        r"spec\.run\.seed is a str 'three', not int"),
    'fractional rounds': (_with(execution__rounds=2.5), 'read',
                          r'spec\.execution\.rounds is a float 2\.5, not '
                          r'int'),
    'a string for a bool': (_with(execution__progress='yes'), 'read',
                            r"spec\.execution\.progress is a str 'yes', "
                            r'not bool'),
    'a run field in the execution': (
        _with(execution__seed=3), 'read',
        r"run spec: execution: Execution has no field 'seed'\.$"),
    'a list for the execution': (
        json.dumps({**json.loads(_with()), 'execution': [1]}), 'read',
        r'not a run spec: its execution is a list, not a mapping\.$'),
    'another type as the execution': (
        _with(execution____type__='tasks.common.run_config:RunConfig'),
        'read', r"execution: 'tasks\.common\.run_config:RunConfig' where an "
        r'Execution goes\.$'),
    'an execution field in the run': (_with(run__rounds=2), 'read',
                                      r"RunConfig has no field 'rounds'"),
    "a schedule's rate in words": (
        _with(algorithm__num_local_steps={
            '__type__': 'tff_mixed.schedules.round_based:ExponentialDecay',
            'initial_value': 10, 'decay_rate': 'fast'}), 'read',
        r"num_local_steps\.decay_rate is a str 'fast', not float"),
    'a built-in function': (_with(run____type__='builtins:print'), 'read',
                            r"type 'builtins:print' is not one a spec holds"),
    'another dataclass in a field': (
        _with(algorithm__client={
            '__type__': 'tff_mixed.metrics.runtime:RuntimeModel'}),
        'read', r'spec\.algorithm\.client is a RuntimeModel'),
    'an unknown field': (_with(run__nope=1), 'read',
                         r"RunConfig has no field 'nope'"),
    'a tuple of a string': (_with(execution__workers={'__tuple__': 'a,b'}),
                            'read',
                            r'a tuple of a str, not a list'),
    'a private key': (_with(task_args={'__secret__': 1}), 'read',
                      r"'__secret__' is not a name a spec writes"),
    'negative clients': (_with(run__clients_per_round=-3), 'read',
                         r'RunConfig\.clients_per_round must be >= 1'),
    'an unknown runtime': (_with(execution__runtime='warp'), 'read',
                           r"Execution\.runtime must be one of"),
    'an unknown non-finite policy': (
        _with(execution__on_non_finite='explode'), 'read',
        r'Execution\.on_non_finite must be one of'),
    'an unknown task': (_with(task='nope'), 'build', r"no task 'nope'"),
    'an unknown task argument': (
        _with(task_args={'bogus': 3}), 'read',
        r"task digits takes no argument 'bogus'"),
    'a bad execution block': (
        json.dumps({**json.loads(_with()), 'execution': {'rounds': '9'},
                    'provenance': {}}), 'read',
        r"execution\.rounds is a str '9', not int"),
    'schema 0, an unknown key': (
        json.dumps({'task': 'digits', 'algorithm': 'fedavg', 'bogus': 3}),
        'read', r"task digits takes no argument 'bogus'"),
    'schema 0, no task': (json.dumps({'algorithm': 'fedavg'}), 'read',
                          r"names its task \('task'\), and this one does "
                          r'not'),
    'an unknown algorithm': (_with(algorithm__algorithm='fedfoo'), 'build',
                             r'^algorithm must be one of'),
    'an unknown optimizer': (_with(algorithm__client__name='adamw2'),
                             'build', r'^optimizer must be one of'),
    'K = 0': (_with(algorithm__num_local_steps=0), 'build',
              r'^num_local_steps must be >= 1, got 0\.$'),
}


@pytest.mark.parametrize('name', sorted(CASES))
def test_a_malformed_spec_file_is_one_line(tmp_path, name):
  content, stage, pattern = CASES[name]
  path = tmp_path / 'spec.json'
  if isinstance(content, bytes):
    path.write_bytes(content)
  else:
    path.write_text(content)
  if stage == 'read':
    with pytest.raises(saved_run.SavedRunError) as raised:
      saved_run.read_spec_file(str(path))
    line = str(raised.value)
    assert line.startswith(f'{path}'), line
  else:
    spec = saved_run.read_spec_file(str(path))
    with pytest.raises(run_lib.ConfigError) as raised:
      run_lib.build(spec)
    line = str(raised.value)
  assert len(line.splitlines()) == 1, line
  assert re.search(pattern, line), line


def test_every_kind_the_trial_tried_is_here():
  """The trial's 34 files, by kind, and those found since."""
  assert len(CASES) >= 34


def test_reading_a_spec_imports_nothing():
  """Type names are looked up among the types imported with run_spec
  (`VALUE_TYPES`), never imported: an import hook sees no import while
  specs naming modules of every allowed package are read."""
  seen = []

  class Recorder:

    def find_spec(self, fullname, path=None, target=None):
      del path, target
      seen.append(fullname)

  import sys  # pylint: disable=g-import-not-at-top
  names = ('tasks.never_a_module:Thing', 'tff_mixed.nor_this:Type',
           'tensorflow_federated.python.nope:Enum', 'pickle:loads')
  sys.meta_path.insert(0, Recorder())
  try:
    for name in names:
      with pytest.raises(ValueError, match=r'^run spec: spec\.run: '):
        run_spec.RunSpec.from_json(_with(run____type__=name))
    assert run_spec.RunSpec.from_json(_with()).task == 'digits'
  finally:
    sys.meta_path.pop(0)
  assert seen == []
  assert 'tasks.never_a_module' not in sys.modules


def test_the_types_a_spec_holds_are_these():
  """Adding a type a spec may hold is a decision: this list changes."""
  assert sorted(run_spec.VALUE_TYPES) == sorted([
      'tasks.common.parts:OptimizerSpec',
      'tasks.common.registry:AlgorithmConfig',
      'tasks.common.run_config:Execution',
      'tasks.common.run_config:RunConfig',
      'tasks.common.run_spec:RunSpec',
      'tensorflow_federated.python.learning.client_weight_lib:'
      'ClientWeighting',
      'tff_mixed.driver.eval_plateau:EvalPlateau',
      'tff_mixed.metrics.runtime:RuntimeModel',
      'tff_mixed.schedules.loss_based:LossRatio',
      'tff_mixed.schedules.loss_based:OnPlateau',
      'tff_mixed.schedules.round_based:Constant',
      'tff_mixed.schedules.round_based:ExponentialDecay',
      'tff_mixed.schedules.round_based:InverseTimeDecay',
      'tff_mixed.schedules.round_based:PowerDecay',
      'tff_mixed.schedules.round_based:Theorem2LearningRate',
      'tff_mixed.templates.client_groups:ClientGroups',
  ])
