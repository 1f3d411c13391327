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

from absl import flags

from tasks.common import binary
from tasks.common import command
from tasks.common import fixtures
from tasks.common import training_flags
from tasks.movielens import data as movielens_data
from tasks.movielens import task as movielens_task

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
PRESETS = movielens_task.RUNS.presets
command.define_preset_flag(
    PRESETS, 'cpu_small: flags you did not set become a small run; paper: '
    'the flags\' defaults are the paper\'s; paper_fig11: App. C.4 Fig. 11 '
    '(server Adam at 0.01, 1-way GT; --algorithm=fedavg for its baseline).',
    durations=movielens_task.RUNS.preset_durations)
training_flags.define_training_flags(**movielens_task.RUNS.training_defaults)


main = binary.main_for('movielens', runs=movielens_task.RUNS)


if __name__ == '__main__':
  command.run(main)
