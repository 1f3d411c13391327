"""Flags shared by every training binary, read once into what a run trains
(`AlgorithmConfig`), how it goes (`RunConfig`) and how it executes
(`Execution`).

The flags are rows of a `tasks.common.flag_table.Table`
(`add_training_flags`, beside a task's own in `task_runs.table`), read
without absl by the table's one reader of `name=value`, or defined in
absl's `FLAGS` for a binary's command line (`define_training_flags` for a
binary of your own). `config_from_flags()` reads and checks every one of
them once (one-line errors naming the flag, nothing written). The flags
come in groups, one module each: the algorithm's (`algorithm`:
`--algorithm`, seed 003's `--optimizer`, the client weighting, mixed FL's
weights), the optimizers' (`optimizer_groups`: `--client_optimizer`,
`--client_learning_rate`, ... and `--server_...`, `--central_...`,
`--merge_...`), the schedules' (`schedule_groups`: K's `--k_schedule`,
`--k_decay_rate`, ..., the client's and the server's learning rates', and
what an on-plateau schedule watches) and the run's (`run_flags`: rounds,
cohort, mode, workers, output directory, cadences, `--download_mbps`,
`--upload_mbps` and `--minibatch_seconds` for the simulated-time model).
`config_from_values` reads the training flags alone from keyword values (a
config.json of flags); a task's run is `task_registry.spec`, and code
builds a `tasks.common.run_spec.RunSpec` directly.
"""

from absl import flags

from tasks.common.training_flags.algorithm import ADAPTIVE_ALGORITHMS
from tasks.common.training_flags.algorithm import ALGORITHMS
from tasks.common.training_flags.algorithm import WEIGHTINGS
from tasks.common.training_flags.config import config_from_flags
from tasks.common.training_flags.config import config_from_values
from tasks.common.training_flags.config import spec_from_flag_record
from tasks.common.training_flags.definitions import add_training_flags
from tasks.common.training_flags.definitions import define_training_flags
from tasks.common.training_flags.definitions import training_table
from tasks.common.training_flags.optimizer_groups import OPTIMIZERS
from tasks.common.training_flags.schedule_groups import SERVER_LR_SCHEDULE_ALGORITHMS
from tasks.common.training_flags.schedule_groups import TRAIN_LOSS

FLAGS = flags.FLAGS
