"""The training flags: `add_training_flags` (into a task's flag table),
`training_table` and `define_training_flags` (absl's flags, for a binary
of your own)."""

from absl import flags

from tasks.common import command
from tasks.common import flag_table
from tasks.common.training_flags import algorithm as _algorithm
from tasks.common.training_flags import optimizer_groups as _optimizer_groups
from tasks.common.training_flags import run_flags as _run_flags
from tasks.common.training_flags import schedule_groups as _schedule_groups
from tff_mixed import checks

FLAGS = flags.FLAGS


def add_training_flags(
    table: flag_table.Table,
    *,
    rounds: int = 100,
    clients_per_round: int = 10,
    num_local_steps: int = 10,
    client_learning_rate: float = 0.1,
    client_learning_rate_help: str = '',
    federated_weight: float = 0.5,
    central_weight: float = 0.5,
) -> None:
  """Adds the algorithm, optimizer, schedule and run flags to `table` with
  these defaults, and their other names (`command.OTHER_NAMES`).

  `client_learning_rate_help` is appended to the flag's help (e.g. a
  per-algorithm default the binary applies).
  """
  define = table.define
  _algorithm.define_algorithm(define)
  define(flag_table.INTEGER, 'num_local_steps', num_local_steps,
         'K (K_0 with --k_schedule): SGD steps every client takes per round.',
         lower_bound=1, upper_bound=checks.MAX_STEPS)
  _schedule_groups.define_schedules(define)
  _optimizer_groups.define_optimizers(
      define, client_learning_rate=client_learning_rate,
      client_learning_rate_help=client_learning_rate_help)
  _algorithm.define_weighting_and_mixed_fl(
      define, federated_weight=federated_weight,
      central_weight=central_weight)
  _run_flags.define_run(define, rounds=rounds,
                        clients_per_round=clients_per_round)
  command.add_other_names(table)  # --total_rounds, ...


def training_table(**defaults) -> flag_table.Table:
  """A table of the training flags alone (`add_training_flags`' keywords
  as defaults)."""
  table = flag_table.Table()
  add_training_flags(table, **defaults)
  return table


def define_training_flags(*, flag_values: flags.FlagValues = FLAGS,
                          **defaults) -> None:
  """The training flags in absl's `flag_values` (default the global
  `FLAGS`), for a binary of your own that reads them with
  `config_from_flags(FLAGS)`; `defaults` as `add_training_flags`'."""
  training_table(**defaults).define_absl(flag_values)
