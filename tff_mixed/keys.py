"""One vocabulary: the names that tie a process's parts to what reads them.

A process's state and measurements are nested `OrderedDict`s keyed by part
(TFF's `tff.learning.templates` layout). The parts write under the names
below, and everything that reads a state or a `metrics.csv` column (the
driver, its guards and `EvalPlateau`, the runtime model, the flags, the
tables) imports the name or path from here instead of typing it again.
"""

SEPARATOR = '/'


def path(*names: str) -> str:
  """The flat key of a nested state or measurement: `a/b/c`."""
  return SEPARATOR.join(names)


# The parts of a `LearningProcess` state and its measurements, as TFF's
# `compose_learning_process` names them; `SERVER` is the state of the server
# step of `tff_mixed.templates.composers.compose_with_server_step`.
GLOBAL_MODEL_WEIGHTS = 'global_model_weights'
DISTRIBUTOR = 'distributor'
CLIENT_WORK = 'client_work'
AGGREGATOR = 'aggregator'
FINALIZER = 'finalizer'
SERVER = 'server'

# The server step's state (mixed FL, `templates/mixed_fl_step.py`; FedGBO,
# `algorithms/fed_gbo.py`).
SERVER_OPTIMIZER = 'server_optimizer'
MERGE_OPTIMIZER = 'merge_optimizer'
CENTRAL_OPTIMIZER_HPARAMS = 'central_optimizer_hparams'
FEDERATED_GRADIENT = 'federated_gradient'
CENTRAL_BATCHES_USED = 'central_batches_used'

# The K-step client work's state and hyper-parameters
# (`templates/k_step_client_work.py`), and its extensions' state
# (`templates/client_extensions.py`).
NUM_LOCAL_STEPS = 'num_local_steps'
OPTIMIZER_HPARAMS = 'optimizer_hparams'
LEARNING_RATE = 'learning_rate'
AUGMENTING_GRADIENT = 'augmenting_gradient'

# What the K-step client work hands the server step besides the update
# (`composers.UploadingClientWork`): sums over the cohort, not measurements.
# `sgd_steps` (below) is one of them, and also a measurement.
UPLOADS = 'uploads'
UPDATE_SUM = 'update_sum'
FIRST_GRADIENT_MEAN = 'first_gradient_mean'

# The K-step client work's measurements.
TRAIN = 'train'
LOSS = 'loss'
SGD_STEPS = 'sgd_steps'
FIRST_STEP_LOSS = 'first_step_loss'
CLIENT_LEARNING_RATE = 'client_learning_rate'
CLIENT_FLOPS = 'client_flops_per_client'
BYTES_DOWNLOADED = 'bytes_downloaded_per_client'
BYTES_UPLOADED = 'bytes_uploaded_per_client'
CLIENTS = 'clients'
PARTICIPATING = 'participating'
EMPTY = 'empty'
DROPPED_NON_FINITE = 'dropped_non_finite'
CLIENT_COUNTS = (PARTICIPATING, EMPTY, DROPPED_NON_FINITE)
# The selected-rows client work's (`templates/row_selection.py`).
ROWS_PER_CLIENT = 'rows_per_client'
EMBEDDING_BYTES = 'embedding_bytes_per_client'
# The central step's measurements (mixed FL).
CENTRAL = 'central'

# `metrics.csv` columns of the client work's measurements.
TRAIN_PREFIX = path(CLIENT_WORK, TRAIN) + SEPARATOR
TRAIN_LOSS = path(CLIENT_WORK, TRAIN, LOSS)
ROUND_SGD_STEPS = path(CLIENT_WORK, SGD_STEPS)
ROUND_NUM_LOCAL_STEPS = path(CLIENT_WORK, NUM_LOCAL_STEPS)
ROUND_CLIENT_FLOPS = path(CLIENT_WORK, CLIENT_FLOPS)
ROUND_BYTES_DOWNLOADED = path(CLIENT_WORK, BYTES_DOWNLOADED)
ROUND_BYTES_UPLOADED = path(CLIENT_WORK, BYTES_UPLOADED)
ROUND_PARTICIPATING = path(CLIENT_WORK, CLIENTS, PARTICIPATING)
ROUND_DROPPED_NON_FINITE = path(CLIENT_WORK, CLIENTS, DROPPED_NON_FINITE)
ROUND_ROWS_PER_CLIENT = path(CLIENT_WORK, ROWS_PER_CLIENT)
ROUND_EMBEDDING_BYTES = path(CLIENT_WORK, EMBEDDING_BYTES)
CENTRAL_LOSS = path(CENTRAL, LOSS)

# Mixed FL's gradient dissimilarity (seed 004 Eq. 7), a measurement of its own.
GRADIENT_DISSIMILARITY = 'gradient_dissimilarity'
G_SQUARED = 'G_squared'
B_SQUARED = 'B_squared'
ROUND_G_SQUARED = path(GRADIENT_DISSIMILARITY, G_SQUARED)
ROUND_B_SQUARED = path(GRADIENT_DISSIMILARITY, B_SQUARED)

# `metrics.csv` columns the driver adds to the process's measurements.
ROUND = 'round'
SGD_STEPS_CUMULATIVE = 'sgd_steps_cumulative'
ROUND_SECONDS = 'round_seconds'
SIMULATED_SECONDS = 'simulated_seconds'
SIMULATED_SECONDS_CUMULATIVE = 'simulated_seconds_cumulative'
SKIPPED_NON_FINITE = 'skipped_non_finite'
# A DP run's client-level guarantee after the round (`aggregators.epsilon_columns`).
DP_EPSILON = 'dp/epsilon'
DP_DELTA = 'dp/delta'
EVAL = 'eval'
VALIDATION = 'validation'
# The global model evaluated on training clients' data (`--train_eval_clients`).
TRAIN_EVAL = 'train_eval'
EVAL_PLATEAU = 'eval_plateau'


def eval_column(metric: str) -> str:
  """The `metrics.csv` column of an evaluation metric: `eval/<metric>`."""
  return path(EVAL, metric)


def validation_column(metric: str) -> str:
  """The column of a metric on the task's validation split:
  `validation/<metric>`."""
  return path(VALIDATION, metric)


def train_eval_column(metric: str) -> str:
  """The column of a metric of the global model on training clients' data
  (the training error, as against `client_work/train/...`, the clients'
  local models during their steps): `train_eval/<metric>`."""
  return path(TRAIN_EVAL, metric)

# Where a non-finite value in a process state points (path prefix -> part),
# most specific first: the server step's parts, then TFF's composer's.
STATE_PARTS = (
    (path(SERVER, SERVER_OPTIMIZER), 'the server optimizer'),
    (path(SERVER, CENTRAL), 'the central step'),
    (path(SERVER, 'merge'), 'the merge'),
    (path(SERVER, FEDERATED_GRADIENT), 'the federated gradient'),
    (path(CLIENT_WORK, AUGMENTING_GRADIENT), 'the central step'),
    (FINALIZER, 'the server optimizer'),
    (AGGREGATOR, 'the aggregator'),
    (DISTRIBUTOR, 'the distributor'),
    (CLIENT_WORK, 'the client work'),
    (GLOBAL_MODEL_WEIGHTS, 'the global model'),
)
