r"""How far the in-process runtime's model is from TFF's worker's on digits.

  .venv/bin/python bench/runtimes_agree.py

FedAvg (K = 10, client rate 0.1) on the digits task from the same initial
model, faithful and fast (2 groups), 3 and 10 clients, three rounds on each
runtime; prints the largest |w_in_process - w_tff| over the weights after
each round. Not bit for bit: the two runtimes' kernels add in their own
orders (docs/execution.md, "Runtimes"). No timing.
"""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top

from tasks.digits import task as digits  # pylint: disable=g-import-not-at-top
from tff_mixed import algorithms  # pylint: disable=g-import-not-at-top
from tff_mixed import driver  # pylint: disable=g-import-not-at-top
from tff_mixed import execution  # pylint: disable=g-import-not-at-top
from tff_mixed import group_data  # pylint: disable=g-import-not-at-top
from tff_mixed.templates import client_groups  # pylint: disable=g-import-not-at-top

ROUNDS = 3


def _weights(process, start, data):
  state, out = start, []
  for _ in range(ROUNDS):
    state, _ = process.next(state, data)
    out.append(tf.nest.flatten(process.get_model_weights(state).trainable))
  return out


def main():
  task = digits.create_digits_task(seed=0)
  for groups in (0, 2):
    for clients in (3, 10):
      process = algorithms.build_fed_avg(
          task.model_fn, tff.learning.optimizers.build_sgdm(learning_rate=0.1),
          num_local_steps=10,
          client_groups=client_groups.ClientGroups(groups) if groups else None)
      start = process.set_model_weights(
          process.initialize(),
          driver.seeded_initial_weights(task.model_fn, 0))
      data = [task.train_dataset_fn(c)
              for c in task.train_client_ids[:clients]]
      if groups:
        data = group_data.group_datasets(data, groups)
      runs = {}
      for runtime in (execution.IN_PROCESS, execution.TFF):
        with execution.running_on(runtime):
          runs[runtime] = _weights(process, start, data)
      gaps = [max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
                  for a, b in zip(x, y))
              for x, y in zip(runs[execution.IN_PROCESS], runs[execution.TFF])]
      mode = f'fast ({groups} groups)' if groups else 'faithful'
      print(f'{mode:16} S = {clients:2}: max |dw| after rounds 1-{ROUNDS}: '
            + ', '.join(f'{g:.2g}' for g in gaps))
  execution.shutdown()


if __name__ == '__main__':
  main()
