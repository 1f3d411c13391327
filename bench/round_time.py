r"""Median FedAvg round time: tff_mixed vs TFF's build_weighted_fed_avg vs bare TF.

  .venv/bin/python bench/round_time.py [--rounds=15] [--clients=20] [--k=10]

All three do the same client work: each of `clients` digits clients takes K
SGD steps (lr 0.1, batch 10) from the same model; the server averages. TFF's
FedAvg gets each client's data pre-cycled to exactly K batches (it runs one
epoch). The bare-TF limit is one `tf.function` running the same clients x K
steps in sequence, without TFF. Rounds of tff_mixed and TFF alternate so that
machine noise hits both alike. Prints medians and the ratios.
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
from tff_mixed import algorithms  # pylint: disable=g-import-not-at-top
from tff_mixed import execution  # pylint: disable=g-import-not-at-top


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--rounds', type=int, default=30)
  parser.add_argument('--warmup', type=int, default=2)
  parser.add_argument('--clients', type=int, default=20)
  parser.add_argument('--k', type=int, default=10)
  args = parser.parse_args()
  tf.get_logger().setLevel('ERROR')
  execution.set_local_execution_context()

  task = digits_task.create_digits_task(num_clients=100, seed=0)
  sgd = lambda lr: tff.learning.optimizers.build_sgdm(learning_rate=lr)
  ours = algorithms.build_fed_avg(task.model_fn, sgd(0.1), sgd(1.0),
                                  num_local_steps=args.k)
  theirs = tff.learning.algorithms.build_weighted_fed_avg(
      task.model_fn, client_optimizer_fn=sgd(0.1), server_optimizer_fn=sgd(1.0))
  ours_state, theirs_state = ours.initialize(), theirs.initialize()

  # Clients with at least one batch, so all three do exactly clients x K steps.
  ids = [c for c in task.train_client_ids
         if task.train_dataset_fn(c).cardinality().numpy() > 0]
  rng = np.random.default_rng(0)
  times = {'tff_mixed': [], 'tff': [], 'bare_tf': []}

  model = task.model_fn()
  trainable = model.trainable_variables

  @tf.function
  def bare_round(dataset):  # One trace: every cohort's dataset has one spec.
    for batch in dataset:
      with tf.GradientTape() as tape:
        loss = model.forward_pass(batch, training=True).loss
      for variable, grad in zip(trainable, tape.gradient(loss, trainable)):
        variable.assign_sub(0.1 * grad)

  for r in range(args.warmup + args.rounds):
    cohort = [ids[i] for i in rng.choice(len(ids), args.clients, replace=False)]
    raw = [task.train_dataset_fn(c) for c in cohort]
    cycled = [d.repeat().take(args.k) for d in raw]
    order = [('tff_mixed', None), ('tff', None)] if r % 2 == 0 else [('tff', None), ('tff_mixed', None)]
    for name, _ in order:
      start = time.perf_counter()
      if name == 'tff_mixed':
        ours_state = ours.next(ours_state, raw).state
      else:
        theirs_state = theirs.next(theirs_state, cycled).state
      elapsed = time.perf_counter() - start
      if r >= args.warmup:
        times[name].append(elapsed)
    sequence = cycled[0]
    for d in cycled[1:]:
      sequence = sequence.concatenate(d)
    start = time.perf_counter()
    bare_round(sequence)
    if r >= args.warmup:
      times['bare_tf'].append(time.perf_counter() - start)

  med = {k: statistics.median(v) for k, v in times.items()}
  # Ratios of the same round's times cancel most of the machine's drift.
  pair = lambda a, b: statistics.median(x / y for x, y in zip(times[a], times[b]))
  print(f'config: digits, {args.clients} clients/round, K={args.k}, batch 10, '
        f'{args.rounds} timed rounds after {args.warmup} warm-up')
  for name, value in med.items():
    print(f'  median round time {name:<10} {value * 1000:8.1f} ms')
  print(f'ratio tff_mixed / tff      = {pair("tff_mixed", "tff"):.3f}  '
        '(median of per-round ratios; goal <= 1.05)')
  print(f'ratio tff_mixed / bare_tf  = {pair("tff_mixed", "bare_tf"):.3f}')


if __name__ == '__main__':
  main()
