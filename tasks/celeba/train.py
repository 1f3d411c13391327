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


from absl import flags

from tasks.celeba import task as celeba_task
from tasks.common import binary
from tasks.common import command
from tasks.common import fixtures
from tasks.common import training_flags

flags.DEFINE_string('cache_dir', None,
                    'Directory of celeba.sqlite (TFF cache; default ~/.tff).')
flags.DEFINE_bool('download', True, 'Download the data if it is missing.')
flags.DEFINE_bool('use_synthetic_data', False, fixtures.USE_SYNTHETIC_DATA_HELP)
flags.DEFINE_integer('batch_size', 5, 'Client batch size |B_i|.', lower_bound=1)
flags.DEFINE_alias('client_batch_size', 'batch_size')  # google-research/federated's name.
flags.DEFINE_integer('hidden_units', celeba_task.HIDDEN_UNITS,
                     'Hidden layer width.', lower_bound=1)
flags.DEFINE_integer('central_batch_size', None,
                     'Central batch size |B_c| (default: 1000 for 1-way GT, '
                     '500 for PT and 2-way GT).', lower_bound=1)
flags.DEFINE_integer('central_shuffle_buffer', 1000,
                     'Shuffle buffer of the central examples (stored by '
                     'client).', lower_bound=1)
PRESETS = celeba_task.RUNS.presets
command.define_preset_flag(
    PRESETS, 'cpu_small: flags you did not set become a small run; paper: '
    'the flags\' defaults are the paper\'s.',
    durations=celeba_task.RUNS.preset_durations)
training_flags.define_training_flags(**celeba_task.RUNS.training_defaults)


main = binary.main_for('celeba', runs=celeba_task.RUNS)


if __name__ == '__main__':
  command.run(main)
