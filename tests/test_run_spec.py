"""A run as one value: `RunSpec` to and from JSON, and a run directory's
config.json of flags (schema 0) read as a spec."""

import dataclasses
import json
import os

import numpy as np
import pytest
import tensorflow_federated as tff

from tasks.common import registry
from tasks.common import run_config
from tasks.common import run_spec
from tasks.common import saved_run
from tasks.common import training_flags
from tests import runs
from tff_mixed import schedules
from tff_mixed.templates import client_groups

FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures')
# A run directory of one file, config.json of schema 0 (a digits run's).
FIXTURES_RUN = os.path.join(FIXTURES, 'schema0_runs', 'digits_decaying_k')

# Flag sets covering every kind of value a spec holds: each algorithm of the
# registry, round and loss schedules, DP, seed 003's optimizers, evaluation
# plateaus, faithful mode and the runtime.
FLAG_SETS = {
    **{name: {'algorithm': name} for name in registry.NAMES},
    'fedprox': {'algorithm': 'fedprox', 'proximal_strength': 0.01},
    'schedules': {'k_schedule': 'exponential', 'k_decay_rate': 0.5,
                  'client_lr_schedule': 'on_plateau',
                  'client_lr_patience': 3},
    'dp': {'aggregator': 'dp', 'clip': 0.1, 'noise_multiplier': 1.0,
           'client_groups': 0},
    'adaptive_adam': {'algorithm': 'fed_gbo', 'optimizer': 'adam',
                      'beta_1': 0.8},
    'dataset_size_weighting': {'client_weighting': 'dataset_size'},
    'weighting_and_runtime': {'client_weighting': 'uniform',
                              'runtime': 'tff', 'group_mode': 'sequential'},
    'plateaus': {'eval_every': 2, 'k_schedule': 'on_plateau',
                 'k_monitor': 'eval/loss', 'k_patience': 2},
}


def _spec(flags_set):
  algorithm, run, execution = training_flags.config_from_values(flags_set)
  return run_spec.RunSpec(task='digits', task_args={'num_clients': 20},
                          algorithm=algorithm, run=run, execution=execution)


@pytest.mark.parametrize('name', sorted(FLAG_SETS))
def test_a_spec_reads_back_what_it_wrote(name):
  spec = _spec(FLAG_SETS[name])
  text = spec.to_json()
  back = run_spec.RunSpec.from_json(text)
  assert back.to_json() == text
  if spec.algorithm.adaptive is None:  # Seed 003's optimizers hold functions.
    assert back == spec
  assert json.loads(text)['schema'] == run_spec.SCHEMA


def test_a_config_json_of_flags_is_schema_0():
  """A digits run's config.json as the binaries write it today reads as
  the spec its flags say."""
  spec = saved_run.read_spec(FIXTURES_RUN)
  assert spec.task == 'digits'
  assert spec.task_args == {
      'batch_size': 10, 'central_batch_size': 10, 'client_labels': [],
      'dirichlet_alpha': 0.5, 'hidden_units': 32, 'num_clients': 100,
      'validation_fraction': 0.0}
  assert spec.algorithm.num_local_steps == schedules.exponential_decay(10,
                                                                       0.5)
  assert spec.algorithm.client == registry.OptimizerSpec(learning_rate=0.1)
  assert spec.execution.client_groups == client_groups.ClientGroups(2)
  assert (spec.run.seed, spec.run.clients_per_round) == (0, 2)
  algorithm, run, execution = training_flags.config_from_values(
      k_schedule='exponential', k_decay_rate=0.5, clients_per_round=2)
  assert spec.algorithm == algorithm
  assert spec.run == run
  assert spec.execution == dataclasses.replace(execution, output_dir=None)
  again = run_spec.RunSpec.from_json(spec.to_json())
  assert again == spec


def test_a_record_from_before_a_task_argument_reads_as_it_ran(tmp_path):
  """Sent140's `vocabulary` arrived after runs were recorded: a record
  without it (schema 1 or 0) is read with 'train', the vocabulary those
  runs used, so resuming one does not silently change its inputs; a spec
  of one's own without it takes today's default."""
  spec = run_spec.RunSpec('sent140', run=run_config.RunConfig(seed=3))
  record = run_spec.record(spec)
  assert record['spec']['task_args']['vocabulary'] == 'all'
  del record['spec']['task_args']['vocabulary']
  record['provenance'] = {}
  (tmp_path / 'config.json').write_text(json.dumps(record))
  old = saved_run.read_spec(str(tmp_path))
  assert old.task_args['vocabulary'] == 'train'
  assert run_spec.difference(old, spec) == (
      'spec.task_args.vocabulary', 'train', 'all')
  (tmp_path / 'config.json').write_text(json.dumps(
      {'task': 'sent140', 'algorithm': 'fedavg', 'model': 'linear'}))
  assert saved_run.read_spec(str(tmp_path)).task_args == {
      'model': 'linear', 'vocabulary': 'train'}
  (tmp_path / 'spec.json').write_text(spec.to_json())
  mine = saved_run.read_spec_file(str(tmp_path / 'spec.json'))
  assert 'vocabulary' not in mine.task_args
  assert run_spec.difference(mine, spec) is None


@pytest.mark.parametrize('text, message', [
    ('[1]', r'^not a run spec: a list, not a JSON object\.$'),
    ('{', r'^not a run spec: not JSON \('),
    ('{"schema": 7, "spec": {}}', r'^run spec schema 7: this tff_mixed reads '
     r'schemas 0 to 3; a newer one needs a newer tff_mixed\.$'),
    ('{"schema": 1, "spec": {"__type__": "os:system"}}',
     r"^run spec: spec: type 'os:system' is not one a spec holds"),
    ('{"schema": 1, "spec": {"__type__": "tasks.common.run_spec:Nothing"}}',
     r"^run spec: spec: no type 'tasks.common.run_spec:Nothing' in this "
     r'tff_mixed\.$'),
    ('{"algorithm": "fedavg"}', r"^a config.json of flag values \(schema "
     r"0\), not a spec: read a run directory's with "
     r"tasks.common.saved_run.read_spec\.$"),
])
def test_what_is_not_a_spec_is_one_line(text, message):
  with pytest.raises(ValueError, match=message):
    run_spec.RunSpec.from_json(text)


@pytest.mark.parametrize('text, message', [
    ('{"algorithm": "fedavg"}', r"not a run spec: a config.json of flags "
     r"names its task \('task'\), and this one does not\.$"),
    ('{"task": "digits", "num_local_steps": 0}',
     r"config.json of task 'digits': flag --num_local_steps=0: "),
    ('[1]', r'not a run spec: a list, not a JSON object\.$'),
])
def test_a_config_json_that_is_not_a_run_is_one_line(tmp_path, text,
                                                     message):
  (tmp_path / 'config.json').write_text(text)
  with pytest.raises(saved_run.SavedRunError,
                     match=f'^{tmp_path}/config.json: ' + message):
    saved_run.read_spec(str(tmp_path))


def test_a_value_a_spec_cannot_write_is_named():
  spec = dataclasses.replace(
      _spec({}), task_args={'preprocess': len})
  with pytest.raises(TypeError, match=(
      r'^spec\.task_args\.preprocess is a builtin_function_or_method, which '
      r'a run spec cannot write \(')):
    spec.to_json()


def test_a_part_of_your_own_is_written_by_its_type():
  own = tff.learning.optimizers.build_sgdm(0.1)
  spec = dataclasses.replace(_spec({}), algorithm=dataclasses.replace(
      _spec({}).algorithm, client=own))
  written = json.loads(spec.to_json())['spec']['algorithm']['client']
  assert written == {'__code_only__': f'{type(own).__module__}.'
                                      f'{type(own).__name__}'}


def test_an_argument_the_task_has_not_is_named_with_the_file(tmp_path):
  """Schema 0 or 1: a task argument the task does not take is refused as
  the file is read, naming it (not later, when the task is built)."""
  spec = run_spec.RunSpec('digits', task_args={'num_clients': 20})
  data = json.loads(spec.to_json())
  data['spec']['task_args']['bogus'] = 3
  for name, content in (
      ('schema0.json', {'task': 'digits', 'algorithm': 'fedavg', 'bogus': 3}),
      ('schema1.json', data)):
    path = tmp_path / name
    path.write_text(json.dumps(content))
    with pytest.raises(saved_run.SavedRunError, match=(
        f"^{path}: task digits takes no argument 'bogus' \\(it takes "
        'num_clients, ')):
      saved_run.read_spec_file(str(path))


def test_what_a_resume_compares_includes_every_value_of_the_run():
  """Found by mutation: a difference that skipped the client learning
  rate let a run resume at 0.5 with config.json saying 0.1."""
  spec = run_spec.RunSpec('digits')
  for path, changed in (
      ('spec.algorithm.client.learning_rate', dataclasses.replace(
          spec, algorithm=dataclasses.replace(
              spec.algorithm, client=dataclasses.replace(
                  spec.algorithm.client, learning_rate=0.5)))),
      ('spec.algorithm.num_local_steps', dataclasses.replace(
          spec, algorithm=dataclasses.replace(spec.algorithm,
                                              num_local_steps=3))),
      ('spec.run.seed', dataclasses.replace(
          spec, run=dataclasses.replace(spec.run, seed=4))),
      ('spec.task_args.num_clients', dataclasses.replace(
          spec, task_args={'num_clients': 7}))):
    assert run_spec.difference(spec, changed)[0] == path
  # What says how the run executes is not compared.
  assert run_spec.difference(spec, dataclasses.replace(
      spec, execution=dataclasses.replace(spec.execution, rounds=5,
                                          runtime='tff'))) is None


def test_a_schema0_oracle_run_reads_as_its_task():
  """Found by mutation: the oracle's config.json of flags names its pooled
  task (`digits_oracle`); read, the spec is the task's own, oracle run."""
  spec = training_flags.spec_from_flag_record(
      {'task': 'digits_oracle', 'algorithm': 'oracle'})
  assert (spec.task, spec.algorithm.algorithm) == ('digits', 'oracle')
  spec = training_flags.spec_from_flag_record(
      {'task': 'digits_oracle', 'algorithm': 'fedavg'})
  assert spec.task == 'digits_oracle'  # Only the oracle's name is mapped.


@pytest.mark.parametrize('value', ['vectorised', 0, -1, True, 2.5])
def test_a_group_count_that_is_not_one_is_refused(value):
  """Found by mutation: `ClientGroups('vectorised')` or `(0)` was taken."""
  with pytest.raises(ValueError, match=r'^ClientGroups\.count must be an int '
                     r'>= 1'):
    client_groups.ClientGroups(value)


def test_a_schema1_run_reads_as_it_ran_and_resumes(tmp_path):
  """Schema 1 wrote how a run executes inside its spec, at placeholders (100
  rounds, every 10, in process), with the rounds, cadences and runtime it
  last ran with in a partial "execution" beside it: read, it is the run as
  it ran, and the same run resumes there, its execution recorded as today
  (the spec part kept as it was written)."""
  from tasks.common import run as run_lib  # pylint: disable=g-import-not-at-top
  from tasks.common import task_registry  # pylint: disable=g-import-not-at-top
  out = tmp_path / 'run'
  spec = task_registry.spec('quadratic', rounds=2, eval_every=1,
                            clients_per_round=2, progress=False,
                            output_dir=str(out))
  run_lib.run(spec)
  assert json.loads((out / 'config.json').read_text())['schema'] == 3
  old = runs.write_as_schema1(out)
  assert old['spec']['run']['rounds'] == 100  # A placeholder.
  assert old['execution'] == {
      'rounds': 2, 'eval_every': 1,
      'checkpoint_every': spec.execution.checkpoint_every,
      'runtime': 'in_process'}
  read = saved_run.read_spec(str(out))
  assert (read.execution.rounds, read.execution.eval_every,
          read.execution.runtime) == (2, 1, 'in_process')
  assert read.execution.progress  # Schema 1 did not record it: the default.
  assert run_spec.difference(read, spec) is None
  longer = dataclasses.replace(spec, execution=dataclasses.replace(
      spec.execution, rounds=3))
  result = run_lib.run(longer)
  assert [int(r['round']) for r in result.history] == [1, 2, 3]
  resumed = json.loads((out / 'config.json').read_text())
  assert (resumed['schema'], resumed['spec']) == (1, old['spec'])
  assert resumed['execution'] == run_spec.execution_record(longer)
  again = saved_run.read_spec(str(out))
  assert again.run == longer.run
  assert again.execution == dataclasses.replace(longer.execution,
                                                output_dir=None)


@pytest.mark.parametrize('name', ['plateaus', 'weighting_and_runtime', 'dp'])
def test_a_schema2_spec_reads_as_it_was_written(name):
  """Schema 2 held the execution in `registry.RunConfig` and wrote it
  beside the spec, but fast mode in the spec, and `eval_every` too when
  plateaus drive a schedule: read, it is the same spec."""
  spec = _spec(FLAG_SETS[name])
  data = json.loads(spec.to_json())
  data['schema'] = 2
  data['spec']['run']['__type__'] = 'tasks.common.registry:RunConfig'
  data['spec']['run']['client_groups'] = data['execution'].pop(
      'client_groups')
  if spec.run.eval_plateaus:
    data['spec']['run']['eval_every'] = data['execution'].pop('eval_every')
  assert run_spec.RunSpec.from_json(json.dumps(data)) == spec
  assert spec.execution.eval_every == (2 if name == 'plateaus' else 10)


def test_a_directory_of_a_task_this_process_has_not_is_another_run(
    tmp_path):
  """A config.json naming a task registered elsewhere (in code, in another
  process) is another run there: one line naming the task, not an error
  about the unknown task."""
  from tasks.common import run as run_lib  # pylint: disable=g-import-not-at-top
  from tff_mixed import driver  # pylint: disable=g-import-not-at-top
  spec = run_spec.RunSpec('quadratic', execution=run_config.Execution(
      output_dir=str(tmp_path)))
  record = run_spec.record(spec)
  record['spec']['task'] = 'mytask'
  (tmp_path / 'config.json').write_text(json.dumps(record))
  with pytest.raises(driver.OutputDirError, match=(
      r"^output_dir .* holds a run with a different configuration "
      r"\(spec.task: 'mytask' there, 'quadratic' now\); choose another "
      r'output_dir or delete it\.$')):
    run_lib.record_of(spec)


@pytest.mark.parametrize('algorithm, values, first, then', [
    ('fedavg', dict(aggregator='dp', clip=0.5, noise_multiplier=0.5), 0, 2),
    ('fed_gbo', {}, 2, 0)],
    ids=['dp_faithful_to_fast', 'fed_gbo_fast_to_faithful'])
def test_a_run_resumes_in_the_other_mode_to_the_same_model(
    tmp_path, algorithm, values, first, then):
  """Fast mode is how a run executes (`Execution.client_groups`), not what
  it trains: a run of two rounds in one mode, resumed in the other for a
  third, ends at the model of three rounds in the first (to float rounding:
  the clients' sums are taken in another order), and its record says the
  mode it last ran in."""
  from tasks.common import run as run_lib  # pylint: disable=g-import-not-at-top
  from tasks.common import task_registry  # pylint: disable=g-import-not-at-top

  def spec(out, rounds, groups):
    return task_registry.spec(
        'digits', algorithm=algorithm, **values, rounds=rounds, eval_every=1,
        clients_per_round=4, num_local_steps=2, client_groups=groups,
        progress=False, output_dir=str(out))

  run_lib.run(spec(tmp_path / 'switched', 2, first))
  switched = run_lib.run(spec(tmp_path / 'switched', 3, then))
  alone = run_lib.run(spec(tmp_path / 'alone', 3, first))
  assert switched.resumed_from == 2
  assert [int(r['round']) for r in switched.history] == [1, 2, 3]
  for a, b in zip(switched.process.get_model_weights(switched.state).trainable,
                  alone.process.get_model_weights(alone.state).trainable,
                  strict=True):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
  assert saved_run.read_spec(str(tmp_path / 'switched')).execution == (
      dataclasses.replace(spec('', 3, then).execution, output_dir=None))
