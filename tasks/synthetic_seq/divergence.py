r"""FedAvg's divergence from centralised training on SyntheticSeq (seed 002
§4.2-4.4, Fig. 4.5-4.6).

  python -m tasks.synthetic_seq.divergence --preset=cpu_small \
      --output_dir=/tmp/synthetic_seq_divergence

For feature shift (SyntheticSeq(K, 0), K over `--num_clusters`) and concept
drift (SyntheticSeq(1, epsilon), epsilon over `--epsilons`): FedAvg
(`tff_mixed.algorithms.build_fed_avg`; 20 clients every round, each one
full batch, so a local step is a gradient-descent step on its data) for
every learning rate x local steps E, and centralised gradient descent on the
union of the clients' data at the same learning rate, both from the same
initial weights. Omega(t, E) = L_FedAvg(round t) - L_central(E t steps)
(Eq. 4.1 in losses; the same number of gradient steps, as Ch. 3 compares),
both on the union of the training data. With E = 1 FedAvg *is* centralised
gradient descent (equal clients, full batches), so Omega is 0 there.

Writes `divergence.csv` (one row per setting, learning rate, E and round:
both losses and Omega),
`feature_shift.png` / `concept_drift.png` (Omega contours over round x E, a
row per setting and a column per learning rate, as Fig. 4.5-4.6) and
`runs/` (one file per run: a restart with the same flags reuses finished
runs), and prints the mean Omega of each setting. The paper grid (8
settings x 3 rates x 5 E x 1000 rounds) takes days here; `cpu_small`
(4 settings x 1 rate x 3 E x 20 rounds) minutes.
"""

import collections
import csv
import os
import sys

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tasks import outputs
from tasks.synthetic_seq import data
from tasks.synthetic_seq import task as seq_task
from tff_mixed import algorithms
from tff_mixed import driver
from tff_mixed.metrics import niid

PRESETS = {
    'paper': dict(num_clusters=[1, 2, 5, 10], epsilons=[1, 2, 5, 10],
                  learning_rates=[0.1, 0.01, 0.001],
                  local_steps=[1, 2, 5, 10, 20], rounds=1000),
    'cpu_small': dict(num_clusters=[1, 10], epsilons=[1, 10],
                      learning_rates=[0.1], local_steps=[1, 2, 5],
                      rounds=20),
}
flags.DEFINE_string('output_dir', None, 'Where the table, plots and runs go.')
flags.DEFINE_enum('preset', 'paper', list(PRESETS),
                  'Grid: paper (§4.2) or cpu_small; the flags below '
                  'override it.')
flags.DEFINE_enum('shift', 'both', ['feature', 'concept', 'both'],
                  'Which experiment: feature shift (K), concept drift '
                  '(epsilon) or both.')
flags.DEFINE_list('num_clusters', None, 'K of SyntheticSeq(K, 0).')
flags.DEFINE_list('epsilons', None, 'epsilon of SyntheticSeq(1, epsilon).')
flags.DEFINE_list('learning_rates', None, 'Client (and centralised) rates.')
flags.DEFINE_list('local_steps', None, 'Local steps E per round.')
flags.DEFINE_integer('rounds', None, 'Rounds T.', lower_bound=1)
flags.DEFINE_integer('seed', 0, 'Seeds the data and the initial weights.')
FLAGS = flags.FLAGS


class PooledLoss:
  """The loss of given weights on the union of the clients' data."""

  def __init__(self, pooled):
    batch = seq_task.examples(pooled)
    self._x, self._y = tf.constant(batch['x']), tf.constant(batch['y'])
    self._loss = tf.function(seq_task.sequence_loss)

  def __call__(self, weights) -> float:
    return float(self._loss([tf.constant(w) for w in weights], self._x,
                            self._y))


def central_losses(pooled, weights, learning_rate, steps):
  """Losses of centralised full-batch gradient descent after 0..steps steps."""
  variables = [tf.Variable(w) for w in weights]
  batch = seq_task.examples(pooled)
  x, y = tf.constant(batch['x']), tf.constant(batch['y'])

  @tf.function
  def step():
    with tf.GradientTape() as tape:
      loss = seq_task.sequence_loss(variables, x, y)
    gradients = tape.gradient(loss, variables)
    for variable, gradient in zip(variables, gradients):
      variable.assign_sub(learning_rate * tf.convert_to_tensor(gradient))
    return loss

  losses = [float(step()) for _ in range(steps)]
  losses.append(float(seq_task.sequence_loss(variables, x, y)))
  return np.asarray(losses)


def fed_avg_losses(process, clients, weights, pooled_loss, rounds):
  """L_FedAvg on the union of the data after rounds 1..T."""
  state = process.set_model_weights(
      process.initialize(),
      tff.learning.models.ModelWeights(trainable=list(weights),
                                       non_trainable=[]))
  datasets = [seq_task.full_batch(c) for c in clients]
  losses = []
  for _ in range(rounds):
    state = process.next(state, datasets).state
    losses.append(pooled_loss(process.get_model_weights(state).trainable))
  return np.asarray(losses)


def _read_run(path):
  """(FedAvg losses, centralised losses) of a finished run."""
  with open(path) as f:
    rows = list(csv.DictReader(f))
  return (np.asarray([float(r['fed_avg_loss']) for r in rows]),
          np.asarray([float(r['central_loss']) for r in rows]))


def run(output_dir, *, settings, learning_rates, local_steps, rounds, seed,
        config=data.SyntheticSeqConfig()):
  """Runs (or reuses) every run; returns {(shift, value, lr, E): Omega[T]}."""
  runs_dir = os.path.join(output_dir, 'runs')
  os.makedirs(runs_dir, exist_ok=True)
  weights = seq_task.initial_weights(config, seed)
  processes, results, rows = {}, collections.OrderedDict(), []
  for shift, k, epsilon in settings:
    clients = data.synthetic_seq(k, epsilon, config=config, seed=seed)
    pooled = np.concatenate(clients)
    measure = niid.federation_measure(clients, config.vocab_size)
    value = k if shift == 'feature' else epsilon
    pooled_loss = PooledLoss(pooled)
    for lr in learning_rates:
      central = None
      for e in local_steps:
        path = os.path.join(runs_dir, f'{shift}_{value:g}_lr{lr:g}_E{e}.csv')
        if os.path.exists(path):
          fed, central_at = _read_run(path)
        else:
          if central is None:
            central = central_losses(pooled, weights, lr,
                                     max(local_steps) * rounds)
          if (lr, e) not in processes:
            processes[lr, e] = algorithms.build_fed_avg(
                seq_task.model_fn_for(config),
                tff.learning.optimizers.build_sgdm(lr), num_local_steps=e)
          fed = fed_avg_losses(processes[lr, e], clients, weights,
                               pooled_loss, rounds)
          central_at = central[e * np.arange(1, rounds + 1)]
          outputs.write_csv(path, [
              dict(round=t + 1, fed_avg_loss=f, central_loss=c)
              for t, (f, c) in enumerate(zip(fed, central_at))])
        omega = niid.loss_divergence(central_at, fed)
        results[shift, value, lr, e] = omega
        rows += [dict(shift=shift, num_clusters=k, epsilon=epsilon,
                      sigma_feature=measure.feature,
                      sigma_conditional=measure.conditional,
                      learning_rate=lr, local_steps=e, round=t + 1,
                      fed_avg_loss=f, central_loss=c, omega=o)
                 for t, (f, c, o) in enumerate(zip(fed, central_at, omega))]
        print(f'{shift} {value:g} lr={lr:g} E={e}: final Omega '
              f'{omega[-1]:.4f}', flush=True)
  outputs.write_csv(os.path.join(output_dir, 'divergence.csv'), rows)
  for shift in sorted({s for s, *_ in settings}):
    plot(results, shift, learning_rates, local_steps,
         os.path.join(output_dir, f'{shift}_{"shift" if shift == "feature" else "drift"}.png'))
  return results


def plot(results, shift, learning_rates, local_steps, path):
  plt = outputs.pyplot()
  values = sorted({v for s, v, _, _ in results if s == shift})
  fig, axes = plt.subplots(len(values), len(learning_rates), squeeze=False,
                           figsize=(4.2 * len(learning_rates),
                                    2.8 * len(values)))
  name = 'K' if shift == 'feature' else 'epsilon'
  for i, value in enumerate(values):
    for j, lr in enumerate(learning_rates):
      omega = np.array([results[shift, value, lr, e] for e in local_steps])
      ax = axes[i][j]
      if len(local_steps) > 1:
        contour = ax.contourf(np.arange(1, omega.shape[1] + 1), local_steps,
                              omega, levels=12, cmap='viridis')
        fig.colorbar(contour, ax=ax, label='Omega')
      else:
        ax.plot(np.arange(1, omega.shape[1] + 1), omega[0])
      ax.set_title(f'{name} = {value:g}, lr {lr:g}', fontsize=9)
      ax.set_xlabel('round')
      ax.set_ylabel('local steps E')
  fig.tight_layout()
  outputs.save_figure(fig, path)


def main(argv):
  outputs.start_experiment(argv, FLAGS.output_dir, tff_context=False)
  preset = PRESETS[FLAGS.preset]

  def pick(name, cast, minimum):
    given = FLAGS[name].value
    return outputs.parse_numbers(
        name, given or [str(v) for v in preset[name]], cast, minimum=minimum,
        exclusive=name == 'learning_rates')

  config = data.SyntheticSeqConfig()
  num_clusters = pick('num_clusters', int, 1)
  if max(num_clusters) > config.num_clients:
    raise app.UsageError(f'--num_clusters must be <= {config.num_clients} '
                         f'(the clients), got {max(num_clusters)}.')
  epsilons = pick('epsilons', float, 0.0)
  learning_rates = pick('learning_rates', float, 0.0)
  local_steps = pick('local_steps', int, 1)
  rounds = FLAGS.rounds or preset['rounds']
  settings = []
  if FLAGS.shift in ('feature', 'both'):
    settings += [('feature', k, 0.0) for k in num_clusters]
  if FLAGS.shift in ('concept', 'both'):
    settings += [('concept', 1, eps) for eps in epsilons]
  try:
    driver.prepare_output_dir(FLAGS.output_dir, dict(
        settings=settings, learning_rates=learning_rates,
        local_steps=local_steps, rounds=rounds, seed=FLAGS.seed))
  except driver.OutputDirError as e:
    sys.exit(f'Error: {e}')
  outputs.start_experiment(argv, FLAGS.output_dir)
  results = run(FLAGS.output_dir, settings=settings,
                learning_rates=learning_rates, local_steps=local_steps,
                rounds=rounds, seed=FLAGS.seed, config=config)
  print(f'{"setting":<16}' + ''.join(f'{f"lr {lr:g}":>12}'
                                     for lr in learning_rates)
        + '   (mean Omega over E and rounds)')
  for shift, k, epsilon in settings:
    value = k if shift == 'feature' else epsilon
    label = f'K={k}' if shift == 'feature' else f'epsilon={epsilon:g}'
    print(f'{label:<16}' + ''.join(
        f'{np.mean([results[shift, value, lr, e] for e in local_steps]):>12.4f}'
        for lr in learning_rates))
  print(f'written: {FLAGS.output_dir}/divergence.csv and plots')


if __name__ == '__main__':
  app.run(main)
