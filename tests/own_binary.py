"""A training binary of a user's own: its flags defined here, its runs not
registered with the task (`binary.main_for` without `runs`); a check of its
own through `resolve` (tests/test_binaries.py runs it)."""

from absl import app
from absl import flags

from tasks.common import binary
from tasks.common.training_flags import definitions

definitions.define_training_flags(rounds=3, clients_per_round=2,
                                  num_local_steps=2)
flags.DEFINE_float('initial_x', 0.25, "The quadratic task's starting x.")


def _resolve(fv):
  if fv.initial_x == 0:
    raise app.UsageError('--initial_x=0 starts at the optimum.')


main = binary.main_for('quadratic', resolve=_resolve)

if __name__ == '__main__':
  app.run(main)
