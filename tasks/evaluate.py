r"""Evaluates a run directory's model on its task's test data.

  python -m tasks.evaluate --run_dir=/tmp/digits_fedavg [--round=40]

Rebuilds the run's task and process from its config.json
(`tasks.common.saved_run`), loads the newest checkpoint (or `--round`'s) and
prints the task's evaluation of its model, one `eval/<metric>=<value>` a
line, as metrics.csv names the columns: the same numbers as the run's own
evaluation after that round.
"""

import sys

from absl import app
from absl import flags

from tasks.common import outputs
from tasks.common import saved_run

flags.DEFINE_string('run_dir', None, 'The run directory (config.json and '
                    'checkpoints/).', required=True)
flags.DEFINE_integer('round', None, 'The checkpoint of this round (default '
                     'the newest).', lower_bound=0)
flags.DEFINE_string('binary', None, 'The training binary that made the run '
                    '(e.g. tasks.digits.train), for runs whose config.json '
                    'predates provenance.binary.')

FLAGS = flags.FLAGS


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {" ".join(argv[1:])}')
  run_dir, round_num, binary = FLAGS.run_dir, FLAGS.round, FLAGS.binary
  try:
    run = saved_run.load_run(run_dir, round_num=round_num, binary=binary)
    metrics = run.evaluate()
  except saved_run.SavedRunError as e:
    sys.exit(f'Error: {e}')
  print(f'{run.task.name}: round {run.round_num} of {run_dir}')
  for name, value in metrics.items():
    print(f'{name}={value:.6g}')


if __name__ == '__main__':
  outputs.run(main)
