r"""FedAvg on NIID two-client linear regression (seed 002 §2.6, Fig. 2.13).

  python -m tasks.synthetic_regression.fedavg --output_dir=/tmp/fedavg_reg

The Eq. 2.18 clients (100 points each, one full batch), FedAvg
(`tff_mixed.algorithms.build_fed_avg`, server SGD at rate 1, both clients
every round) from y = 0 x + 0 for every learning rate x local steps of the
grid; Omega (Eq. 2.19) is the distance of the round's (alpha, beta) to the
pooled least-squares line, the global minimum. The thesis does not give its
grids; the flags set ours, `--preset=cpu_small` a smaller one. Writes
`fedavg.csv` (one row per learning rate, local steps and round) and
`fedavg.png` (log10 Omega over round x local steps, one panel per learning
rate on one shared colour scale, as Fig. 2.13), and prints Omega at the last
round.
"""

import collections
import os

from absl import flags
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tasks.common import command
from tasks.common import registry
from tasks.common import reports
from tasks.synthetic_regression import data
from tff_mixed import driver

PRESETS = {
    'paper': dict(learning_rates=['0.002', '0.005', '0.01', '0.02'],
                  local_steps=['1', '2', '5', '10', '20', '50', '100'],
                  rounds=100),
    'cpu_small': dict(learning_rates=['0.005', '0.02'],
                      local_steps=['1', '5', '20'], rounds=20),
}
flags.DEFINE_string('output_dir', None, 'Where fedavg.csv/.png go.')
command.define_preset_flag(
    PRESETS, 'Grid: paper (4 rates x 7 step counts x 100 rounds) or '
    'cpu_small (2 x 3 x 20); the flags below override it.',
    durations={'paper': 'about 25 minutes (docs/niid.md)'})
flags.DEFINE_list('learning_rates', None, 'Client learning rates.')
flags.DEFINE_list('local_steps', None, 'Local steps per round (K).')
flags.DEFINE_integer('rounds', None, 'Rounds per run.', lower_bound=1)
flags.DEFINE_integer('num_points', data.NUM_POINTS, 'Points per client.',
                     lower_bound=2)
flags.DEFINE_integer('seed', 0, 'Seeds the data.')
command.define_other_names()
FLAGS = flags.FLAGS


def model_fn():
  """y = alpha x + beta, mean squared error; alpha = beta = 0 at the start."""
  keras_model = tf.keras.Sequential([
      tf.keras.layers.InputLayer(input_shape=(1,)),
      tf.keras.layers.Dense(1, kernel_initializer='zeros'),
  ])
  return tff.learning.models.from_keras_model(
      keras_model, loss=tf.keras.losses.MeanSquaredError(),
      input_spec=collections.OrderedDict(
          x=tf.TensorSpec([None, 1], tf.float32),
          y=tf.TensorSpec([None, 1], tf.float32)))


def client_datasets(samples):
  return [tf.data.Dataset.from_tensor_slices(collections.OrderedDict(
      x=x.reshape(-1, 1).astype(np.float32),
      y=y.reshape(-1, 1).astype(np.float32))).batch(len(x))
          for x, y in samples]


def run_fed_avg(datasets, optimum, *, learning_rate, local_steps, rounds):
  """Omega after each round."""
  process = registry.build_process(registry.AlgorithmConfig(
      algorithm='fedavg', num_local_steps=local_steps,
      client=registry.OptimizerSpec(learning_rate=learning_rate)), model_fn)
  omega = []

  def measure(round_num, output, seconds):
    del round_num, seconds
    kernel, bias = process.get_model_weights(output.state).trainable
    omega.append(float(np.linalg.norm(
        [float(np.ravel(kernel)[0]) - optimum[0],
         float(np.ravel(bias)[0]) - optimum[1]])))

  # Both clients every round (the thesis's two-client setting).
  driver.run_rounds(process, process.initialize(), lambda r: datasets,
                    range(1, rounds + 1), measure)
  return np.asarray(omega)


def run(output_dir, *, learning_rates, local_steps, rounds, num_points, seed):
  samples = data.sample_regression(data.EQ_2_18, num_points=num_points,
                                   seed=seed)
  optimum = data.least_squares(samples)
  datasets = client_datasets(samples)
  curves, rows = {}, []
  for lr in learning_rates:
    for k in local_steps:
      omega = run_fed_avg(datasets, optimum, learning_rate=lr,
                          local_steps=k, rounds=rounds)
      curves[lr, k] = omega
      rows += [dict(learning_rate=lr, local_steps=k, round=t + 1, omega=o)
               for t, o in enumerate(omega)]
  os.makedirs(output_dir, exist_ok=True)
  reports.write_csv(os.path.join(output_dir, 'fedavg.csv'), rows)
  plot(curves, learning_rates, local_steps,
       os.path.join(output_dir, 'fedavg.png'))
  return optimum, curves


def plot(curves, learning_rates, local_steps, path):
  """Writes `path`: log10 Omega over round x local steps, one panel per
  learning rate, on one colour scale (one colour bar) for every panel."""
  from matplotlib import colors  # pylint: disable=g-import-not-at-top
  plt = reports.pyplot()
  fig, axes = plt.subplots(1, len(learning_rates), squeeze=False,
                           figsize=(3.8 * len(learning_rates) + 1.2, 3.8),
                           layout='constrained')
  rounds = len(next(iter(curves.values())))
  grids = {lr: np.log10(np.maximum([curves[lr, k] for k in local_steps],
                                   1e-12)) for lr in learning_rates}
  finite = np.concatenate([g.ravel() for g in grids.values()])
  finite = finite[np.isfinite(finite)]  # A diverged run's cells are blank.
  norm = colors.Normalize(*((finite.min(), finite.max()) if finite.size
                            else (None, None)))
  for ax, lr in zip(axes[0], learning_rates):
    image = ax.imshow(grids[lr], aspect='auto', origin='lower', cmap='viridis',
                      norm=norm, interpolation='nearest',
                      extent=(0.5, rounds + 0.5, -0.5, len(local_steps) - 0.5))
    ax.set_yticks(range(len(local_steps)), [str(k) for k in local_steps])
    reports.round_axis(ax)
    ax.set_title(f'learning rate {lr:g}', fontsize=9)
  axes[0][0].set_ylabel('local steps')
  fig.colorbar(image, ax=list(axes[0]),
               label=r'$\log_{10} \Omega$ (distance to the global minimum)')
  reports.save_figure(fig, path)


def main(argv):
  command.check_arguments(argv, FLAGS.output_dir)
  command.apply_preset(PRESETS)
  learning_rates = command.parse_numbers(
      'learning_rates', FLAGS.learning_rates, float, minimum=0,
      exclusive=True)
  local_steps = command.parse_numbers(
      'local_steps', FLAGS.local_steps, int, minimum=1)
  rounds = FLAGS.rounds
  command.quiet_logs()
  optimum, curves = run(FLAGS.output_dir, learning_rates=learning_rates,
                        local_steps=local_steps, rounds=rounds,
                        num_points=FLAGS.num_points, seed=FLAGS.seed)
  print(f'global minimum (alpha*, beta*) = ({optimum[0]:.4f}, '
        f'{optimum[1]:.4f}); Omega after round {rounds}:')
  print(f'{"local steps":>11}' + ''.join(f'{f"lr {lr:g}":>12}'
                                         for lr in learning_rates))
  for k in local_steps:
    print(f'{k:>11}' + ''.join(f'{curves[lr, k][-1]:>12.4f}'
                               for lr in learning_rates))
  print(f'written: {FLAGS.output_dir}/fedavg.csv, fedavg.png')


if __name__ == '__main__':
  command.run(main)
