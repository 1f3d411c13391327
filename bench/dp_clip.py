r"""DP-FedAvg's per-client clip in a vectorised group: `L2Loss` vs `reduce_sum`.

  .venv/bin/python bench/dp_clip.py [--rounds=10] [--clients=50]

`client_extensions.ClipUpdate` clips each client's update to norm C. With
`tf.clip_by_global_norm` (before e4545a9) the norm is an `L2Loss` op, which
`tf.vectorized_map` has no converter for: a vectorised group clipped its
clients one by one in a `while_loop`. `ClipUpdate` now sums the squares with
`reduce_sum`. This builds digits FedAvg with `aggregators.gaussian_fixed`
(K = 10, one vectorised group, in process) once with each clip, trains the
same cohorts on both in turn, and prints each build's time (the first also
pays the process's one-time TensorFlow costs), the median round and the
ratio, and how far the two models end apart.
"""

import argparse
import os
import statistics
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top

from tasks.digits import task as digits_task  # pylint: disable=g-import-not-at-top
from tff_mixed import aggregators  # pylint: disable=g-import-not-at-top
from tff_mixed import algorithms  # pylint: disable=g-import-not-at-top
from tff_mixed import driver  # pylint: disable=g-import-not-at-top
from tff_mixed import execution  # pylint: disable=g-import-not-at-top
from tff_mixed.templates import client_extensions  # pylint: disable=g-import-not-at-top
from tff_mixed.templates import client_groups  # pylint: disable=g-import-not-at-top


def _l2loss_clip(self, update):
  """The clip before e4545a9: `tf.clip_by_global_norm`."""
  clipped, _ = tf.clip_by_global_norm(tf.nest.flatten(update),
                                      self._clip_norm)  # pylint: disable=protected-access
  return tf.nest.pack_sequence_as(update, clipped)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--rounds', type=int, default=10)
  parser.add_argument('--warmup', type=int, default=2)
  parser.add_argument('--clients', type=int, default=50)
  args = parser.parse_args()
  tf.get_logger().setLevel('ERROR')  # pfor's warning per L2Loss trace.
  execution.set_runtime('in_process')
  task = digits_task.create_digits_task(num_clients=200, seed=0)
  sgd = lambda lr: tff.learning.optimizers.build_sgdm(learning_rate=lr)
  reduce_sum_clip = client_extensions.ClipUpdate.transform_update
  processes, build = {}, {}
  for name, clip in (('L2Loss (tf.clip_by_global_norm)', _l2loss_clip),
                     ('reduce_sum (ClipUpdate)', reduce_sum_clip)):
    client_extensions.ClipUpdate.transform_update = clip
    start = time.perf_counter()
    processes[name] = algorithms.build_fed_avg(
        task.model_fn, sgd(0.1), sgd(1.0), num_local_steps=10,
        model_aggregator=aggregators.gaussian_fixed(
            0.0, args.clients, clip_norm=0.5),
        client_groups=client_groups.ClientGroups())
    build[name] = time.perf_counter() - start
  client_extensions.ClipUpdate.transform_update = reduce_sum_clip
  start_weights = driver.seeded_initial_weights(task.model_fn, 0)
  states = {n: p.set_model_weights(p.initialize(), start_weights)
            for n, p in processes.items()}
  rounds = {name: [] for name in processes}
  for round_num in range(1, args.warmup + args.rounds + 1):
    groups = task.cohort_groups(0, round_num, args.clients, 1)
    for name, process in processes.items():
      start = time.perf_counter()
      states[name] = process.next(states[name], groups).state
      if round_num > args.warmup:
        rounds[name].append(time.perf_counter() - start)
  weights = [tf.nest.flatten(p.get_model_weights(states[n]).trainable)
             for n, p in processes.items()]
  gap = max(float(np.max(np.abs(a - b))) for a, b in zip(*weights))
  print(f'digits, DP-FedAvg (noise 0, clip 0.5), S = {args.clients} in one '
        f'vectorised group, K = 10, in process, {args.rounds} rounds each')
  print('| clip | build (s) | median round (ms) |')
  print('|---|---|---|')
  med = {n: statistics.median(r) * 1e3 for n, r in rounds.items()}
  for name in processes:
    print(f'| {name} | {build[name]:.1f} | {med[name]:.1f} |')
  old, new = med.values()
  print(f'round: reduce_sum / L2Loss = {new / old:.2f}; '
        f'max |w_L2Loss - w_reduce_sum| after the rounds: {gap:.1e}')


if __name__ == '__main__':
  main()
