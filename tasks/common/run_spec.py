"""A run as one value: `RunSpec`, written to and read from JSON.

A run is a task (a name and the arguments its `create_task` takes), an
algorithm (`registry.AlgorithmConfig`) and how it runs
(`registry.RunConfig`). `RunSpec.to_json` writes the three as plain JSON
with a `schema` version; `RunSpec.from_json` reads any schema this module
knows, migrating older ones. Schema 0 is what every run directory's
config.json held before specs: the binary's flag values by name, which the
flags read as a spec (`tasks.common.training_flags.spec_from_flag_record`),
so every existing run can be described as a spec.

Values are written by type: numbers, strings, lists and mappings as
themselves; frozen dataclasses (schedules, optimizer specs, the runtime
model, fast mode, ...) and enums (`tff.learning.ClientWeighting`) with
their type's name; seed 003's optimizers (`tff_mixed.optimizers`) by name
and hyper-parameters. A type from outside `tff_mixed`, `tasks` and TFF is
never imported on reading, and a value of a type that cannot be written (a
function, a `tff.learning` optimizer object) is refused in one line naming
where it is.
"""

import dataclasses
import enum
import importlib
import json
from collections.abc import Mapping
from typing import Any, Optional

from tasks.common import parts
from tasks.common import registry
from tasks.common import task_registry
from tff_mixed import checks
from tff_mixed import optimizers
from tff_mixed.driver import config_file
from tff_mixed.templates import client_groups

SCHEMA = 1
# Where a written type may come from (what reading may import).
_MODULES = ('tff_mixed.', 'tasks.', 'tensorflow_federated.')


@dataclasses.dataclass(frozen=True)
class RunSpec:
  """One run: task, algorithm and run configuration.

  Attributes:
    task: The task's name (`Task.name`, e.g. 'digits').
    task_args: The keyword arguments of the task's `create_task` (JSON
      values: the data directory, the model's name, the batch size, ...).
    algorithm: What is trained (`registry.AlgorithmConfig`).
    run: How (`registry.RunConfig`: seed, rounds, cohort, fast mode,
      runtime, ...).
  """
  task: str
  task_args: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  algorithm: registry.AlgorithmConfig = registry.AlgorithmConfig()
  run: registry.RunConfig = registry.RunConfig()

  def to_json(self) -> str:
    """The spec as JSON text, with its `schema`."""
    return json.dumps({'schema': SCHEMA, 'spec': _encode(self, 'spec')},
                      indent=2, sort_keys=True, allow_nan=False)

  @classmethod
  def from_json(cls, text: str) -> 'RunSpec':
    """The spec `text` holds (`to_json`'s JSON, of any schema from 1).

    Schema 0, a run directory's config.json of flag values, is the flags'
    to read (`tasks.common.training_flags.spec_from_flag_record`);
    `tasks.common.saved_run.read_spec` reads a run directory's config.json
    of any schema.

    Raises:
      ValueError: In one line, for text that is not a spec of a schema
        this module reads.
    """
    try:
      data = json.loads(text)
    except ValueError as e:
      raise ValueError(f'not a run spec: not JSON ({e}).') from None
    if not isinstance(data, dict):
      raise ValueError(f'not a run spec: {checks.a_kind(data)}, not a JSON '
                       'object.')
    schema = data.get('schema', 0)
    if schema == 0:
      raise ValueError(
          'a config.json of flag values (schema 0), not a spec: read a run '
          "directory's with tasks.common.saved_run.read_spec.")
    if schema != SCHEMA:
      raise ValueError(f'run spec schema {schema!r}: this tff_mixed reads '
                       f'schemas 0 to {SCHEMA}; a newer one needs a newer '
                       'tff_mixed.')
    spec = _decode(data.get('spec'), 'spec')
    if not isinstance(spec, cls):
      raise ValueError(f'not a run spec: its spec is {checks.a_kind(spec)}.')
    return dataclasses.replace(spec, run=executed(spec.run, data))


# `RunConfig` fields that say how a run executes, not what it trains: a
# restart may change them, so config.json does not record them.
EXECUTION = ('rounds', 'output_dir', 'eval_every', 'checkpoint_every',
             'progress', 'on_non_finite', 'runtime_model', 'runtime',
             'local_workers', 'workers', 'concurrency', 'ray_workers',
             'ray_address', 'ray_gpus_per_worker')


def executed(run, record: dict):
  """`run` (a `RunConfig`) with how the run was last started, where
  `record` is a run directory's config.json: its "execution" block (the
  rounds asked for, the cadences, the runtime), which the spec's record
  holds at defaults (`EXECUTION`).

  Raises:
    ValueError: One line, for an execution block that is not one.
  """
  block = record.get('execution')
  if block is None:
    return run
  names = {f.name for f in dataclasses.fields(run)}
  if not isinstance(block, dict) or not set(block) <= names & set(
      EXECUTION):
    raise ValueError("not a run's config.json: its execution is "
                     f'{checks.a_kind(block)}, not how a run was started.')
  try:
    return dataclasses.replace(run, **block)
  except (TypeError, ValueError) as e:
    raise ValueError(f"a run's config.json, execution: "
                     f'{str(e).splitlines()[0]}') from None


# Task arguments that say where the data is, not which data: recorded (a
# saved run is rebuilt from them) but not compared on resume.
LOCATION = ('data_dir', 'cache_dir', 'download')


def recorded(spec: RunSpec) -> RunSpec:
  """`spec` as config.json records it: its task's arguments complete (the
  task's defaults for those not given), and neither its execution
  (`EXECUTION`; `eval_every` is kept when an evaluation drives a schedule,
  since it then changes training) nor how a fast-mode group trains (its
  mode: the same model to float rounding) but at their defaults."""
  defaults = registry.RunConfig()
  kept = ('eval_every',) if spec.run.eval_plateaus else ()
  run = dataclasses.replace(spec.run, **{
      name: getattr(defaults, name) for name in EXECUTION
      if name not in kept})
  if run.client_groups is not None:
    run = dataclasses.replace(run, client_groups=client_groups.ClientGroups(
        run.client_groups.count))
  return dataclasses.replace(
      spec, task_args={**task_registry.defaults(spec.task), **spec.task_args},
      run=run)


def record(spec: RunSpec) -> dict[str, Any]:
  """What config.json records of `spec` (schema 1): `recorded(spec)`. A
  part given in code is recorded by its type (`code-only`): a restart must
  pass the same again, and `saved_run` cannot rebuild it by name."""
  return {'schema': SCHEMA, 'spec': _encode(recorded(spec), 'spec')}


def difference(there: RunSpec, now: RunSpec) -> Optional[tuple[str, Any, Any]]:
  """The first difference between two specs as runs (their records, where
  the data is aside: `LOCATION`): `(path, value there, value now)` with
  `path` such as 'spec.algorithm.client.learning_rate', or None for the
  same run."""

  def compared(spec):
    spec = dataclasses.replace(spec, task_args={
        k: v for k, v in spec.task_args.items() if k not in LOCATION})
    return _sequences_alike(json.loads(json.dumps(record(spec)['spec'])))

  return config_file.first_difference(compared(there), compared(now),
                                      'spec')


def _sequences_alike(data):
  """Recorded JSON with each tuple as the list of its items: equal values
  compare equal whatever their container (a spec from Python holds a
  tuple where a binary's list flag holds a list)."""
  if isinstance(data, dict):
    if set(data) == {'__tuple__'}:
      return [_sequences_alike(v) for v in data['__tuple__']]
    return {k: _sequences_alike(v) for k, v in data.items()}
  if isinstance(data, list):
    return [_sequences_alike(v) for v in data]
  return data


# ------------------------------------------------------------------ values
def _type_name(cls) -> str:
  return f'{cls.__module__}:{cls.__qualname__}'


def _encode(value, where: str):
  """`value` as JSON data; `where` names it in errors."""
  if value is None or isinstance(value, (bool, int, float, str)):
    return value
  if isinstance(value, enum.Enum):
    return {'__enum__': _type_name(type(value)), 'name': value.name}
  if parts.is_code_only(value):  # Recorded by type; not rebuilt by name.
    return {'__code_only__': f'{type(value).__module__}.'
                             f'{type(value).__name__}'}
  if isinstance(value, optimizers.AdaptiveOptimizer):
    return {'__adaptive__': value.name,
            'hparams': _encode(dict(value.hparams), f'{where}.hparams')}
  if dataclasses.is_dataclass(value) and not isinstance(value, type):
    encoded = {'__type__': _type_name(type(value))}
    for field in dataclasses.fields(value):
      if field.init:
        encoded[field.name] = _encode(getattr(value, field.name),
                                      f'{where}.{field.name}')
    return encoded
  if isinstance(value, tuple):
    return {'__tuple__': [_encode(v, f'{where}[{i}]')
                          for i, v in enumerate(value)]}
  if isinstance(value, list):
    return [_encode(v, f'{where}[{i}]') for i, v in enumerate(value)]
  if isinstance(value, Mapping) and all(
      isinstance(k, str) and not k.startswith('__') for k in value):
    return {k: _encode(v, f'{where}.{k}') for k, v in value.items()}
  raise TypeError(
      f'{where} is {checks.a_kind(value)}, which a run spec cannot write '
      '(a spec holds names, numbers, tff_mixed values and, by type, '
      'tff.learning optimizers and tff.aggregators factories).')


def _decode(data, where: str):
  """The value `_encode` wrote as `data`."""
  if data is None or isinstance(data, (bool, int, float, str)):
    return data
  if isinstance(data, list):
    return [_decode(v, f'{where}[{i}]') for i, v in enumerate(data)]
  if not isinstance(data, dict):
    raise ValueError(f'run spec: {where} is {checks.a_kind(data)}.')
  if '__code_only__' in data:
    raise ValueError(
        f'run spec: {where} is an object given in code '
        f'({data["__code_only__"]}), which a spec records by type only: '
        'build the run in code, passing the same object again.')
  if '__tuple__' in data:
    return tuple(_decode(v, f'{where}[{i}]')
                 for i, v in enumerate(data['__tuple__']))
  if '__adaptive__' in data:
    hparams = _decode(data.get('hparams', {}), f'{where}.hparams')
    return optimizers.get(data['__adaptive__'], **hparams)
  if '__enum__' in data:
    cls = _known_type(data['__enum__'], where)
    if not (isinstance(cls, type) and issubclass(cls, enum.Enum)):
      raise ValueError(f'run spec: {where}: {data["__enum__"]} is not an '
                       'enum.')
    return cls[data['name']]
  if '__type__' in data:
    cls = _known_type(data['__type__'], where)
    if not dataclasses.is_dataclass(cls):
      raise ValueError(f'run spec: {where}: {data["__type__"]} is not a '
                       'dataclass.')
    fields = {k: _decode(v, f'{where}.{k}') for k, v in data.items()
              if k != '__type__'}
    try:
      return cls(**fields)
    except (TypeError, ValueError) as e:
      raise ValueError(f'run spec: {where}: {e}') from None
  return {k: _decode(v, f'{where}.{k}') for k, v in data.items()}


def _known_type(name: str, where: str):
  """The class `name` ('module:qualname') names, from `_MODULES` only."""
  module_name, _, qualname = str(name).partition(':')
  if not module_name.startswith(_MODULES) or not qualname:
    raise ValueError(f'run spec: {where}: type {name!r} is not one a spec '
                     f'holds (only from {", ".join(_MODULES)}).')
  try:
    value = importlib.import_module(module_name)
    for part in qualname.split('.'):
      value = getattr(value, part)
  except (ImportError, AttributeError):
    raise ValueError(f'run spec: {where}: no type {name!r} in this '
                     'tff_mixed.') from None
  return value
