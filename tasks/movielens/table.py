r"""Seed 004 §5.3's table from runs: per-client cost and recall@10 of the
baseline (spreadout on every client) and of PT, 1-way and 2-way GT.

  python -m tasks.movielens.table --data_dir=ml-1m --output_dir=/tmp/ml_table
  python -m tasks.movielens.table --data_dir=ml-1m --output_dir=/tmp/ml_small \
      --preset=cpu_small

Runs the four settings with the paper's hyper-parameters (App. C.2; S = 100,
|B_i| = 16, K = 10, eta = 0.5, w_f = w_c = 0.5, 2000 rounds) in
<output_dir>/<setting> (each resumable), then prints, per client:

* Comp.: client FLOPs of one local step (Mflop), measured from the rounds
  (steps and batch sizes the clients really took, App. C.3's count);
* Comm.: embedding-table data moved per round (KiB; the paper's KB), measured
  from what the process moved (rows selected by each client), next to
  Table 5's form with the measured n; and all bytes moved (other weights and
  row ids included);
* recall@10 on the test users at the end.
"""

import os
import sys

from absl import flags
import numpy as np

from tasks.common import command
from tasks.common import registry
from tasks.common import run as run_lib
from tasks.common import run_config
from tasks.common import run_spec
from tasks.common import sources
from tasks.common import synthetic_data
from tasks.movielens import cost
from tasks.movielens import data as movielens_data
from tasks.movielens import task as movielens_task
from tff_mixed import driver
from tff_mixed import execution
from tff_mixed import keys

flags.DEFINE_string('data_dir', None, 'Directory holding ratings.dat.')
flags.DEFINE_bool('use_synthetic_data', False,
                  synthetic_data.USE_SYNTHETIC_DATA_HELP)
flags.DEFINE_string('output_dir', None, 'One run directory per setting.')
flags.DEFINE_integer('rounds', 2000, 'Rounds per setting.', lower_bound=1)
flags.DEFINE_integer('clients_per_round', 100, 'Clients sampled per round (S).', lower_bound=1)
flags.DEFINE_integer('seed', 0, 'Seeds the split, initialisation, sampling.')
flags.DEFINE_float('spreadout_weight', 0.001, 'lambda of the spreadout.',
                   lower_bound=0.0)
flags.DEFINE_integer('eval_every', 100, 'Evaluate every this many rounds.',
                     lower_bound=0)
PRESETS = {'paper': {}, 'cpu_small': dict(rounds=3, clients_per_round=4)}
command.define_preset_flag(
    PRESETS, 'cpu_small: 3 rounds of 4 clients per setting; paper: the '
    'flags\' defaults.', durations={'paper': movielens_task.PAPER_DURATION})
flags.mark_flag_as_required('output_dir')
command.define_other_names()
FLAGS = flags.FLAGS

BATCH, K, ETA, DIM, W_F, W_C = 16, 10, 0.5, 16, 0.5, 0.5
NAMES = {cost.BASELINE: 'Baseline', cost.PARALLEL_TRAINING: 'PT',
         cost.ONE_WAY_GRADIENT_TRANSFER: '1-w GT',
         cost.TWO_WAY_GRADIENT_TRANSFER: '2-w GT'}


def run_setting(setting, rounds, clients, output_dir):
  """One setting as `tasks.movielens.train` runs it: the baseline is FedAvg
  with the spreadout on every client, the mixed ones the selected rows (one
  TFF client a client, on TFF's runtime: federated_select has no
  MapReduceForm); w_f = w_c = 0.5 (`registry.AlgorithmConfig`'s)."""
  baseline = setting == cost.BASELINE
  spec = run_spec.RunSpec(
      'movielens',
      task_args=dict(
          data_dir=FLAGS.data_dir, use_synthetic_data=FLAGS.use_synthetic_data,
          batch_size=BATCH, embedding_dim=DIM,
          spreadout_weight=FLAGS.spreadout_weight),
      algorithm=registry.AlgorithmConfig(
          algorithm='fedavg' if baseline else setting, num_local_steps=K,
          client=registry.OptimizerSpec(learning_rate=ETA),
          federated_weight=W_F, central_weight=W_C),
      run=run_config.RunConfig(seed=FLAGS.seed, clients_per_round=clients),
      execution=run_config.Execution(
          rounds=rounds, client_groups=None, eval_every=FLAGS.eval_every,
          checkpoint_every=min(100, rounds),
          runtime=execution.IN_PROCESS if baseline else execution.TFF,
          output_dir=output_dir))
  return run_lib.run(spec)


def summarise(setting, history, clients):
  """(step Mflop, table KiB, Table 5 KiB, all KiB, n) per client per round."""
  rows = [r for r in history if keys.ROUND_SGD_STEPS in r]
  flops = np.mean([r[keys.ROUND_CLIENT_FLOPS] for r in rows])
  if setting == cost.BASELINE:
    n = float(movielens_data.NUM_MOVIES)
    table_bytes = 2 * n * DIM * 4
  else:
    n = float(np.mean([r[keys.ROUND_ROWS_PER_CLIENT] for r in rows]))
    table_bytes = np.mean([r[keys.ROUND_EMBEDDING_BYTES] for r in rows])
  all_bytes = np.mean([r[keys.ROUND_BYTES_DOWNLOADED]
                       + r[keys.ROUND_BYTES_UPLOADED] for r in rows])
  steps = np.mean([r[keys.ROUND_SGD_STEPS] for r in rows]) / clients
  analytic = cost.table5(movielens_data.NUM_MOVIES, DIM, n, K)[setting]
  return (flops / max(steps, 1.0) / 1e6, table_bytes / 1024,
          analytic.communicated_kib, all_bytes / 1024, n)


def main(argv):
  command.check_no_arguments(argv)
  command.apply_preset(PRESETS)
  synthetic_data.use_synthetic_data('movielens', FLAGS)
  rounds, clients = FLAGS.rounds, FLAGS.clients_per_round
  command.quiet_logs()
  lines = ['| setting | Comp. (Mflop/step) | Comm. table (KiB) | Table 5 '
           '(KiB, measured n) | all bytes (KiB) | n | recall@10 (test) |',
           '|---|---|---|---|---|---|---|']
  for setting in cost.SETTINGS:
    try:
      result = run_setting(setting, rounds, clients,
                           os.path.join(FLAGS.output_dir, setting))
    except sources.DataUnavailableError as e:
      sources.exit_with(e)
    except driver.OutputDirError as e:
      sys.exit(f'Error: {e}')
    mflop, kib, analytic, all_kib, n = summarise(setting, result.history,
                                                 clients)
    recall = result.final_eval.get('test/recall_at_10', float('nan'))
    lines.append(f'| {NAMES[setting]} | {mflop:.3f} | {kib:.1f} | '
                 f'{analytic:.1f} | {all_kib:.1f} | {n:.1f} | {recall:.4f} |')
  print('\n'.join(lines))


if __name__ == '__main__':
  command.run(main)
