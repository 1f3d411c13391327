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

from tasks.common import binary
from tasks.common import command
from tasks.movielens import task as movielens_task


main = binary.main_for('movielens', runs=movielens_task.RUNS)


if __name__ == '__main__':
  command.run(main)
