r"""Trains a federated algorithm on the digits task.

  python -m tasks.digits.train --algorithm=fedavg --rounds=50 \
      --output_dir=/tmp/digits_fedavg
"""

from tasks.common import binary
from tasks.common import command
from tasks.digits import task as digits_task


main = binary.main_for(
    'digits', runs=digits_task.RUNS,
    central_data_flags='--client_labels (e.g. 0,1,2,3,4: clients hold those '
    'digits, the central data the rest)')


if __name__ == '__main__':
  command.run(main)
