"""The one reader of `name=value` (`tasks.common.flag_table`): what it
parses, what it refuses and in which words, and that absl's door (the
table defined in absl's flags, `from_absl`) reads the same values and
refuses with the same line."""

import pathlib

from absl import flags
import numpy as np
import pytest

from tasks.common import flag_table
from tasks.common import task_registry
from tasks.common import task_runs


def _table():
  table = flag_table.Table()
  table.define(flag_table.INTEGER, 'rounds', 5, 'Rounds.', lower_bound=1)
  table.define(flag_table.FLOAT, 'rate', 0.1, 'Rate.', lower_bound=0.0,
               upper_bound=1.0)
  table.define(flag_table.ENUM, 'algorithm', 'fedavg', ['fedavg', 'fedsgd'],
               'Algorithm.')
  table.define(flag_table.BOOL, 'progress', True, 'Progress bar.')
  table.define(flag_table.STRING, 'output_dir', None, 'Where.')
  table.define(flag_table.LIST, 'labels', [], 'Labels.')
  table.alias('total_rounds', 'rounds')
  return table


def test_values_from_text_and_from_python_are_the_same():
  table = _table()
  from_text = table.read(['--rounds=7', '--rate', '0.5', '--noprogress',
                          '--labels=1, 2', '--algorithm=fedsgd'])
  from_python = table.values(dict(rounds=7, rate=0.5, progress=False,
                                  labels=['1', '2'], algorithm='fedsgd'))
  expected = {'rounds': 7, 'rate': 0.5, 'algorithm': 'fedsgd',
              'progress': False, 'output_dir': None, 'labels': ['1', '2']}
  assert from_text.as_dict() == from_python.as_dict() == expected
  assert from_text.given() == from_python.given() == {
      'rounds', 'rate', 'progress', 'labels', 'algorithm'}


def test_defaults_aliases_and_the_last_value_given():
  values = _table().read(['--rounds=2', '--total_rounds=3', '--progress',
                          '--rounds=4'])
  assert (values.rounds, values.progress, values.rate) == (4, True, 0.1)
  assert _table().read(['--rounds=4', '--total_rounds=3']).rounds == 3
  assert values['rounds'].present and not values['rate'].present
  assert values['rate'].default == 0.1
  values['rate'].value = 0.25  # What a preset or a rule does.
  assert values.rate == 0.25 and not values['rate'].present
  # None is not given: the default stays.
  assert _table().values({'rounds': None}).given() == frozenset()


@pytest.mark.parametrize('args, message', [
    (['--rounds=0'], 'flag --rounds=0: must be an integer >= 1.'),
    (['--rounds=2.5'], 'flag --rounds=2.5: must be an integer.'),
    (['--rate=nan'], 'flag --rate=nan: must be a finite number.'),
    (['--rate=1.5'], 'flag --rate=1.5: must be a finite number in [0, 1].'),
    (['--algorithm=sgd'], 'flag --algorithm=sgd: must be one of fedavg, '
     'fedsgd.'),
    (['--progress=maybe'], 'flag --progress=maybe: must be true or false.'),
    (['--nope=1'], "Unknown command line flag 'nope'"),
    (['--norounds'], "Unknown command line flag 'norounds'"),
    (['stray', '--progress', 'false'], 'Unexpected arguments: stray false'),
    (['stray', '--rounds=0'], 'flag --rounds=0: must be an integer >= 1.'),
    (['--rounds'], 'flag --rounds needs a value.'),
])
def test_a_refusal_is_one_line_naming_the_flag(args, message):
  with pytest.raises(flag_table.FlagError) as e:
    _table().read(args)
  assert str(e.value) == message


@pytest.mark.parametrize('arg', ['--rounds=0', '--rate=inf',
                                 '--algorithm=sgd', '--rate=x',
                                 '--progress=maybe'])
def test_absls_door_refuses_with_the_tables_line(arg):
  fv = flags.FlagValues()
  _table().define_absl(fv)
  with pytest.raises(flag_table.FlagError) as table_error:
    _table().read([arg])
  with pytest.raises(flags.IllegalFlagValueError) as absl_error:
    fv(['prog', arg])
  assert str(absl_error.value) == str(table_error.value)


def test_python_values_are_read_as_their_text():
  """A path, numpy's bool, 0 / 1 and a number for a list read as the
  command line's text of them would."""
  values = _table().values(dict(output_dir=pathlib.Path('/tmp/x'),
                                progress=np.bool_(False), labels=5))
  assert (values.output_dir, values.progress, values.labels) == (
      '/tmp/x', False, ['5'])
  assert _table().values(dict(progress=1)).progress is True


def test_an_alias_is_refused_by_its_flags_name_from_both_doors():
  fv = flags.FlagValues()
  _table().define_absl(fv)
  with pytest.raises(flags.IllegalFlagValueError) as absl_error:
    fv(['prog', '--total_rounds=0'])
  with pytest.raises(flag_table.FlagError) as table_error:
    _table().read(['--total_rounds=0'])
  assert str(absl_error.value) == str(table_error.value) == (
      'flag --rounds=0: must be an integer >= 1.')


def test_a_python_value_of_the_wrong_type_is_refused():
  with pytest.raises(flag_table.FlagError,
                     match=r'^flag --rounds=True: must be an integer\.$'):
    _table().values({'rounds': True})
  with pytest.raises(ValueError, match='defined twice'):
    _table().define(flag_table.INTEGER, 'rounds', 1, 'Again.')


# Each task's binary, with flags of every kind it has (and its batch size).
_ARGS = ['--rounds=3', '--client_learning_rate=0.05', '--noprogress',
         '--algorithm=fedprox', '--proximal_strength=0.1', '--total_rounds=4',
         '--seed=2']


@pytest.mark.parametrize('task', task_registry.names())
def test_every_task_reads_the_same_through_absl_and_the_table(task):
  table = task_runs.table(task_registry.runs(task))
  batch = ['--batch_size=4'] if 'batch_size' in table else []
  fv = flags.FlagValues()
  table.define_absl(fv)
  fv(['prog', *_ARGS, *batch])
  through_absl, read = table.from_absl(fv), table.read([*_ARGS, *batch])
  assert through_absl.as_dict() == read.as_dict()
  assert through_absl.given() == read.given() == {
      'rounds', 'client_learning_rate', 'progress', 'algorithm',
      'proximal_strength', 'seed', *(['batch_size'] if batch else [])}
  assert read.rounds == 4 and read.client_learning_rate == 0.05
