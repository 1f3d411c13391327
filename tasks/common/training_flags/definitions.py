"""The training flags: `define_training_flags`, and which flags they are,
in the order defined (`DEFINED`)."""

import functools

from absl import flags

from tasks.common import command
from tasks.common.training_flags import algorithm as _algorithm
from tasks.common.training_flags import optimizer_groups as _optimizer_groups
from tasks.common.training_flags import run_flags as _run_flags
from tasks.common.training_flags import schedule_groups as _schedule_groups
from tff_mixed import checks

FLAGS = flags.FLAGS
DEFINED: dict[str, None] = {}  # Names of the training flags, in order.


def _define_in(define_fn, name, *args, flag_values=FLAGS, **kwargs):
  define_fn(name, *args, flag_values=flag_values, **kwargs)
  DEFINED[name] = None


def definer(flag_values: flags.FlagValues):
  """`define(flags.DEFINE_x, name, ...)` into `flag_values`, recording the
  name as a training flag."""
  return functools.partial(_define_in, flag_values=flag_values)


def define_training_flags(
    *,
    rounds: int = 100,
    clients_per_round: int = 10,
    num_local_steps: int = 10,
    client_learning_rate: float = 0.1,
    client_learning_rate_help: str = '',
    federated_weight: float = 0.5,
    central_weight: float = 0.5,
    flag_values: flags.FlagValues = FLAGS,
) -> None:
  """Defines the algorithm, optimizer, schedule and run flags with these
  defaults.

  `client_learning_rate_help` is appended to the flag's help (e.g. a
  per-algorithm default the binary applies). `flag_values` (default the
  global `FLAGS`) lets tests define them in a fresh `flags.FlagValues`.
  """
  define = definer(flag_values)
  _algorithm.define_algorithm(define)
  define(flags.DEFINE_integer, 'num_local_steps', num_local_steps,
         'K (K_0 with --k_schedule): SGD steps every client takes per round.',
         lower_bound=1, upper_bound=checks.MAX_STEPS)
  _schedule_groups.define_schedules(define)
  _optimizer_groups.define_optimizers(
      define, client_learning_rate=client_learning_rate,
      client_learning_rate_help=client_learning_rate_help)
  _algorithm.define_weighting_and_mixed_fl(
      define, federated_weight=federated_weight,
      central_weight=central_weight)
  _run_flags.define_run(define, flag_values, rounds=rounds,
                        clients_per_round=clients_per_round)
  command.define_other_names(flag_values)  # --total_rounds, ...
  command.require_finite_floats(flag_values)

  def algorithm_matches_server(values):
    return not (
        values['algorithm'] == 'fedadam'
        and values['server_optimizer'] not in ('sgd', 'adam')
    )

  flags.register_multi_flags_validator(
      ['algorithm', 'server_optimizer'], algorithm_matches_server,
      flag_values=flag_values,
      message='--algorithm=fedadam uses Adam; drop --server_optimizer.')
