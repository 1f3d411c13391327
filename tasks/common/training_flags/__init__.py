"""Flags shared by every training binary, read once into what a run trains
(`AlgorithmConfig`) and how it goes (`RunConfig`).

A binary defines its task flags and calls `define_training_flags()`; its
`main` (`tasks.common.binary.main_for`) calls `config_from_flags()` first
(every flag is read and checked there, once: one-line errors naming the
flag, nothing written), then runs the `RunSpec` it reads. The flags come in groups, one module each:
the algorithm's (`algorithm`: `--algorithm`, seed 003's `--optimizer`, the
client weighting, mixed FL's weights), the optimizers'
(`optimizer_groups`: `--client_optimizer`, `--client_learning_rate`, ...
and `--server_...`, `--central_...`, `--merge_...`), the schedules'
(`schedule_groups`: K's `--k_schedule`, `--k_decay_rate`, ..., the
client's and the server's learning rates', and what an on-plateau schedule
watches) and the run's (`run_flags`: rounds, cohort, mode, workers, output
directory, cadences, `--download_mbps`, `--upload_mbps` and
`--minibatch_seconds` for the simulated-time model). `config_from_values`
reads the same flags from keyword values (a config.json of flags, a grid's
runs); code builds a `tasks.common.run_spec.RunSpec` directly.
"""

from absl import flags

from tasks.common.training_flags.algorithm import ADAPTIVE_ALGORITHMS
from tasks.common.training_flags.algorithm import ALGORITHMS
from tasks.common.training_flags.algorithm import WEIGHTINGS
from tasks.common.training_flags.config import config_from_flags
from tasks.common.training_flags.config import config_from_values
from tasks.common.training_flags.config import spec_from_flag_record
from tasks.common.training_flags.definitions import define_training_flags
from tasks.common.training_flags.optimizer_groups import OPTIMIZERS
from tasks.common.training_flags.schedule_groups import SERVER_LR_SCHEDULE_ALGORITHMS
from tasks.common.training_flags.schedule_groups import TRAIN_LOSS

FLAGS = flags.FLAGS
