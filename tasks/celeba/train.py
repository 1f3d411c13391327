r"""Mixed FL smile classification on CelebA (seed 004 §5.1, App. C.2.1).

  python -m tasks.celeba.train --algorithm=two_way_gradient_transfer \
      --output_dir=/tmp/celeba_2gt

`--preset=paper` runs the paper's setting (App. C.2 tables), the flags'
defaults: 100 clients a round, |B_i| = 5, K = 2, eta = 0.01, eta_s = 1,
central batch |B_c| = 1000 for 1-way GT and 500 for PT / 2-way GT,
eta_c = eta (the builder's default: client x server lr), eta_m = 1,
w_f = w_c = 0.5. The default, `--preset=cpu_small`, changes whichever of
these you did not set to a few small rounds that finish on a 2-core CPU.
The data (TFF's federated CelebA, ~400 MB) is downloaded to --cache_dir on
first use.
"""

from tasks.celeba import task as celeba_task
from tasks.common import binary
from tasks.common import command


main = binary.main_for('celeba', runs=celeba_task.RUNS)


if __name__ == '__main__':
  command.run(main)
