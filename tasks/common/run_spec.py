"""A run as one value: `RunSpec`, written to and read from JSON.

A run is a task (a name and the arguments its `create_task` takes), an
algorithm (`registry.AlgorithmConfig`), how it runs (`run_config.RunConfig`)
and how it is executed (`run_config.Execution`, which a resume does not
compare). `RunSpec.to_json` writes them as plain JSON with a `schema`
version, the execution beside the rest; `RunSpec.from_json` reads any
schema this module knows, migrating older ones. Schema 0 is what every run
directory's config.json held before specs: the binary's flag values by
name, which the flags read as a spec
(`tasks.common.training_flags.spec_from_flag_record`).

Values are written by type: numbers, strings, lists and mappings as
themselves; frozen dataclasses (schedules, optimizer specs, the runtime
model, fast mode, ...) and enums (`tff.learning.ClientWeighting`) with
their type's name; seed 003's optimizers (`tff_mixed.optimizers`) by name
and hyper-parameters. A value of a type that cannot be written (a
function, a `tff.learning` optimizer object) is refused in one line naming
where it is.

Reading reads values, never code: a type name is looked up in
`VALUE_TYPES`, the dataclasses and enums a spec's fields hold, all imported
with this module (nothing is imported on reading, and nothing a file names
is called but those types' constructors); every field's value is checked
against its type; a text over `MAX_BYTES` or nested deeper than
`MAX_DEPTH` is refused. Each refusal is one line naming the field.
"""

import dataclasses
import enum
import json
import typing
from collections.abc import Mapping
from typing import Any, Optional

from tasks.common import parts
from tasks.common import registry
from tasks.common import run_config
from tasks.common import task_registry
from tff_mixed import checks
from tff_mixed import optimizers
from tff_mixed import schedules
from tff_mixed.driver import config_file

# 3: how a run executes is its own value (`RunSpec.execution`), written
# beside the rest. 2 wrote the same "execution" but held it in
# `registry.RunConfig` (`eval_every` in the spec with plateaus); 1 wrote it
# in the spec (at placeholders in a run's config.json, what ran in a
# partial "execution" block). `_OLD_RUN_CONFIG`: their `RunConfig`.
SCHEMA = 3
_OLD_RUN_CONFIG = 'tasks.common.registry:RunConfig'
# A spec is a few kB; these bound what reading one may cost.
MAX_BYTES = 1 << 20
MAX_DEPTH = 16
# The packages `VALUE_TYPES` come from (named in messages).
_PACKAGES = ('tff_mixed.', 'tasks.', 'tensorflow_federated.')


@dataclasses.dataclass(frozen=True)
class RunSpec:
  """One run: task, algorithm, run configuration and execution.

  Attributes:
    task: The task's name (`Task.name`, e.g. 'digits').
    task_args: The keyword arguments of the task's `create_task` (JSON
      values: the data directory, the model's name, the batch size, ...).
    algorithm: What is trained (`registry.AlgorithmConfig`).
    run: How (`run_config.RunConfig`: seed, cohort, shuffles, fast mode,
      evaluation plateaus).
    execution: How it is executed (`run_config.Execution`: rounds, fast
      mode, output directory, cadences, runtime and workers, progress),
      not compared when the run resumes (`difference`).
  """
  task: str
  task_args: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  algorithm: registry.AlgorithmConfig = registry.AlgorithmConfig()
  run: run_config.RunConfig = run_config.RunConfig()
  execution: run_config.Execution = run_config.Execution()

  def to_json(self) -> str:
    """The spec as JSON text, with its `schema`: what it trains under
    "spec", how it executes (`execution`) beside it, as "execution"."""
    data, execution = _parts(self)
    return json.dumps({'schema': SCHEMA, 'spec': data,
                       config_file.EXECUTION: execution},
                      indent=2, sort_keys=True, allow_nan=False)

  @classmethod
  def from_json(cls, text: str) -> 'RunSpec':
    """The spec `text` holds (`to_json`'s JSON, or a run's config.json,
    `record`; of any schema from 1).

    Schema 0, a run directory's config.json of flag values, is the flags'
    to read (`tasks.common.training_flags.spec_from_flag_record`);
    `tasks.common.saved_run.read_spec` reads a run directory's config.json
    of any schema.

    Raises:
      ValueError: In one line, for text that is not a spec of a schema
        this module reads.
    """
    if len(text) > MAX_BYTES:
      raise ValueError(f'not a run spec: {len(text):,} bytes, where a spec '
                       f'is a few thousand (at most {MAX_BYTES:,}).')
    try:
      data = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:
      raise ValueError(
          f'not a run spec: not JSON ({str(e).splitlines()[0]}).') from None
    if _depth(data) > MAX_DEPTH:
      raise ValueError(f'not a run spec: nested deeper than {MAX_DEPTH} '
                       'levels, where a spec is a few.')
    if not isinstance(data, dict):
      raise ValueError(f'not a run spec: {checks.a_kind(data)}, not a JSON '
                       'object.')
    schema = data.get('schema', 0)
    if schema == 0:
      raise ValueError(
          'a config.json of flag values (schema 0), not a spec: read a run '
          "directory's with tasks.common.saved_run.read_spec.")
    if schema not in (1, 2, SCHEMA):
      raise ValueError(f'run spec schema {schema!r}: this tff_mixed reads '
                       f'schemas 0 to {SCHEMA}; a newer one needs a newer '
                       'tff_mixed.')
    spec = data.get('spec')
    if isinstance(spec, dict):
      spec = _with_execution(spec, data.get(config_file.EXECUTION))
    spec = _decode(spec, 'spec')
    if not isinstance(spec, cls):
      raise ValueError(f'not a run spec: its spec is {checks.a_kind(spec)}.')
    return spec


def _with_execution(spec: dict, block) -> dict:
  """`spec`'s data with its execution's: the values written beside it
  (`block`, its "execution") over those schemas 1 and 2 held in
  `registry.RunConfig` (schema 1's at placeholders in a run's config.json;
  schema 2's `eval_every` when plateaus drive a schedule).

  Raises:
    ValueError: One line, for an execution that is not one.
  """
  run, inside = spec.get('run'), spec.get('execution', {})
  if isinstance(run, dict) and run.get('__type__') == _OLD_RUN_CONFIG:
    run = dict(run, __type__=_type_name(run_config.RunConfig))
    inside = {name: run.pop(name) for name in run_config.EXECUTION
              if name in run}
    spec = {**spec, 'run': run}
  execution = _type_name(run_config.Execution)
  for part in (inside, {} if block is None else block):
    if not isinstance(part, dict):
      raise ValueError(f'not a run spec: its execution is '
                       f'{checks.a_kind(part)}, not a mapping.')
    if part.get('__type__', execution) != execution:
      raise ValueError(f'run spec: execution: {part["__type__"]!r} where an '
                       'Execution goes.')
    unknown = sorted(set(part) - {*run_config.EXECUTION, '__type__'})
    if unknown:
      raise ValueError(f'run spec: execution: Execution has no field '
                       f'{unknown[0]!r}.')
  return {**spec, 'execution': {**inside, **(block or {}),
                                '__type__': execution}}


def _value_types() -> dict[str, type]:
  """The types a spec holds, by written name: the dataclasses and enums its
  fields' annotations reach from `RunSpec`, and every schedule (a field
  typed `schedules.Schedule` holds any of them)."""
  found = {}

  def reach(hint):
    for arg in typing.get_args(hint):
      reach(arg)
    if not isinstance(hint, type) or _type_name(hint) in found:
      return
    if issubclass(hint, enum.Enum):
      found[_type_name(hint)] = hint
    elif dataclasses.is_dataclass(hint):
      found[_type_name(hint)] = hint
      for hint_of_field in typing.get_type_hints(hint).values():
        reach(hint_of_field)

  reach(RunSpec)
  todo = [schedules.Schedule]
  while todo:
    for sub in todo.pop().__subclasses__():
      todo.append(sub)
      if dataclasses.is_dataclass(sub):
        found[_type_name(sub)] = sub
  return found


def _parts(spec: RunSpec) -> tuple[dict, dict]:
  """`spec` as JSON data in two parts: what it trains, and how it is
  executed (its `execution`'s fields)."""
  data = _encode(spec, 'spec')
  execution = data.pop('execution')
  del execution['__type__']
  return data, execution


def execution_record(spec: RunSpec) -> dict:
  """How `spec` executes, as config.json records it (its "execution": its
  `execution` but where the run is, `output_dir`)."""
  execution = _parts(spec)[1]
  del execution['output_dir']
  return execution


# Task arguments that say where the data is, not which data: recorded (a
# saved run is rebuilt from them) but not compared on resume.
LOCATION = ('data_dir', 'cache_dir', 'download')


def recorded(spec: RunSpec) -> RunSpec:
  """`spec` as config.json records it: its task's arguments complete (the
  task's defaults for those not given)."""
  return dataclasses.replace(
      spec, task_args={**task_registry.defaults(spec.task), **spec.task_args})


def record(spec: RunSpec) -> dict[str, Any]:
  """What config.json records of `spec`: under "spec" what it trains
  (`recorded(spec)`), which a resume compares; under "execution" how it
  was last started (`execution_record`), which it does not. A part given
  in code is recorded by its type (`code-only`): a restart must pass the
  same again, and `saved_run` cannot rebuild it by name."""
  return {'schema': SCHEMA, 'spec': _parts(recorded(spec))[0],
          config_file.EXECUTION: execution_record(spec)}


def difference(there: RunSpec, now: RunSpec) -> Optional[tuple[str, Any, Any]]:
  """The first difference between two specs as runs (their records, where
  the data is aside: `LOCATION`; their execution aside, but the cadence of
  evaluation when plateaus drive a schedule): `(path, value there, value
  now)` with
  `path` such as 'spec.algorithm.client.learning_rate', or None for the
  same run."""

  def compared(spec):
    spec = dataclasses.replace(spec, task_args={
        k: v for k, v in spec.task_args.items() if k not in LOCATION})
    return _sequences_alike(json.loads(json.dumps(record(spec)['spec'])))

  differs = config_file.first_difference(compared(there), compared(now),
                                         'spec')
  every = (there.execution.eval_every, now.execution.eval_every)
  if differs is None and now.run.eval_plateaus and every[0] != every[1]:
    return ('spec.execution.eval_every', *every)  # It drives a schedule.
  return differs


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


def _no_constant(name: str):
  """JSON's NaN and Infinity: never in a spec (`to_json` refuses them)."""
  raise ValueError(f'{name} is not a value a spec holds')


def _depth(data, limit: int = MAX_DEPTH + 1) -> int:
  """How deep JSON data nests (counted up to `limit`)."""
  if limit <= 0 or not isinstance(data, (dict, list)):
    return 0
  items = data.values() if isinstance(data, dict) else data
  return 1 + max((_depth(v, limit - 1) for v in items), default=0)


def _decode(data, where: str):
  """The value `_encode` wrote as `data`; types from `VALUE_TYPES` only,
  each field's value checked against its type."""
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
    items = data['__tuple__']
    if not isinstance(items, list):
      raise ValueError(f'run spec: {where}: a tuple of '
                       f'{checks.a_kind(items)}, not a list.')
    return tuple(_decode(v, f'{where}[{i}]') for i, v in enumerate(items))
  if '__adaptive__' in data:
    hparams = _decode(data.get('hparams', {}), f'{where}.hparams')
    if not isinstance(hparams, dict) or not isinstance(
        data['__adaptive__'], str):
      raise ValueError(f'run spec: {where}: an adaptive optimizer is a name '
                       'and a mapping of hparams.')
    try:
      return optimizers.get(data['__adaptive__'], **hparams)
    except (KeyError, TypeError, ValueError) as e:
      raise ValueError(f'run spec: {where}: {_first_line(e)}') from None
  if '__enum__' in data:
    cls = _value_type(data['__enum__'], where)
    if not issubclass(cls, enum.Enum):
      raise ValueError(f'run spec: {where}: {data["__enum__"]} is not an '
                       'enum.')
    if data.get('name') not in cls.__members__:
      raise ValueError(f'run spec: {where}: {cls.__name__} has no '
                       f'{data.get("name")!r} (it has '
                       f'{", ".join(cls.__members__)}).')
    return cls[data['name']]
  if '__type__' in data:
    cls = _value_type(data['__type__'], where)
    if not dataclasses.is_dataclass(cls):
      raise ValueError(f'run spec: {where}: {data["__type__"]} is not a '
                       'dataclass.')
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls) if f.init}
    values = {}
    for name, value in data.items():
      if name == '__type__':
        continue
      if name not in fields:
        raise ValueError(f'run spec: {where}: {cls.__name__} has no field '
                         f'{name!r}.')
      values[name] = _decode(value, f'{where}.{name}')
      checks.check_type(values[name], hints[name],
                        f'run spec: {where}.{name}')
    try:
      return cls(**values)
    except (TypeError, ValueError) as e:
      raise ValueError(f'run spec: {where}: {_first_line(e)}') from None
  if any(not isinstance(k, str) or k.startswith('__') for k in data):
    raise ValueError(f'run spec: {where}: {sorted(data)[0]!r} is not a '
                     'name a spec writes.')
  return {k: _decode(v, f'{where}.{k}') for k, v in data.items()}


def _value_type(name, where: str) -> type:
  """The type `name` ('module:qualname') names, from `VALUE_TYPES` only."""
  if isinstance(name, str) and name in VALUE_TYPES:
    return VALUE_TYPES[name]
  if isinstance(name, str) and name.startswith(_PACKAGES) and ':' in name:
    # Perhaps a newer tff_mixed's type; never imported to find out.
    raise ValueError(f'run spec: {where}: no type {name!r} in this '
                     'tff_mixed.')
  raise ValueError(f'run spec: {where}: type {name!r} is not one a spec '
                   f'holds (only from {", ".join(_PACKAGES)}).')


def _first_line(e: Exception) -> str:
  return (str(e).splitlines() or [type(e).__name__])[0]


VALUE_TYPES = _value_types()
