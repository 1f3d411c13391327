r"""What per-round client shuffling costs: digits, fast mode, side by side.

  .venv/bin/python bench/shuffle_cost.py [--rounds=20] [--clients=100]

The same FedAvg process (K = 10, two client groups) trains rounds whose
cohorts come from `Task.cohort_groups` with `client_shuffle='per_round'`
(digits permuting its arrays at the source, `Task.train_arrays_fn`, and the
generic `tff_mixed.task.reshuffled` of its datasets any task falls back to)
and with 'none', in turn, so machine noise hits all alike. Prints the median
time to build a cohort's groups on the driver and the median whole round
(build plus `process.next`), and the ratios.
"""

import argparse
import dataclasses
import os
import statistics
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import tensorflow as tf  # pylint: disable=g-import-not-at-top
import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top

from tasks.digits import task as digits_task  # pylint: disable=g-import-not-at-top
from tff_mixed import algorithms  # pylint: disable=g-import-not-at-top
from tff_mixed import execution  # pylint: disable=g-import-not-at-top
from tff_mixed.templates import client_groups  # pylint: disable=g-import-not-at-top


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--rounds', type=int, default=20)
  parser.add_argument('--warmup', type=int, default=2)
  parser.add_argument('--clients', type=int, default=100)
  args = parser.parse_args()
  tf.get_logger().setLevel('ERROR')
  execution.set_local_execution_context()
  shuffled = digits_task.create_digits_task(num_clients=300, seed=0)
  tasks = {
      'per_round (digits permutes its arrays)': shuffled,
      'per_round (generic `reshuffled`)': dataclasses.replace(
          shuffled, train_arrays_fn=None),
      'none': dataclasses.replace(shuffled, client_shuffle='none')}
  sgd = lambda lr: tff.learning.optimizers.build_sgdm(learning_rate=lr)
  process = algorithms.build_fed_avg(shuffled.model_fn, sgd(0.1), sgd(1.0),
                                     num_local_steps=10,
                                     client_groups=client_groups.ClientGroups())
  states = {name: process.initialize() for name in tasks}
  build = {name: [] for name in tasks}
  total = {name: [] for name in tasks}
  for round_num in range(1, args.warmup + args.rounds + 1):
    for name, task in tasks.items():
      start = time.perf_counter()
      groups = task.cohort_groups(0, round_num, args.clients, 2)
      built = time.perf_counter()
      states[name] = process.next(states[name], groups).state
      done = time.perf_counter()
      if round_num > args.warmup:
        build[name].append(built - start)
        total[name].append(done - start)
  med = {n: (statistics.median(build[n]) * 1e3,
             statistics.median(total[n]) * 1e3) for n in tasks}
  print(f'digits, S = {args.clients}, K = 10, fast mode (2 groups), '
        f'{args.rounds} rounds each, alternating')
  print('| client_shuffle | cohort built (ms) | round (ms) |')
  print('|---|---|---|')
  for name, (b, r) in med.items():
    print(f'| {name} | {b:.1f} | {r:.1f} |')
  for name in list(tasks)[:2]:
    print(f'{name} / none: cohort x{med[name][0] / med["none"][0]:.2f}, '
          f'round x{med[name][1] / med["none"][1]:.2f}')


if __name__ == '__main__':
  main()
