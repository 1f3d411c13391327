"""How a run goes: rounds, cohort, mode and workers, seed, output
directory, cadences, guards and the simulated-time model."""

import dataclasses
import os
from typing import Optional

from absl import app

from tasks.common import flag_table
from tff_mixed import driver
from tff_mixed import execution
from tff_mixed import task as task_lib
from tff_mixed.metrics import runtime
from tff_mixed.templates import client_groups


# The flags `--spec_json` takes beside it: where and how its run executes
# (`run_config.Execution`), never what it trains.
SPEC_JSON_EXECUTION = ('output_dir', 'root_output_dir', 'experiment_name',
                       'rounds', 'client_groups', 'group_mode', 'eval_every',
                       'checkpoint_every', 'progress', 'on_non_finite',
                       'download_mbps', 'upload_mbps', 'minibatch_seconds',
                       'runtime', 'local_workers', 'workers', 'concurrency',
                       'ray_workers', 'ray_address', 'ray_gpus_per_worker')
# The flags that say where a run writes.
OUTPUT_DIR = ('output_dir', 'root_output_dir', 'experiment_name')
# The flags of `runtime.RuntimeModel`, by its fields' names.
RUNTIME_MODEL = ('download_mbps', 'upload_mbps', 'minibatch_seconds')
# `client_groups_of` and `runtime_model` without a spec: the flags' values.
_FLAGS = object()


def define_run(define, *, rounds: int, clients_per_round: int) -> None:
  """Defines the run's flags through `define` (`flag_table.Table.define`;
  `--root_output_dir`/`--experiment_name` too, as
  google-research/federated's trainers take them)."""
  define(flag_table.INTEGER, 'rounds', rounds, 'Number of rounds.',
         lower_bound=1)
  define(flag_table.INTEGER, 'clients_per_round', clients_per_round,
         'Clients sampled per round.', lower_bound=1)
  define(flag_table.INTEGER, 'client_groups', client_groups.DEFAULT.count,
         'Fast mode: split each round\'s cohort into this many client '
         'groups, each trained in one TF call (same model as one TFF client '
         'per client, to float rounding); 0: one TFF client per client '
         '(faithful mode, needed for per-client aggregators).',
         lower_bound=0)
  define(flag_table.ENUM, 'group_mode', client_groups.DEFAULT.mode,
         list(client_groups.MODES),
         'How a client group trains its clients: all at once where the '
         'model allows (a tff_mixed.models.KerasModelFn that vectorises; '
         'else one after another, saying why), or always one after another. '
         'The same model either way, to float rounding; not part of the '
         'run\'s configuration.')
  define(flag_table.ENUM, 'runtime', execution.DEFAULT_RUNTIME,
         list(execution.RUNTIMES),
         'What runs the computations: in_process (the round TFF compiles to '
         'its MapReduceForm, run by TensorFlow in this process: no worker, '
         'on a GPU when TensorFlow sees one; faster on every workload '
         'measured) or tff (TFF\'s C++ worker_binary: also several workers '
         'with --local_workers/--workers, secure aggregation, MovieLens\'s '
         'selected rows). The same model; not part of the run\'s '
         'configuration.')
  define(flag_table.INTEGER, 'local_workers', 1,
         'TFF workers to start on this machine; with '
         '--workers or more than 1, TFF\'s mergeable context splits each '
         'round\'s clients (or client groups) across all of them.',
         lower_bound=0)
  define(flag_table.LIST, 'workers', [],
         'host:port of TFF worker_binary processes started elsewhere '
         '(unauthenticated gRPC: trusted networks only; file-backed data '
         'must be at the same path on every worker).')
  define(flag_table.INTEGER, 'concurrency', 0,
         'With --runtime=in_process: clients (or client groups) trained at '
         'once, side by side (0: one per GPU TensorFlow sees, else one per '
         'core). The same model whatever it is (results added in client '
         'order).', lower_bound=0)
  define(flag_table.INTEGER, 'ray_workers', 0,
         'With --runtime=ray: the Ray actors each round\'s clients are split '
         'over, by their batches (0: the cluster\'s CPUs; a local Ray gets '
         'this many CPUs).', lower_bound=0)
  define(flag_table.STRING, 'ray_address', None,
         'With --runtime=ray: host:port (or auto) of a running Ray cluster '
         'to join (trusted networks only: whoever reaches its ports can run '
         'code; docs/execution.md, "Ray"); default: a local Ray on '
         '127.0.0.1, ended with the run.')
  define(flag_table.FLOAT, 'ray_gpus_per_worker', 0.0,
         'With --runtime=ray: GPUs each actor asks Ray for (a fraction '
         'shares one GPU between actors).', lower_bound=0.0)
  define(flag_table.INTEGER, 'seed', 0,
         'Seeds initialisation, data split, client sampling and the '
         'per-round client shuffles.')
  define(flag_table.ENUM, 'client_shuffle', None, task_lib.CLIENT_SHUFFLES,
         'Each sampled client\'s examples: per_round: reshuffled every round '
         'from (--seed, round, client id) before batching and cycling to K '
         'steps (the seeds\' minibatch sampling); none: in the data\'s order '
         'every round. Default: the task\'s (per_round for every task whose '
         'clients hold more than one batch).')
  define(
      flag_table.STRING, 'spec_json', None, 'Run this run spec (a file: tasks.common.run_spec.'
      'RunSpec.to_json\'s text, or a run directory\'s config.json) instead '
      'of reading the run from flags; beside it only where and how it '
      'executes: ' + ', '.join(f'--{n}' for n in SPEC_JSON_EXECUTION) + '.')
  define(flag_table.STRING, 'output_dir', None,
         'Directory for config.json, metrics.csv, checkpoints/, tensorboard/.'
         ' Restarting with the same flags resumes the run.')
  define(flag_table.STRING, 'root_output_dir', None,
         'With --experiment_name, as google-research/federated\'s trainers '
         'take it: --output_dir is <root_output_dir>/<experiment_name>.')
  define(flag_table.STRING, 'experiment_name', None,
         'See --root_output_dir.')
  define(flag_table.INTEGER, 'eval_every', 10,
         'Evaluate every this many rounds (0: only at the end).',
         lower_bound=0)
  define(flag_table.INTEGER, 'train_eval_clients', 0,
         'At each evaluation, also evaluate the global model on this many '
         "training clients' data (all if the task has no more; else a "
         'sample drawn once from --seed): metrics.csv train_eval/..., the '
         "training error of the server's model, beside client_work/train/"
         "loss (the clients' local models during their steps). 0: none.",
         lower_bound=0)
  define(flag_table.INTEGER, 'checkpoint_every', 10,
         'Checkpoint every this many rounds.', lower_bound=1)
  define(flag_table.BOOL, 'progress', True, 'Show a progress bar.')
  define(flag_table.ENUM, 'on_non_finite', 'stop', driver.ON_NON_FINITE,
         'A round whose new model or server state is not finite: stop '
         '(exit 1, the last checkpoint kept) or skip (undo the round, warn, '
         'count it in metrics.csv skipped_non_finite). Not part of the '
         "run's configuration: a stopped run can resume with skip.")
  define(flag_table.FLOAT, 'download_mbps',
         runtime.RuntimeModel.download_mbps,
         'Simulated client download bandwidth (Mbit/s; seed 001 runtime '
         'model).', lower_bound=0.0)
  define(flag_table.FLOAT, 'upload_mbps', runtime.RuntimeModel.upload_mbps,
         'Simulated client upload bandwidth (Mbit/s).', lower_bound=0.0)
  define(flag_table.FLOAT, 'minibatch_seconds',
         runtime.RuntimeModel.minibatch_seconds,
         'Simulated time of one client minibatch step (seconds).',
         lower_bound=0.0)


def output_dir(fv) -> str:
  """--output_dir, or --root_output_dir/--experiment_name.

  Raises:
    app.UsageError: Neither, or both ways.
  """
  split = fv.root_output_dir, fv.experiment_name
  not_one_way = (split != (None, None) if fv.output_dir is not None
                 else None in split)
  if not_one_way:
    raise app.UsageError('give --output_dir, or --root_output_dir with '
                         '--experiment_name.')
  if fv.output_dir is not None:
    return fv.output_dir
  return os.path.join(fv.root_output_dir, fv.experiment_name)


def client_groups_of(fv, spec=_FLAGS) -> Optional[client_groups.ClientGroups]:
  """Fast mode as `--client_groups` and `--group_mode` say (None: 0,
  faithful mode); with `spec` (`--spec_json`'s mode), each flag not given
  as there.

  Raises:
    app.UsageError: `--group_mode` for a run in faithful mode (it would be
      ignored).
  """
  count, mode = fv.client_groups, fv.group_mode
  if spec is not _FLAGS:
    count = count if fv['client_groups'].present else (
        spec.count if spec else 0)
    mode = mode if fv['group_mode'].present or not spec else spec.mode
  if not count:
    if fv['group_mode'].present:
      raise app.UsageError(
          f'--group_mode={fv.group_mode} is how fast mode trains a group; '
          'this run is in faithful mode (--client_groups=0): drop it, or '
          'give --client_groups=N.')
    return None
  return client_groups.ClientGroups(count, mode)


def runtime_model(fv, spec=_FLAGS) -> runtime.RuntimeModel:
  """The simulated-time model the flags say; with `spec` (`--spec_json`'s
  model), each flag not given as there."""
  given = {name: fv[name].value for name in RUNTIME_MODEL
           if spec is _FLAGS or fv[name].present}
  try:
    return dataclasses.replace(
        runtime.RuntimeModel() if spec is _FLAGS else spec, **given)
  except ValueError as e:
    raise app.UsageError(str(e)) from e
