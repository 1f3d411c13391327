"""What a task's runs are: its flags, defaults, presets and per-algorithm rules.

A task module's `RUNS` (a `Runs`) says what its training binary's flags
are (the task's own, `define_flags`; the training flags at the papers'
defaults), its `--preset`s and the defaults that depend on other values (a
per-algorithm central batch size), as one `flag_table.Table` (`table`).
`task_registry.spec` and the grid runner read values with the table
(`spec`, `spec_from_args`: no absl, no global flag touched); the binary
defines the same table in absl's `FLAGS` for its command line and reads
what absl parsed through the same `read`, so a run is the same whichever
door it comes in by.
"""

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional

from absl import app
from absl import flags

from tasks.common import command
from tasks.common import flag_table
from tasks.common import run_spec
from tasks.common import synthetic_data as synthetic_data_lib
from tasks.common.training_flags import config as config_lib
from tasks.common.training_flags import definitions
from tasks.common.training_flags import run_flags

# `rules(values, given)`: changes `values` (every training flag and task
# argument by name) where a default depends on other values; `given` names
# the values the user gave. Raises `ValueError` (one line) for values that
# do not go together.
Rules = Callable[[dict, frozenset], None]
# `define(table)`: adds a task's own flags (its arguments) to a
# `flag_table.Table`.
DefineFlags = Callable[[flag_table.Table], None]


@dataclasses.dataclass(frozen=True)
class Runs:
  """A task's runs, as its binary and `task_registry.spec` read them.

  Attributes:
    training_defaults: The training flags' defaults for this task
      (`definitions.add_training_flags`' keywords: rounds, clients_per_round,
      num_local_steps, client_learning_rate, federated_weight,
      central_weight, client_learning_rate_help); the others keep the
      training flags' own.
    presets: `--preset`'s values (name -> values it sets where the user
      gave none), the default `cpu_small` where there is one; None: no
      `--preset`.
    preset_durations: A paper preset -> how long it takes here (said when
      it is chosen).
    rules: Per-algorithm defaults and checks (`Rules`), or None.
    also_read: Training flags the task reads itself (not refused as unused
      by the algorithm).
    define_flags: Adds the task's own flags to a table (`DefineFlags`): one
      a task argument, of the same name (`task_registry.arguments`).
    preset_help: `--preset`'s help, before what each preset sets.
  """
  training_defaults: Mapping[str, Any] = dataclasses.field(
      default_factory=dict)
  presets: Optional[Mapping[str, Mapping[str, Any]]] = None
  preset_durations: Mapping[str, str] = dataclasses.field(
      default_factory=dict)
  rules: Optional[Rules] = None
  also_read: tuple[str, ...] = ()
  define_flags: Optional[DefineFlags] = None
  preset_help: str = ''

  @property
  def default_preset(self) -> Optional[str]:
    if not self.presets:
      return None
    return (command.SMALL_PRESET if command.SMALL_PRESET in self.presets
            else next(iter(self.presets)))


def define_batch_flags(table: flag_table.Table, batch_size: int, *,
                       batch_help: str = 'Client batch size |B_i|.',
                       synthetic_data: bool = True) -> None:
  """The task flags binaries share: `--batch_size` (also
  `--client_batch_size`, google-research/federated's name) and, for a task
  read from files, `--use_synthetic_data` (`tasks.common.synthetic_data`)."""
  if synthetic_data:
    table.define(flag_table.BOOL, 'use_synthetic_data', False,
                 synthetic_data_lib.USE_SYNTHETIC_DATA_HELP)
  table.define(flag_table.INTEGER, 'batch_size', batch_size, batch_help,
               lower_bound=1)
  table.alias('client_batch_size', 'batch_size')


def table(runs: Runs) -> flag_table.Table:
  """Every flag of the task's training binary: the task's own, `--preset`
  (if it has presets) and the training flags."""
  flags_of = flag_table.Table()
  if runs.define_flags is not None:
    runs.define_flags(flags_of)
  if runs.presets is not None:
    command.add_preset_flag(flags_of, runs.presets, runs.preset_help)
  definitions.add_training_flags(flags_of, **runs.training_defaults)
  return flags_of


def define_flags(runs: Runs, fv: flags.FlagValues) -> None:
  """Every flag of the task's training binary (`table`) in absl's `fv`,
  for its command line."""
  table(runs).define_absl(fv)


def resolve_flags(runs: Runs, fv) -> None:
  """`runs.rules` applied to the flags `fv` (`flag_table.Values`, after the
  preset), a refusal as a one-line `app.UsageError`."""
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


def read(task: str, fv: flags.FlagValues, *,
         presets: Optional[Mapping[str, Mapping[str, Any]]],
         resolve: Optional[Callable[[flags.FlagValues], None]],
         also_read: Sequence[str], arguments: Sequence[str],
         durations: Optional[Mapping[str, str]] = None,
         ) -> tuple[run_spec.RunSpec, Optional[tuple[int, int]]]:
  """The run the flags `fv` say (`flag_table.Values`, or absl's parsed
  flags of a binary of your own): its preset applied (and its duration
  said, `durations`), then
  `--use_synthetic_data`, then `resolve(fv)` (the task's rules), and every
  training flag read and checked once; `arguments` name the task's
  arguments (flags of the same names). Also the mixing probe's
  (simulations, first round) when `--mixing_probe` asks for it instead.

  Raises:
    app.UsageError, flags.Error: One line naming the flag that is wrong.
  """
  if presets is not None:
    command.apply_preset(presets, fv, durations=durations)
  if 'use_synthetic_data' in fv:
    synthetic_data_lib.use_synthetic_data(task, fv)
  if resolve is not None:
    resolve(fv)
  algorithm, run, execution = config_lib.config_from_flags(
      flag_values=fv, also_read=also_read)
  spec = run_spec.RunSpec(
      task=task,
      task_args={name: fv[name].value
                 for name in ('use_synthetic_data', *arguments)
                 if name in fv},
      algorithm=algorithm, run=run, execution=execution)
  probe = ((fv.mixing_probe, fv.mixing_probe_first_round)
           if fv.mixing_probe else None)
  return spec, probe


def read_runs(task: str, runs: Runs, values: flag_table.Values
              ) -> tuple[run_spec.RunSpec, Optional[tuple[int, int]]]:
  """`read` of the task's `values` with its runs' presets, rules and the
  training flags it reads itself.

  Raises:
    app.UsageError: One line naming the flag that is wrong.
  """
  return read(task, values, presets=runs.presets,
              resolve=lambda fv: resolve_flags(runs, fv),
              also_read=runs.also_read, arguments=_arguments(task),
              durations=runs.preset_durations)


def spec_from_args(task: str, runs: Runs, args: Sequence[str]
                   ) -> run_spec.RunSpec:
  """The run `python -m tasks.<task>.train *args` trains (`args` as the
  command line gives them, `--name=value`), read by the task's flag table
  as the binary reads its own (`read_runs`); no flag of this process is
  touched, so any process can read any task's runs. Without an output
  directory among `args` the spec has none.

  Raises:
    ValueError: One line, the binary's: a flag it has not, a value a flag
      refuses, values that do not go together, `--spec_json` or
      `--mixing_probe` (a file's run and a probe are not runs of flags).
  """
  try:
    values = table(runs).read(args)
  except flag_table.FlagError as e:
    raise ValueError(str(e)) from None
  return _spec(task, runs, values)


def spec(task: str, runs: Runs, values: Mapping[str, Any]
         ) -> run_spec.RunSpec:
  """The run `python -m tasks.<task>.train` with the flags `values` trains
  (`task_registry.spec`): each value a Python value of its flag (or its
  text; None: the flag's default), read as `spec_from_args` reads them.

  Raises:
    ValueError: One line, for a name no flag of the binary has, or what the
      binary refuses (`spec_from_args`).
  """
  flags_of = table(runs)
  if values.get('preset') is not None and runs.presets is None:
    raise ValueError(f'--preset: task {task} has no presets.')
  unknown = sorted(n for n in values
                   if n not in flags_of and n not in flags_of.aliases)
  if unknown:
    raise ValueError(f'task {task} has no flag --{unknown[0]}.')
  try:
    parsed = flags_of.values(values)
  except flag_table.FlagError as e:
    raise ValueError(str(e)) from None
  return _spec(task, runs, parsed)


def _spec(task: str, runs: Runs, values: flag_table.Values
          ) -> run_spec.RunSpec:
  """The run of a task's parsed `values` (`spec`, `spec_from_args`)."""
  if values.spec_json is not None:
    raise ValueError('--spec_json: give the flags of the run itself.')
  # A spec needs no output directory until it trains (the flags' check
  # wants one: a placeholder, not recorded).
  placed = not any(values[name].present for name in run_flags.OUTPUT_DIR)
  if placed:
    values['output_dir'].value = os.devnull
  try:
    spec_read, probe = read_runs(task, runs, values)
  except app.UsageError as e:
    raise ValueError(str(e).splitlines()[0]) from None
  return _of_a_grid(spec_read, probe, placed)


def read_args(task: str, fv: flags.FlagValues, args: Sequence[str], *,
              presets: Optional[Mapping[str, Mapping[str, Any]]],
              resolve: Optional[Callable[[flags.FlagValues], None]],
              also_read: Sequence[str]) -> run_spec.RunSpec:
  """For a binary of your own (its flags in absl's global `FLAGS`, saved
  and restored around this call): the run `args` say, parsed into `fv`
  and read by `read` with the binary's `presets`, `resolve` and
  `also_read`; without an output directory among `args` the spec has
  none.

  Raises:
    ValueError: One line, as `spec_from_args`.
  """
  placed = not any(arg.split('=')[0].lstrip('-') in run_flags.OUTPUT_DIR
                   for arg in args)
  try:
    rest = fv([task, *args, *([f'--output_dir={os.devnull}'] if placed
                              else [])])
    if len(rest) > 1:
      raise app.UsageError(f'Unexpected arguments: {" ".join(rest[1:])}')
    if fv.spec_json is not None:
      raise app.UsageError('--spec_json: give the flags of the run itself.')
    spec_read, probe = read(task, fv, presets=presets, resolve=resolve,
                            also_read=also_read, arguments=_arguments(task))
  except (app.UsageError, flags.Error) as e:
    raise ValueError(str(e).splitlines()[0]) from None
  return _of_a_grid(spec_read, probe, placed)


def _of_a_grid(spec_read: run_spec.RunSpec, probe, placed: bool
               ) -> run_spec.RunSpec:
  """A run read from flags as a value (no probe), without the output
  directory `placed` for the flags' check."""
  if probe is not None:
    raise ValueError('--mixing_probe runs a probe, not a run of a grid: run '
                     'it on its own.')
  if placed:
    spec_read = dataclasses.replace(spec_read, execution=dataclasses.replace(
        spec_read.execution, output_dir=None))
  return spec_read


def _arguments(task: str) -> tuple[str, ...]:
  from tasks.common import task_registry  # pylint: disable=g-import-not-at-top
  return task_registry.arguments(task)
