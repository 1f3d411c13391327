"""FedAvg against centralised gradient descent on SyntheticSeq: the runs
behind `tasks.synthetic_seq.divergence` (seed 002 §4.2, Eq. 4.1), without
flags, so that tests and notebooks can import them."""

import collections
import csv
import os

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tasks import outputs
from tasks import registry
from tasks.synthetic_seq import data
from tasks.synthetic_seq import task as seq_task
from tff_mixed import driver
from tff_mixed.metrics import niid


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
  # Every client every round (Ch. 4's setting).
  driver.run_rounds(
      process, state, lambda r: datasets, range(1, rounds + 1),
      lambda r, output, seconds: losses.append(
          pooled_loss(process.get_model_weights(output.state).trainable)))
  return np.asarray(losses)


def _read_run(path):
  """(FedAvg losses, centralised losses) of a finished run."""
  with open(path) as f:
    rows = list(csv.DictReader(f))
  return (np.asarray([float(r['fed_avg_loss']) for r in rows]),
          np.asarray([float(r['central_loss']) for r in rows]))


def run(output_dir, *, settings, learning_rates, local_steps, rounds, seed,
        config=data.SyntheticSeqConfig(), reading=data.SHARED_BASE):
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
                registry.ExperimentConfig(
                    algorithm='fedavg', num_local_steps=e,
                    client=registry.OptimizerSpec(learning_rate=lr)),
                seq_task.model_fn_for(config))
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
