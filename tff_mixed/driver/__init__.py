"""The one training driver behind every binary: plain Python, no flags.

`run_experiment` runs any `LearningProcess` on any `Task`: seeded client
sampling, periodic centralised evaluation, metrics to CSV and TensorBoard, a
progress bar, and checkpoint/resume through `tff.program.FileProgramStateManager`.
A run killed and restarted with the same configuration continues from its last
checkpoint and ends with the same model as an uninterrupted run.

One module a concern, the loop a page:
* `loop`: `run_rounds` (the one round loop) and `run_experiment`;
* `layout`: what a run directory holds; `lock`: one run per directory;
  `config_file`: `config.json` and provenance;
* `history`: `metrics.csv` and TensorBoard; `checkpoints`: save and resume;
* `guards`: the finite-state check and Ctrl-C; `evaluation`: the initial
  model and centralised evaluation; `eval_plateau`: `EvalPlateau`.

What it guards (nothing fails silently; each failure is one line):
* one run per output directory: a lock file (`.lock`, the owner's pid and
  host) is taken before anything is written; a stale one (its process is
  gone) is taken over;
* resume from the newest checkpoint that loads: a corrupt or partial one is
  reported, moved aside (`round_N.corrupt`) and the previous one is used;
  leftover temporary checkpoint directories are removed; `metrics.csv` and
  TensorBoard are rewritten from the resumed round, so no round appears
  twice;
* every round's new state is checked to be finite (`check_finite_state`):
  a non-finite state stops the run (the last checkpoint is untouched) or,
  with `on_non_finite='skip'`, the round is undone and counted;
* a round whose clients were all dropped reports no train metrics (rather
  than 0.0) and says so;
* Ctrl-C raises `RunInterrupted`, naming the round to resume from.
"""

from tff_mixed import keys as _keys
from tff_mixed.driver.checkpoints import load_latest_good
from tff_mixed.driver.config_file import EXECUTION
from tff_mixed.driver.config_file import full_config
from tff_mixed.driver.config_file import prepare_output_dir
from tff_mixed.driver.config_file import PROVENANCE
from tff_mixed.driver.config_file import provenance
from tff_mixed.driver.config_file import record_resolved
from tff_mixed.driver.config_file import RESOLVED
from tff_mixed.driver.errors import CohortError
from tff_mixed.driver.errors import DataError
from tff_mixed.driver.errors import EvalPlateauError
from tff_mixed.driver.errors import NonFiniteStateError
from tff_mixed.driver.errors import OutputDirError
from tff_mixed.driver.errors import RunError
from tff_mixed.driver.errors import RunInterrupted
from tff_mixed.driver.errors import WriteError
from tff_mixed.driver.eval_plateau import EvalPlateau
from tff_mixed.driver.eval_plateau import LEARNING_RATE
from tff_mixed.driver.eval_plateau import NUM_LOCAL_STEPS
from tff_mixed.driver.eval_plateau import PLATEAU_HPARAMS
from tff_mixed.driver.evaluation import build_evaluation
from tff_mixed.driver.evaluation import evaluate_all
from tff_mixed.driver.evaluation import seeded_initial_weights
from tff_mixed.driver.guards import check_finite_state
from tff_mixed.driver.guards import non_finite_parts
from tff_mixed.driver.history import flatten_metrics
from tff_mixed.driver.layout import CHECKPOINT_DIR
from tff_mixed.driver.layout import CHECKPOINT_PREFIX
from tff_mixed.driver.layout import CONFIG_FILE
from tff_mixed.driver.layout import LOCK_FILE
from tff_mixed.driver.layout import METRICS_FILE
from tff_mixed.driver.layout import TENSORBOARD_DIR
from tff_mixed.driver.lock import lock_output_dir
from tff_mixed.driver.loop import ExperimentResult
from tff_mixed.driver.loop import ON_NON_FINITE
from tff_mixed.driver.loop import run_experiment
from tff_mixed.driver.loop import run_rounds
from tff_mixed.driver.recorder import metrics_columns

# `metrics.csv` columns, by their names in `tff_mixed.keys`.
TRAIN_LOSS_KEY = _keys.TRAIN_LOSS
TRAIN_PREFIX = _keys.TRAIN_PREFIX
PARTICIPATING_KEY = _keys.ROUND_PARTICIPATING
SKIPPED_KEY = _keys.SKIPPED_NON_FINITE
