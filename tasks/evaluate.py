r"""Evaluates a run directory's model on its task's test data.

  python -m tasks.evaluate --run_dir=/tmp/digits_fedavg [--round=40]

Rebuilds the run's task and process from its config.json
(`tasks.common.saved_run`), loads the newest checkpoint (or `--round`'s) and
prints the task's evaluation of its model, one `eval/<metric>=<value>` a
line, as metrics.csv names the columns: the same numbers as the run's own
evaluation after that round.
"""

import sys

from absl import flags

from tasks.common import command
from tasks.common import saved_run

saved_run.define_flags()

FLAGS = flags.FLAGS


def main(argv):
  command.check_no_arguments(argv)
  run_dir = FLAGS.run_dir
  try:
    run = saved_run.load_from_flags()
    metrics = run.evaluate()
  except saved_run.SavedRunError as e:
    sys.exit(f'Error: {e}')
  print(f'{run.task.name}: round {run.round_num} of {run_dir}')
  for name, value in metrics.items():
    print(f'{name}={value:.6g}')


if __name__ == '__main__':
  command.run(main)
