"""What every command of `tasks` shares: its entry point (`run`: one-line
errors, Ctrl-C and SIGTERM, quiet logs), and its flag conventions (no stray
arguments, finite floats, `--preset`, google-research/federated's other
names for flags, lists of numbers).
"""

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional

from absl import app

from tasks.common import flag_table


def check_no_arguments(argv: Sequence[str]) -> None:
  """A command's first check: no arguments beside its flags (a one-line
  `UsageError` naming them)."""
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {" ".join(argv[1:])}')


def check_arguments(argv: Sequence[str], output_dir: str) -> None:
  """An experiment binary's first check: no stray arguments, and
  `--output_dir` given (one-line `UsageError`s)."""
  check_no_arguments(argv)
  if not output_dir:
    raise app.UsageError('--output_dir is required.')


def _finite(value) -> bool:
  """A float flag's validator: multi-float flags hold a list."""
  import math  # pylint: disable=g-import-not-at-top
  return all(x is None or math.isfinite(x) for x in (
      value if isinstance(value, list) else [value]))


def require_finite_floats(flag_values=None) -> None:
  """Makes NaN and infinity a parsing error for every float flag defined
  in `flag_values` (default the global FLAGS): absl's bounds let NaN
  through, and a NaN rate would otherwise train to nothing. A flag that
  already has the check keeps one."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  flag_values = flags.FLAGS if flag_values is None else flag_values
  for name in list(flag_values):
    flag = flag_values[name]
    if (name != flag.name or not isinstance(flag.parser, flags.FloatParser)
        or any(getattr(v, 'checker', None) is _finite
               for v in flag.validators)):
      continue
    flags.register_validator(name, _finite, message='must be a finite number.',
                             flag_values=flag_values)


def run(main: Callable[[Sequence[str]], Any]) -> None:
  """Every binary's entry point: `app.run(main)` under tff_mixed's context.

  The execution context (`tff_mixed.execution`, whose worker starts only
  when a computation runs) is installed before absl parses the flags: TFF's
  import-time default context would otherwise leave a worker, and a
  traceback at exit, behind even `--helpfull` or a usage error. Importing a
  `tasks` module installs nothing.
  """
  from tff_mixed import execution  # pylint: disable=g-import-not-at-top
  execution.set_local_execution_context()
  require_finite_floats()
  adopt_task_flags()
  app.run(_one_line_errors(main))


def adopt_task_flags() -> None:
  """Makes every flag defined by a `tasks` module (the training flags, the
  preset, a benchmark task's flags) a key flag of the running binary, so
  `--help` lists them; `--helpfull` adds absl's and TensorFlow's."""
  import sys  # pylint: disable=g-import-not-at-top
  from absl import flags  # pylint: disable=g-import-not-at-top
  main_module = sys.argv[0]
  for module, defined in flags.FLAGS.flags_by_module_dict().items():
    if module.startswith('tasks.'):
      for flag in defined:
        flags.FLAGS.register_key_flag_for_module(main_module, flag)


def _one_line_errors(main):
  """`main` with a usage error as its one line (absl would print the
  binary's whole flag help first), the driver's run errors as one line and
  exit 1, and Ctrl-C as one line and exit 130; SIGTERM (a scheduler ending
  the job) as Ctrl-C, exit 143; a reader that stops reading (`--list |
  head`) ends it quietly with 141, as SIGPIPE ends a shell tool."""
  import signal  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  from tff_mixed import driver  # pylint: disable=g-import-not-at-top
  terminated = []

  def on_sigterm(signum, frame):
    del frame
    terminated.append(signum)
    raise KeyboardInterrupt  # The round loop stops as on Ctrl-C.

  def guarded(argv):
    quiet_logs()  # Flags are parsed: quiet TF's and absl's INFO lines now.
    signal.signal(signal.SIGTERM, on_sigterm)
    try:
      return main(argv)
    except app.UsageError as e:
      print(e, file=sys.stderr)
      sys.exit(e.exitcode or 1)
    except driver.RunError as e:
      sys.exit(f'Error: {e}')
    except BrokenPipeError:
      import os  # pylint: disable=g-import-not-at-top
      # Nothing more can reach the reader; nor may Python's exit flush.
      os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
      _exit_now(128 + signal.SIGPIPE)
    except KeyboardInterrupt as e:
      what = 'terminated (SIGTERM)' if terminated else 'interrupted'
      print(str(e).replace('interrupted', what, 1)
            if isinstance(e, driver.RunInterrupted) else
            f'{what}; resume with the same command.', file=sys.stderr)
      _exit_now(128 + signal.SIGTERM if terminated else 130)

  return guarded


def _exit_now(code: int) -> None:
  """Ends the process without Python's teardown, once the workers are gone.

  After a Ctrl-C, TFF's finalizers (which dispose of values on the worker)
  can run during interpreter teardown and print a traceback below the
  one-line message. The checkpoint, metrics and lock are settled by then.
  """
  import os  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  from tff_mixed import execution  # pylint: disable=g-import-not-at-top
  execution.shutdown()
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(code)  # pylint: disable=protected-access


def quiet_logs() -> None:
  """Quiets TensorFlow and absl (TFF logs every checkpoint at INFO); call it
  once the flags are known to be good."""
  from absl import logging  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.get_logger().setLevel('ERROR')
  logging.set_verbosity(logging.WARNING)


# Other names a command's flags answer to: google-research/federated's
# trainers' (`--total_rounds`, ...) and the training binaries' names for
# what the data experiments sweep (`--num_local_steps=1,5`).
OTHER_NAMES = {'total_rounds': 'rounds', 'rounds_per_eval': 'eval_every',
               'client_learning_rate': 'learning_rates',
               'num_local_steps': 'local_steps'}


def add_other_names(table) -> None:
  """`OTHER_NAMES` as aliases in a `flag_table.Table`, where it has the
  flag (call it after defining them)."""
  for alias, name in OTHER_NAMES.items():
    if name in table and alias not in table and alias not in table.aliases:
      table.alias(alias, name)


def define_other_names(flag_values=None) -> None:
  """Each of `OTHER_NAMES` as an alias of its flag, where this command has
  that flag (call it after defining them)."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  flag_values = flags.FLAGS if flag_values is None else flag_values
  for alias, name in OTHER_NAMES.items():
    if name in flag_values and alias not in flag_values:
      flags.DEFINE_alias(alias, name, flag_values=flag_values)


SMALL_PRESET = 'cpu_small'


def define_preset_flag(presets: Mapping[str, Mapping[str, Any]],
                       help_text: str, *,
                       durations: Optional[Mapping[str, str]] = None,
                       flag_values=None) -> None:
  """`--preset`, one of `presets` (name -> flag values), by default
  `cpu_small` (minutes here) where there is one. `durations` (preset ->
  how long it takes on this kind of machine, with its source) are printed
  when such a preset is chosen; `apply_preset` applies it."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  flag_values = flags.FLAGS if flag_values is None else flag_values
  default, text = _preset_flag(presets, help_text)
  flags.DEFINE_enum('preset', default, list(presets), text,
                    flag_values=flag_values)
  flag_values['preset'].durations = dict(durations or {})


def add_preset_flag(table, presets: Mapping[str, Mapping[str, Any]],
                    help_text: str) -> None:
  """`define_preset_flag` in a `flag_table.Table` (its durations given to
  `apply_preset`)."""
  default, text = _preset_flag(presets, help_text)
  table.define(flag_table.ENUM, 'preset', default, list(presets), text)


def _preset_flag(presets, help_text: str) -> tuple[str, str]:
  """`--preset`'s default and help: what each preset sets (a flag's
  default shown in --help is not what runs when the default preset sets
  it)."""
  default = SMALL_PRESET if SMALL_PRESET in presets else next(iter(presets))
  sets = '; '.join(
      f'{name} sets ' + (', '.join(f'--{k}={_shown(v)}'
                                   for k, v in values.items()) or 'nothing')
      for name, values in presets.items())
  return default, f'{help_text} Default {default}. {sets}.'


def _shown(value) -> str:
  return ','.join(map(str, value)) if isinstance(value, (list, tuple)) else (
      str(value))


def apply_preset(presets: Mapping[str, Mapping[str, Any]],
                 flag_values=None, *,
                 durations: Optional[Mapping[str, str]] = None) -> None:
  """The one preset mechanism: sets `--preset`'s values on every flag the
  user did not give (given flags always win), and says how long a long
  preset takes (`durations`, or those `define_preset_flag` kept)."""
  import sys  # pylint: disable=g-import-not-at-top
  from absl import flags  # pylint: disable=g-import-not-at-top
  values = flags.FLAGS if flag_values is None else flag_values
  for name, value in presets[values.preset].items():
    if not values[name].present:
      values[name].value = value
  if durations is None:
    durations = getattr(values['preset'], 'durations', {})
  if values.preset in durations:
    print(f'Note: --preset={values.preset} takes '
          f'{durations[values.preset]} on a 2-core CPU; '
          f'--preset={SMALL_PRESET} runs in minutes.', file=sys.stderr)


def parse_numbers(name: str, values: Sequence[str], cast: Callable = float, *,
                  minimum: float, exclusive: bool = False) -> list:
  """`--name`'s list of numbers, each >= (or >) `minimum`; a one-line
  `UsageError` naming the flag otherwise."""
  try:
    parsed = [cast(v) for v in values]
  except ValueError as e:
    raise app.UsageError(
        f'--{name} must be numbers, got {",".join(values)}.') from e
  low = min(parsed) if parsed else None
  if low is None or low < minimum or (exclusive and low == minimum):
    relation = '>' if exclusive else '>='
    raise app.UsageError(
        f'--{name} must be {relation} {minimum:g}, got {",".join(values)}.')
  return parsed
