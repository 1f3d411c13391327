r"""Driver and worker memory over many rounds (issue 15: flat RSS).

  .venv/bin/python bench/memory.py [--rounds=500] [--clients=50] [--groups=2]
                                   [--group_mode=vectorised|sequential]

Runs FedAvg on `bench/workload.py`'s clients (a new cohort every round, as a
training run samples one) and prints the resident memory of this process and
of the TFF worker at rounds 10, 50, 100, 250, 500, 750, 1000, 1500, 2000 and the last, with the change
from round 10. `--groups=0` runs faithful mode; in fast mode
`--group_mode=vectorised` (the default) trains each group's clients at once
on groups built from the clients' arrays (`group_data.group_arrays`),
`sequential` one after another on groups of their datasets.
"""

import argparse
import collections
import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import tensorflow as tf  # pylint: disable=g-import-not-at-top
import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top

import overhead  # bench/ is sys.path[0]. pylint: disable=g-import-not-at-top
import workload  # pylint: disable=g-import-not-at-top
from tff_mixed import algorithms  # pylint: disable=g-import-not-at-top
from tff_mixed import execution  # pylint: disable=g-import-not-at-top
from tff_mixed import group_data  # pylint: disable=g-import-not-at-top
from tff_mixed.templates import client_groups  # pylint: disable=g-import-not-at-top


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--rounds', type=int, default=500)
  parser.add_argument('--clients', type=int, default=50)
  parser.add_argument('--groups', type=int, default=2)
  parser.add_argument('--group_mode', default=client_groups.VECTORISED,
                      choices=client_groups.MODES)
  args = parser.parse_args()
  vectorised = args.groups and args.group_mode == client_groups.VECTORISED
  tf.get_logger().setLevel('ERROR')
  execution.set_local_execution_context()
  sgd = lambda lr: tff.learning.optimizers.build_sgdm(learning_rate=lr)
  process = algorithms.build_fed_avg(
      overhead.keras_model_fn if vectorised else overhead.model_fn,
      sgd(workload.CLIENT_LR), sgd(workload.SERVER_LR),
      num_local_steps=workload.LOCAL_STEPS,
      client_groups=(client_groups.ClientGroups(args.groups, args.group_mode)
                     if args.groups else None))
  state = process.set_model_weights(
      process.initialize(), tff.learning.models.ModelWeights(
          trainable=workload.initial_weights(), non_trainable=[]))
  pool = 1000  # Distinct clients, cycled: cohorts change every round.
  x, y = overhead.client_arrays(pool)
  marks = sorted({10, 50, 100, 250, 500, 750, 1000, 1500, 2000, args.rounds}
                 & set(range(1, args.rounds + 1)))
  first = None
  worker_at = {}
  print('| round | driver RSS (MB) | worker RSS (MB) | total vs round 10 |')
  print('|---|---|---|---|')
  for round_num in range(1, args.rounds + 1):
    start = (round_num * args.clients) % (pool - args.clients)
    if vectorised:
      data = group_data.group_arrays(
          [collections.OrderedDict(x=xi, y=yi) for xi, yi in zip(
              x[start:start + args.clients], y[start:start + args.clients])],
          workload.BATCH_SIZE, args.groups)
    else:
      cohort = overhead.datasets(x[start:start + args.clients],
                                 y[start:start + args.clients])
      data = (group_data.group_datasets(cohort, args.groups)
              if args.groups else cohort)
    state = process.next(state, data).state
    if round_num in marks:
      driver = overhead.rss_mb(os.getpid())
      worker = overhead.rss_mb(overhead.worker_pid())
      total = driver + worker
      first = first or total
      worker_at[round_num] = worker
      print(f'| {round_num} | {driver:.0f} | {worker:.0f} | '
            f'{100 * (total / first - 1):+.1f} % |', flush=True)
  if 500 in worker_at and args.rounds > 500:
    print(f'worker from round 500 to {args.rounds}: '
          f'{100 * (worker_at[args.rounds] / worker_at[500] - 1):+.1f} %')


if __name__ == '__main__':
  main()
