r"""Trains a federated algorithm on the digits task.

  python -m tasks.digits.train --algorithm=fedavg --rounds=50 \
      --output_dir=/tmp/digits_fedavg
"""

from absl import flags

from tasks.common import binary
from tasks.common import command
from tasks.common import training_flags
from tasks.digits import task as digits_task

flags.DEFINE_list('client_labels', [],
                  'Label skew: clients hold only these digits (e.g. 0,1,2,3,4) '
                  'and the central data the rest (reshuffled every pass from '
                  '--seed); evaluated as eval/all/..., eval/clients/... and '
                  'eval/central/... . Empty: clients hold all.')
flags.DEFINE_integer('central_batch_size', 10, 'Central batch size |B_c|.',
                     lower_bound=1)
flags.register_validator(
    'client_labels',
    lambda v: all(x.isdigit() and int(x) < 10 for x in v) and len(set(v)) < 10,
    message='--client_labels must be distinct digits 0-9, not all ten.')
flags.DEFINE_integer('num_clients', 100, 'Number of training clients.',
                     lower_bound=1)
flags.DEFINE_float('dirichlet_alpha', 0.5,
                   'Dirichlet concentration of the label split (small: '
                   'more non-IID).', lower_bound=1e-6)
flags.DEFINE_integer('batch_size', 10, 'Client batch size.', lower_bound=1)
flags.DEFINE_alias('client_batch_size', 'batch_size')  # google-research/federated's name.
flags.DEFINE_integer('hidden_units', 32, 'Hidden layer width.', lower_bound=1)
flags.DEFINE_float('validation_fraction', 0.0,
                   "Each client's examples held out as the validation split "
                   '(validation/<metric> columns; --k_monitor=validation/loss);'
                   ' the test data stays for eval/<metric>.', lower_bound=0.0,
                   upper_bound=0.9)
training_flags.define_training_flags(**digits_task.RUNS.training_defaults)


main = binary.main_for(
    'digits', runs=digits_task.RUNS,
    central_data_flags='--client_labels (e.g. 0,1,2,3,4: clients hold those '
    'digits, the central data the rest)')


if __name__ == '__main__':
  command.run(main)
