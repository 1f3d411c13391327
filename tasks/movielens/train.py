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

from absl import app
from absl import flags

from tasks.common import binary
from tasks.common import command
from tasks.common import fixtures
from tasks.common import training_flags
from tasks.movielens import data as movielens_data
from tasks.movielens import task as movielens_task
from tff_mixed import execution
from tff_mixed.algorithms import mixed_fl

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
command.define_preset_flag(
    PRESETS, 'cpu_small: flags you did not set become a small run; paper: '
    'the flags\' defaults are the paper\'s; paper_fig11: App. C.4 Fig. 11 '
    '(server Adam at 0.01, 1-way GT; --algorithm=fedavg for its baseline).',
    durations={'paper': movielens_task.PAPER_DURATION})
training_flags.define_training_flags(
    rounds=2000, clients_per_round=100, num_local_steps=10,
    client_learning_rate=0.5)



def selected_rows(fv) -> None:
  """A mixed FL algorithm trains the selected rows: one TFF client per
  client (--client_groups=0) on TFF's runtime; given otherwise, refused."""
  if fv.algorithm not in mixed_fl.MIXINGS:
    return
  for name in ('k_schedule', 'client_lr_schedule'):
    if fv[name].value != 'constant':
      raise app.UsageError(f'--{name} is not supported with '
                           f'--algorithm={fv.algorithm} (selected rows).')
  if fv['runtime'].present and fv.runtime != execution.TFF:
    raise app.UsageError(
        f'--runtime must be tff with --algorithm={fv.algorithm}: TFF '
        'cannot compile the selected-rows round (federated_select) for the '
        'in-process runtime.')
  if fv['client_groups'].present and fv.client_groups:
    raise app.UsageError(
        f'--client_groups must be 0 with --algorithm={fv.algorithm}: the '
        'selected-rows process sends each client its own rows '
        '(federated_select), so clients cannot share a TFF client value.')
  fv.runtime, fv.client_groups = execution.TFF, 0


main = binary.main_for(
    'movielens', presets=PRESETS,
    resolve=selected_rows,
    # The baseline puts w_c / w_f x the spreadout on every client.
    also_read=('central_weight',))


if __name__ == '__main__':
  command.run(main)
