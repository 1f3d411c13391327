r"""Saves a run directory's model as a Keras model file.

  python -m tasks.export --run_dir=/tmp/digits_fedavg --out=/tmp/digits.keras
  python -m tasks.export --run_dir=/tmp/digits_fedavg --round=40 \
      --out=/tmp/digits_round_40       # a directory: TensorFlow's SavedModel

Rebuilds the run's task and process from its config.json, through the same
binary and registry (`tasks.common.saved_run`), loads the newest checkpoint
(or `--round`'s), assigns its model weights into a fresh Keras model of the
task and saves it: `<out>.keras` as a Keras file, `<out>.h5` as HDF5,
anything else as a SavedModel directory. A task without a Keras model
(the quadratic, MovieLens's dual encoder) gets its weights as a NumPy
`.npz` of the trainable arrays instead. `tf.keras.models.load_model(out)`
reads the model back; `python -m tasks.evaluate` evaluates a run.
"""

import os
import sys

from absl import flags
import numpy as np

from tasks.common import command
from tasks.common import saved_run

saved_run.define_flags()
flags.DEFINE_string('out', None, 'Where to save the model (a .keras or .h5 '
                    'file, or a SavedModel directory; .npz for a task '
                    'without a Keras model).', required=True)

FLAGS = flags.FLAGS


def export(run: saved_run.SavedRun, out: str) -> str:
  """Saves `run`'s model at `out`; returns what was written."""
  if os.path.exists(out):
    raise saved_run.SavedRunError(f'--out={out} exists; choose a new path.')
  parent = os.path.dirname(os.path.abspath(out))
  if not os.path.isdir(parent):
    raise saved_run.SavedRunError(f'--out={out}: {parent} is not a directory.')
  try:
    model = run.keras_model()
  except saved_run.SavedRunError:
    path = out if out.endswith('.npz') else out + '.npz'
    np.savez(path, *run.model_weights.trainable)
    return f'{path} (the trainable weights of {run.task.name}, in order)'
  model.save(out)
  return out


def main(argv):
  command.check_no_arguments(argv)
  run_dir, out = FLAGS.run_dir, FLAGS.out  # Read before load_run.
  try:
    run = saved_run.load_from_flags()
    written = export(run, out)
  except saved_run.SavedRunError as e:
    sys.exit(f'Error: {e}')
  print(f'{run.task.name}: round {run.round_num} of {run_dir} saved to '
        f'{written}')


if __name__ == '__main__':
  command.run(main)
