r"""MovieLens next-movie dual encoder, spreadout at the server (seed 004 §5.3).

  python -m tasks.movielens.train --data_dir=ml-1m \
      --algorithm=parallel_training --output_dir=/tmp/movielens_pt
  python -m tasks.movielens.train --data_dir=ml-1m --algorithm=fedavg \
      --output_dir=/tmp/movielens_baseline        # spreadout on every client

`--preset=paper` runs the paper's setting (App. C.2 tables), the flags'
defaults: 100 clients a round, |B_i| = 16, K = 10, eta = 0.5, eta_s = 1,
eta_c = eta, eta_m = 1, w_f = w_c = 0.5, d = 16, 2000 rounds (its Fig. 5).
The default, `--preset=cpu_small`, changes whichever of these you did not
set to a few small rounds. Mixed FL algorithms run
`build_selected_rows_mixed_fl`: each client moves only the embedding rows of
its round's movies, with one TFF client per client on TFF's runtime (TFF
cannot compile `federated_select` for the in-process runtime: --runtime
other than tff is refused, and the default becomes tff for them).
`--algorithm=fedavg` (or fedadam) is the baseline: the
regulariser (weight w_c / w_f x --spreadout_weight) on every client, the
whole table moved. Data: GroupLens's ml-1m.zip, unzipped
(--data_dir holds ratings.dat). `python -m tasks.movielens.table` runs all
four settings and prints the §5.3 cost table.
"""

import dataclasses

from absl import app
from absl import flags

from tasks.common import fixtures
from tasks.common import outputs
from tasks.common import sources
from tasks.common import training_flags
from tasks.movielens import data as movielens_data
from tasks.movielens import task as movielens_task
from tff_mixed import execution
from tff_mixed.algorithms import mixed_fl

_TASK_FLAGS = ('data_dir', 'batch_size', 'context_length', 'embedding_dim',
               'spreadout_weight', 'preset', 'use_synthetic_data')
flags.DEFINE_string('data_dir', None,
                    'Directory holding MovieLens 1M ratings.dat.')
flags.DEFINE_bool('use_synthetic_data', False, fixtures.USE_SYNTHETIC_DATA_HELP)
flags.DEFINE_integer('batch_size', 16, 'Client batch size |B_i|.',
                     lower_bound=1)
flags.DEFINE_alias('client_batch_size', 'batch_size')  # google-research/federated's name.
flags.DEFINE_integer('context_length', movielens_data.CONTEXT_LENGTH,
                     'Previous movies in an example\'s context.',
                     lower_bound=1)
flags.DEFINE_integer('embedding_dim', 16, 'd, the embedding width.',
                     lower_bound=1)
flags.DEFINE_float('spreadout_weight', 0.001,
                   'lambda: the central loss is lambda x spreadout(table).',
                   lower_bound=0.0)
PRESETS = {
    'paper': {},  # The flags' defaults are the paper's.
    # Seed 004 App. C.4 Fig. 11: 1-way GT (and, with --algorithm=fedavg, the
    # baseline) with Adam at the server, lr 0.01, the rest as Table C.2;
    # Adam's betas and epsilon are not given (ours: 0.9, 0.99, 1e-3).
    'paper_fig11': dict(algorithm='one_way_gradient_transfer',
                        server_optimizer='adam', server_learning_rate=0.01),
    'cpu_small': dict(rounds=5, clients_per_round=4, eval_every=5,
                      checkpoint_every=5),
}
outputs.define_preset_flag(
    PRESETS, 'cpu_small: flags you did not set become a small run; paper: '
    'the flags\' defaults are the paper\'s; paper_fig11: App. C.4 Fig. 11 '
    '(server Adam at 0.01, 1-way GT; --algorithm=fedavg for its baseline).',
    durations={'paper': movielens_task.PAPER_DURATION})
training_flags.define_training_flags(
    rounds=2000, clients_per_round=100, num_local_steps=10,
    client_learning_rate=0.5)
FLAGS = flags.FLAGS



def check_flags(mixed: bool) -> None:
  """Flags the selected-rows process cannot honour fail before any work."""
  if FLAGS.federated_weight == 0:
    raise app.UsageError('--federated_weight must be > 0 for this task.')
  if not mixed:
    return
  for name in ('k_schedule', 'client_lr_schedule'):
    if FLAGS[name].value != 'constant':
      raise app.UsageError(f'--{name} is not supported with '
                           f'--algorithm={FLAGS.algorithm} (selected rows).')
  if FLAGS['runtime'].present and FLAGS.runtime != execution.TFF:
    raise app.UsageError(
        f'--runtime must be tff with --algorithm={FLAGS.algorithm}: TFF '
        'cannot compile the selected-rows round (federated_select) for the '
        'in-process runtime.')
  if FLAGS['client_groups'].present and FLAGS.client_groups:
    raise app.UsageError(
        f'--client_groups must be 0 with --algorithm={FLAGS.algorithm}: the '
        'selected-rows process sends each client its own rows '
        '(federated_select), so clients cannot share a TFF client value.')


def main(argv):
  training_flags.check_no_arguments(argv)
  outputs.apply_preset(PRESETS)
  fixtures.use_synthetic_data('movielens', FLAGS)
  mixed = FLAGS.algorithm in mixed_fl.MIXINGS
  check_flags(mixed)
  config = training_flags.config_from_flags(
      _TASK_FLAGS, also_read=() if mixed else ('central_weight',))
  if mixed:  # Selected rows: one TFF client per client, on TFF's runtime
    # (see check_flags).
    config = dataclasses.replace(
        config, client_groups=None, runtime=execution.TFF,
        record={**config.record, 'client_groups': 0})
  try:
    movielens = movielens_task.load(
        FLAGS.data_dir, context_length=FLAGS.context_length, seed=FLAGS.seed)
  except (movielens_data.DataUnavailableError,
          movielens_data.RatingsFormatError) as e:
    sources.exit_with(e)
  on_clients = 0.0 if mixed else (
      FLAGS.spreadout_weight * FLAGS.central_weight / FLAGS.federated_weight)
  task = movielens_task.create_movielens_task(
      movielens, batch_size=FLAGS.batch_size,
      embedding_dim=FLAGS.embedding_dim, spreadout_weight=on_clients,
      seed=FLAGS.seed)
  process_fn = None
  if mixed:
    server_lr = config.server.learning_rate
    default_central = (config.central.name == 'sgd'
                       and config.central.learning_rate is None)
    process_fn = lambda: movielens_task.build_mixed_fl(
        task, mixing=config.algorithm, batch_size=FLAGS.batch_size,
        context_length=FLAGS.context_length,
        spreadout_weight=FLAGS.spreadout_weight,
        client_learning_rate=config.client.learning_rate,
        num_local_steps=config.num_local_steps,
        server_learning_rate=1.0 if server_lr is None else server_lr,
        merge_learning_rate=config.merge.learning_rate or 1.0,
        # Any tff.learning optimizer the flags name (Fig. 11: server Adam);
        # the central one defaults to SGD at client x server lr.
        client_optimizer=config.client.build(),
        server_optimizer=config.server.build(),
        central_optimizer=None if default_central else config.central.build(),
        merge_optimizer=config.merge.build(),
        federated_weight=config.federated_weight,
        central_weight=config.central_weight,
        num_central_steps=config.num_central_steps)
  training_flags.run_task(task, config, process_fn=process_fn)


if __name__ == '__main__':
  outputs.run(main)
