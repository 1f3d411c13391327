"""Flags shared by every training binary, read once into an experiment config.

A binary defines its task flags and calls `define_training_flags()`; its
`main` is `main_for(task, ...)`: `config_from_flags(task_flag_names)` first
(every flag is read and checked there, once: one-line errors naming the
flag, nothing written), then the run's `RunSpec` (the task's arguments are
its flags of the same names), run by `run_task` through
`tasks.common.run.run`. The flags come in groups, one module each:
the algorithm's (`algorithm`: `--algorithm`, seed 003's `--optimizer`, the
client weighting, mixed FL's weights), the optimizers'
(`optimizer_groups`: `--client_optimizer`, `--client_learning_rate`, ...
and `--server_...`, `--central_...`, `--merge_...`), the schedules'
(`schedule_groups`: K's `--k_schedule`, `--k_decay_rate`, ..., the
client's and the server's learning rates', and what an on-plateau schedule
watches) and the run's (`run_flags`: rounds, cohort, mode, workers, output
directory, cadences, `--download_mbps`, `--upload_mbps` and
`--minibatch_seconds` for the simulated-time model). `config_from_values`
reads the same flags from keyword values, for comparisons and notebooks.
"""

from absl import flags

from tasks.common import outputs
from tasks.common.training_flags import algorithm as _algorithm
from tasks.common.training_flags import definitions as _definitions
from tasks.common.training_flags import optimizer_groups as _optimizer_groups
from tasks.common.training_flags import run_flags as _run_flags
from tasks.common.training_flags import schedule_groups as _schedule_groups
from tasks.common.training_flags.algorithm import ADAPTIVE_ALGORITHMS
from tasks.common.training_flags.algorithm import ALGORITHMS
from tasks.common.training_flags.algorithm import WEIGHTINGS
from tasks.common.training_flags.binary import check_no_arguments
from tasks.common.training_flags.binary import main_for
from tasks.common.training_flags.binary import run_task
from tasks.common.training_flags.config import config_from_flags
from tasks.common.training_flags.config import config_from_values
from tasks.common.training_flags.config import spec_from_flag_record
from tasks.common.training_flags.optimizer_groups import OPTIMIZERS
from tasks.common.training_flags.schedule_groups import SERVER_LR_SCHEDULE_ALGORITHMS
from tasks.common.training_flags.schedule_groups import TRAIN_LOSS
from tff_mixed import checks

FLAGS = flags.FLAGS


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
  define = _definitions.definer(flag_values)
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
  outputs.define_other_names(flag_values)  # --total_rounds, ...
  outputs.require_finite_floats(flag_values)

  def algorithm_matches_server(values):
    return not (
        values['algorithm'] == 'fedadam'
        and values['server_optimizer'] not in ('sgd', 'adam')
    )

  flags.register_multi_flags_validator(
      ['algorithm', 'server_optimizer'], algorithm_matches_server,
      flag_values=flag_values,
      message='--algorithm=fedadam uses Adam; drop --server_optimizer.')
