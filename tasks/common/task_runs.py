"""What a task's runs are: its defaults, presets and per-algorithm rules.

A task module's `RUNS` (a `Runs`) says what its training binary's flags
default to (the papers' settings), its `--preset`s and the defaults that
depend on other values (a per-algorithm central batch size). The binary
reads its flags through it (`resolve_flags`), and `task_registry.spec`
builds the same run from Python (`spec`), so a run is the same whichever
door it comes in by.
"""

import dataclasses
import os
from collections.abc import Callable, Mapping
from typing import Any, Optional

from absl import app
from absl import flags

from tasks.common import command
from tasks.common import fixtures
from tasks.common import run_spec
from tasks.common.training_flags import config as config_lib
from tasks.common.training_flags import definitions

# `rules(values, given)`: changes `values` (every training flag and task
# argument by name) where a default depends on other values; `given` names
# the values the user gave. Raises `ValueError` (one line) for values that
# do not go together.
Rules = Callable[[dict, frozenset], None]


@dataclasses.dataclass(frozen=True)
class Runs:
  """A task's runs, as its binary and `task_registry.spec` read them.

  Attributes:
    training_defaults: The training flags' defaults for this task
      (`define_training_flags`' keywords: rounds, clients_per_round,
      num_local_steps, client_learning_rate, federated_weight,
      central_weight); the others keep the training flags' own.
    presets: `--preset`'s values (name -> values it sets where the user
      gave none), the default `cpu_small` where there is one; None: no
      `--preset`.
    preset_durations: A paper preset -> how long it takes here (said when
      it is chosen).
    rules: Per-algorithm defaults and checks (`Rules`), or None.
    also_read: Training flags the task reads itself (not refused as unused
      by the algorithm).
  """
  training_defaults: Mapping[str, Any] = dataclasses.field(
      default_factory=dict)
  presets: Optional[Mapping[str, Mapping[str, Any]]] = None
  preset_durations: Mapping[str, str] = dataclasses.field(
      default_factory=dict)
  rules: Optional[Rules] = None
  also_read: tuple[str, ...] = ()

  @property
  def default_preset(self) -> Optional[str]:
    if not self.presets:
      return None
    return (command.SMALL_PRESET if command.SMALL_PRESET in self.presets
            else next(iter(self.presets)))


def resolve_flags(runs: Runs, fv: flags.FlagValues) -> None:
  """The binary's side of `runs.rules`: applied to its parsed flags `fv`
  (after the preset), a refusal as a one-line `app.UsageError`."""
  if runs.rules is None:
    return
  values = {name: fv[name].value for name in fv}
  given = frozenset(name for name in fv if fv[name].present)
  before = dict(values)
  try:
    runs.rules(values, given)
  except ValueError as e:
    raise app.UsageError(str(e)) from None
  for name, value in values.items():
    if value != before[name]:
      fv[name].value = value


def spec(task: str, runs: Runs, arguments: Mapping[str, Any],
         values: Mapping[str, Any]) -> run_spec.RunSpec:
  """The run `python -m tasks.<task>.train` with the flags `values` trains
  (`task_registry.spec`): `arguments` are the task's arguments at their
  defaults (`use_synthetic_data` among them).

  Raises:
    ValueError: One line, for a name no flag of the binary has, a value a
      flag refuses, or values that do not go together.
  """
  fv = flags.FlagValues()
  definitions.define_training_flags(flag_values=fv,
                                    **runs.training_defaults)
  values = dict(values)
  preset = values.pop('preset', runs.default_preset)
  unknown = sorted(n for n in values if n not in fv and n not in arguments)
  if unknown:
    raise ValueError(f'task {task} has no flag --{unknown[0]}.')
  if runs.presets is None and preset is not None:
    raise ValueError(f'--preset: task {task} has no presets.')
  if runs.presets is not None and preset not in runs.presets:
    raise ValueError(f'--preset must be one of {", ".join(runs.presets)}, '
                     f'got {preset!r}.')
  given = frozenset(values)
  argv = [f'--{name}={_flag_text(value)}' for name, value in values.items()
          if name in fv and value is not None]
  # A run needs no output directory until it trains (the flags' check wants
  # one: a placeholder, not recorded).
  placed = not given & {'output_dir', 'root_output_dir', 'experiment_name'}
  if placed:
    argv.append(f'--output_dir={os.devnull}')
  try:
    fv(['spec', *argv])
  except flags.Error as e:
    raise ValueError(str(e).splitlines()[0]) from None
  task_args = {**arguments,
               **{n: v for n, v in values.items() if n in arguments}}
  for name, value in (runs.presets or {}).get(preset, {}).items():
    if name not in given:
      if name in fv:
        fv[name].value = value
      else:
        task_args[name] = value
  if task_args.get('use_synthetic_data'):
    replaced = [f'--{n}' for n in fixtures.synthetic_data_flags(task)
                if n in given]
    if replaced:
      raise ValueError(f'--use_synthetic_data replaces '
                       f'{", ".join(replaced)}; give one or the other.')
    task_args.update(fixtures.synthetic_data(task))
  if runs.rules is not None:
    everything = {**{n: fv[n].value for n in fv}, **task_args}
    runs.rules(everything, given)
    for name, value in everything.items():
      if name in fv:
        if value != fv[name].value:
          fv[name].value = value
      else:
        task_args[name] = value
  try:
    config = config_lib.config_from_flags(flag_values=fv,
                                          also_read=runs.also_read)
  except (app.UsageError, flags.Error) as e:
    raise ValueError(str(e).splitlines()[0]) from None
  run = config.run_config
  if placed:
    run = dataclasses.replace(run, output_dir=None)
  # As the binary's flags hold them: a sequence as a list.
  task_args = {n: list(v) if isinstance(v, tuple) else v
               for n, v in task_args.items()}
  return run_spec.RunSpec(task=task, task_args=task_args,
                          algorithm=config.algorithm_config, run=run)


def _flag_text(value) -> str:
  """A value as a flag's text (a list comma separated)."""
  if isinstance(value, (list, tuple)):
    return ','.join(str(v) for v in value)
  return str(value)
