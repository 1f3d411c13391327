"""Every task by name: what a run spec's `task` and `task_args` build.

A task is registered by name with its build function,
`build(algorithm, run, **task_args) -> BuiltTask`: the `Task`, its central
data (mixed FL's datacentre) and, for a task that builds its own process
(MovieLens's selected rows), that process. `task_args` are the task's own
arguments (the model, the batch size, where the data is: a training
binary's flags of the same names); `algorithm` and `run` are the spec's
(`registry.AlgorithmConfig`, `run_config.RunConfig`), for the seed and for
what depends on the algorithm. The tasks of this repository are registered
by module name and imported when first built; register your own with
`register`:

  task_registry.register('my_task', lambda algorithm, run: BuiltTask(task))
  run_lib.run(RunSpec('my_task', algorithm=...))

The benchmark tasks (FEMNIST, Shakespeare, CIFAR-100, Stack Overflow tags,
Sent140) share one build over their module's `create_task`, with the
arguments its `EXTRA_ARGUMENTS` names too (Sent140's `vocabulary`).

A task argument added after runs were recorded changes what an older
config.json means unless its record is read with the value those runs
used: a task module's `ARGUMENTS_BEFORE` gives it (`arguments_before`).
"""

import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from tasks.common import flops
from tasks.common import synthetic_data
from tasks.common.built_task import BuiltTask

BuildFn = Callable[..., BuiltTask]

# The repository's tasks: name -> the module whose `build` builds it.
_MODULES = {
    'digits': 'tasks.digits.task',
    'quadratic': 'tasks.quadratic.task',
    'celeba': 'tasks.celeba.task',
    'movielens': 'tasks.movielens.task',
    'stackoverflow_wiki': 'tasks.stackoverflow_wiki.task',
}
# The benchmark tasks: name -> the module whose `create_task` builds it.
BENCHMARKS = {name: f'tasks.{name}.task' for name in (
    'femnist', 'shakespeare', 'cifar100', 'stackoverflow_tags', 'sent140')}
# Tasks registered from code (`register`).
_REGISTERED: dict[str, BuildFn] = {}


class TaskSpecError(ValueError):
  """A task name or task arguments the registry cannot build; one line."""


def names() -> tuple[str, ...]:
  """Every registered task's name."""
  return (*_MODULES, *BENCHMARKS, *_REGISTERED)


def register(name: str, build: BuildFn) -> None:
  """Registers `build(algorithm, run, **task_args) -> BuiltTask` as task
  `name` (replacing one registered from code before; a repository task's
  name is refused)."""
  if name in _MODULES or name in BENCHMARKS:
    raise TaskSpecError(f'task {name!r} is one of this repository\'s; '
                        'register yours under another name.')
  _REGISTERED[name] = build


def registered(name: str) -> BuildFn | None:
  """The build function of task `name` if it was registered from code
  (`register`), else None."""
  return _REGISTERED.get(name)


def build_fn(name: str) -> BuildFn:
  """Task `name`'s build function.

  Raises:
    TaskSpecError: For a name no task has.
  """
  if name in _REGISTERED:
    return _REGISTERED[name]
  if name in _MODULES:
    return importlib.import_module(_MODULES[name]).build
  if name in BENCHMARKS:
    module = importlib.import_module(BENCHMARKS[name])

    def build(algorithm, run, *, data_dir=None, download=True,
              model=module.MODELS[0],
              batch_size=next(iter(module.PRESETS.values()))['batch_size'],
              max_train_clients=None, flops_convention=flops.OURS, **extra):
      del algorithm  # A benchmark task is the same for every algorithm.
      return BuiltTask(module.create_task(
          data_dir, model=model, batch_size=batch_size,
          max_train_clients=max_train_clients, download=download,
          seed=run.seed, flops_convention=flops_convention, **extra))

    # The signature `arguments` and `defaults` read: the shared keywords
    # and the module's own (`EXTRA_ARGUMENTS`, with create_task's defaults).
    own = inspect.signature(module.create_task).parameters
    shared = inspect.signature(build).parameters
    build.__signature__ = inspect.Signature(
        [p for p in shared.values() if p.kind != p.VAR_KEYWORD]
        + [own[n].replace(kind=inspect.Parameter.KEYWORD_ONLY)
           for n in getattr(module, 'EXTRA_ARGUMENTS', ())])
    return build
  raise TaskSpecError(f'no task {name!r}; the tasks are '
                      f'{", ".join(names())} (or register yours: '
                      'tasks.common.task_registry.register).')


def runs(name: str):
  """Task `name`'s runs as its binary reads them (`task_runs.Runs`): its
  module's `RUNS`, a benchmark task's presets (the training flags at their
  own defaults), or none for a task registered from code."""
  from tasks.common import task_runs  # pylint: disable=g-import-not-at-top
  build_fn(name)  # An unknown name's error.
  if name in BENCHMARKS:
    from tasks.common import benchmark  # pylint: disable=g-import-not-at-top
    return benchmark.runs(name)
  if name in _MODULES:
    return getattr(importlib.import_module(_MODULES[name]), 'RUNS',
                   task_runs.Runs())
  return task_runs.Runs()


def spec(name: str, **values):
  """The run that `python -m tasks.<name>.train` with these flags trains,
  as a `run_spec.RunSpec`: values are named as the binary's flags (its
  training flags and the task's own: `spec('stackoverflow_wiki',
  algorithm='two_way_gradient_transfer', rounds=20, preset='paper')`),
  and what is not given is what the binary gives it: the task's paper
  defaults, its `--preset` (default `cpu_small` where it has one), its
  per-algorithm rules. `output_dir` is optional (the run's, when given).

  Raises:
    TaskSpecError: One line, for an unknown task, a name no flag of its
      binary has, a value a flag refuses, or values that do not go
      together (the binary's line).
  """
  from tasks.common import task_runs  # pylint: disable=g-import-not-at-top
  try:
    return task_runs.spec(name, runs(name), values)
  except ValueError as e:
    raise TaskSpecError(str(e)) from None


def spec_from_args(name: str, args):
  """`spec` of a command line's flags (`--name=value` strings, as the
  binary `python -m tasks.<name>.train` takes them; the grid runner's
  runs), read in this process without touching its flags.

  Raises:
    TaskSpecError: One line: the binary's refusal.
  """
  from tasks.common import task_runs  # pylint: disable=g-import-not-at-top
  try:
    return task_runs.spec_from_args(name, runs(name), args)
  except ValueError as e:
    raise TaskSpecError(str(e)) from None


def arguments(name: str) -> tuple[str, ...]:
  """The names of task `name`'s arguments (its build's keywords)."""
  return tuple(
      p.name for p in inspect.signature(build_fn(name)).parameters.values()
      if p.kind == p.KEYWORD_ONLY)


def defaults(name: str) -> dict[str, Any]:
  """Task `name`'s arguments at their defaults (its build's), with
  `use_synthetic_data=False`."""
  return {'use_synthetic_data': False, **{
      p.name: p.default
      for p in inspect.signature(build_fn(name)).parameters.values()
      if p.kind == p.KEYWORD_ONLY}}


def arguments_before(name: str) -> dict[str, Any]:
  """Task `name`'s arguments added after runs were recorded, each with the
  value such a run used (its module's `ARGUMENTS_BEFORE`): a recorded spec
  without one is read with it."""
  module = _MODULES.get(name) or BENCHMARKS.get(name)
  if module is None:
    return {}
  return dict(getattr(importlib.import_module(module), 'ARGUMENTS_BEFORE',
                      {}))


def build(name: str, task_args: Mapping[str, Any], algorithm,
          run) -> BuiltTask:
  """Task `name` with `task_args` for `algorithm` and `run`.

  `use_synthetic_data=True` among `task_args` points the task's data
  directories at its synthetic data (`tasks.common.synthetic_data`), whatever
  they say.

  Raises:
    TaskSpecError: One line, for an unknown task or argument.
    tasks.common.sources.DataUnavailableError: Data that is missing or does
      not read (one line).
  """
  fn = build_fn(name)
  args = dict(task_args)
  if args.pop('use_synthetic_data', False):
    args.update(synthetic_data.synthetic_data(name))
  known = arguments(name)
  unknown = sorted(set(args) - set(known))
  if unknown:
    raise TaskSpecError(
        f'task {name} takes no argument {", ".join(map(repr, unknown))} (it '
        f'takes {", ".join(known) or "none"}).')
  return fn(algorithm, run, **args)
