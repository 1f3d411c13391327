"""FedAvg against centralised gradient descent on SyntheticSeq: the runs
behind `tasks.synthetic_seq.divergence` (seed 002 §4.2, Eq. 4.1), without
flags, so that tests and notebooks can import them."""

import collections
import csv
import os

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tasks.common import registry
from tasks.common import reports
from tasks.synthetic_seq import data
from tasks.synthetic_seq import task as seq_task
from tff_mixed import driver
from tff_mixed.driver import history
from tff_mixed.metrics import niid


class PooledLoss:
  """The loss of given weights on the union of the clients' data."""

  def __init__(self, pooled):
    batch = seq_task.examples(pooled)
    self._x, self._y = tf.constant(batch['x']), tf.constant(batch['y'])
    self._loss = tf.function(seq_task.sequence_loss, autograph=False)

  def __call__(self, weights) -> float:
    return float(self._loss([tf.constant(w) for w in weights], self._x,
                            self._y))


def central_losses(pooled, weights, learning_rate, steps):
  """Losses of centralised full-batch gradient descent after 0..steps steps."""
  variables = [tf.Variable(w) for w in weights]
  batch = seq_task.examples(pooled)
  x, y = tf.constant(batch['x']), tf.constant(batch['y'])

  @tf.function(autograph=False)
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
  # Every client every round (Ch. 4's setting).
  driver.run_rounds(
      process, state, lambda r: datasets, range(1, rounds + 1),
      lambda r, output, seconds: losses.append(
          pooled_loss(process.get_model_weights(output.state).trainable)))
  return np.asarray(losses)


def _read_run(path):
  """(FedAvg losses, centralised losses) of a finished run, each value as
  it was before `reports.write_csv` wrote it (a float32's short form reads
  back as that float32: `history.csv_read`)."""
  with open(path) as f:
    rows = list(csv.DictReader(f))
  read = lambda name: np.asarray([history.csv_read(r[name]) for r in rows])
  return read('fed_avg_loss'), read('central_loss')


def run(output_dir, *, settings, learning_rates, local_steps, rounds, seed,
        config=data.SyntheticSeqConfig(), reading=data.ALGORITHM_3):
  """Runs (or reuses) every run; returns {(shift, value, lr, E): Omega[T]}."""
  runs_dir = os.path.join(output_dir, 'runs')
  os.makedirs(runs_dir, exist_ok=True)
  weights = seq_task.initial_weights(config, seed)
  processes, results, rows = {}, collections.OrderedDict(), []
  for shift, k, epsilon in settings:
    clients = data.synthetic_seq(k, epsilon, config=config, seed=seed,
                                 reading=reading)
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
            processes[lr, e] = registry.build_process(
                registry.AlgorithmConfig(
                    algorithm='fedavg', num_local_steps=e,
                    client=registry.OptimizerSpec(learning_rate=lr)),
                seq_task.model_fn_for(config))
          fed = fed_avg_losses(processes[lr, e], clients, weights,
                               pooled_loss, rounds)
          central_at = central[e * np.arange(1, rounds + 1)]
          reports.write_csv(path, [
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
  reports.write_csv(os.path.join(output_dir, 'divergence.csv'), rows)
  for shift in sorted({s for s, *_ in settings}):
    plot(results, shift, learning_rates, local_steps,
         os.path.join(output_dir, f'{shift}_{"shift" if shift == "feature" else "drift"}.png'))
  return results


def plot(results, shift, learning_rates, local_steps, path):
  """Writes `path`: Omega over round x local steps E, one panel per setting
  (rows) and learning rate (columns).

  Each measured (round, E) is one cell: no interpolation between the few E
  values. Omega is signed, so the colour map diverges from white at 0, on one
  symmetric scale shared by every panel, with one colour bar; a non-finite
  Omega (a diverged run) is grey.
  """
  from matplotlib import colors  # pylint: disable=g-import-not-at-top
  plt = reports.pyplot()
  values = sorted({v for s, v, _, _ in results if s == shift})
  fig, axes = plt.subplots(len(values), len(learning_rates), squeeze=False,
                           figsize=(4.2 * len(learning_rates) + 1.4,
                                    2.6 * len(values) + 0.6),
                           layout='constrained')
  grids = {(value, lr): np.array([results[shift, value, lr, e]
                                  for e in local_steps])
           for value in values for lr in learning_rates}
  # Symmetric limits: white is Omega = 0 in every panel (a diverged run's
  # non-finite Omega is grey).
  finite = np.abs(np.concatenate([g.ravel() for g in grids.values()]))
  finite = finite[np.isfinite(finite)]
  limit = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
  norm = colors.CenteredNorm(vcenter=0.0, halfrange=limit)
  cmap = plt.get_cmap('RdBu_r').with_extremes(bad='tab:gray')
  name = '$K$' if shift == 'feature' else r'$\epsilon$'
  for i, value in enumerate(values):
    for j, lr in enumerate(learning_rates):
      omega = grids[value, lr]
      ax = axes[i][j]
      mesh = ax.pcolormesh(np.arange(omega.shape[1] + 1) + 0.5,
                           np.arange(len(local_steps) + 1) - 0.5, omega,
                           cmap=cmap, norm=norm, shading='flat')
      ax.set_yticks(range(len(local_steps)), [str(e) for e in local_steps])
      ax.set_title(f'{name} = {value:g}, lr {lr:g}', fontsize=9)
      reports.round_axis(ax)
      ax.set_ylabel('local steps E')
  fig.colorbar(mesh, ax=axes.ravel().tolist(),
               label=r'$\Omega = L_\mathrm{FedAvg} - L_\mathrm{central}$ '
               '(nats)')
  fig.suptitle('FedAvg vs centralised GD on SyntheticSeq, '
               + ('feature shift' if shift == 'feature' else 'concept drift')
               + '\n(red: FedAvg behind, blue: ahead)', fontsize=10)
  reports.save_figure(fig, path)
