r"""CPU cost of one round of the seed 004 tasks at the paper's sizes.

  .venv/bin/python bench/paper_round_cost.py [--repeats=5]

Times one SGD step of each paper model (a plain `tf.function`, random data of
the real shapes) at the client batch size |B_i| and at the central batch
size |B_c|, then prints what one round costs when one machine simulates it:
S x K client steps plus J central steps (J = K for PT and 2-way GT, 1 for
1-way GT). TFF's own overhead (seconds per round here) comes on top. Batches
larger than --max_batch are timed at --max_batch and scaled linearly (the
step is compute-bound), which the output marks with '~'.
"""

import argparse
import os
import statistics
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import tensorflow as tf  # pylint: disable=g-import-not-at-top

from tasks.celeba import data as celeba_data  # pylint: disable=g-import-not-at-top
from tasks.celeba import task as celeba_task  # pylint: disable=g-import-not-at-top
from tasks.stackoverflow_wiki import data as lm_data  # pylint: disable=g-import-not-at-top
from tasks.stackoverflow_wiki import task as lm_task  # pylint: disable=g-import-not-at-top

# (task, model_fn, batch -> random batch, S, |B_i|, K, |B_c| 1-way, |B_c| PT/2-way)
_TASKS = (
    ('celeba', celeba_task.model_fn_for(),
     lambda n: {'x': tf.random.uniform((n, *celeba_data.IMAGE_SHAPE)),
                'y': tf.cast(tf.random.uniform((n, 1)) > 0.5, tf.float32)},
     100, 5, 2, 1000, 500),
    ('stackoverflow_wiki', lm_task.model_fn_for(),
     lambda n: {k: tf.random.uniform((n, lm_data.SEQUENCE_LENGTH), 0,
                                     lm_data.VOCAB_SIZE, tf.int32)
                for k in ('x', 'y')},
     100, 8, 16, 6400, 800),
)


def step_seconds(model_fn, make_batch, batch_size, repeats):
  model = model_fn()
  variables = model.trainable_variables
  batch = make_batch(batch_size)

  @tf.function
  def step():
    with tf.GradientTape() as tape:
      loss = model.forward_pass(batch, training=True).loss
    for v, g in zip(variables, tape.gradient(loss, variables)):
      v.assign_sub(0.01 * tf.convert_to_tensor(g))

  step()  # Trace.
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    step()
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--repeats', type=int, default=5)
  parser.add_argument('--max_batch', type=int, default=1000)
  args = parser.parse_args()
  tf.get_logger().setLevel('ERROR')
  print('| task | client step (s) | S x K | central step (s) | round PT / '
        '2-way GT (s) | round 1-way GT (s) | FL only (s) |')
  print('|---|---|---|---|---|---|---|')
  for name, model_fn, make_batch, s, b_i, k, b_c1, b_c in _TASKS:
    client = step_seconds(model_fn, make_batch, b_i, args.repeats)

    def central(size):
      timed = min(size, args.max_batch)
      seconds = step_seconds(model_fn, make_batch, timed, args.repeats)
      return seconds * size / timed, size > timed

    central_pt, _ = central(b_c)
    central_1w, scaled = central(b_c1)
    federated = s * k * client
    mark = '~' if scaled else ''
    print(f'| {name} | {client:.4f} | {s} x {k} | {central_pt:.3f} (|B_c| '
          f'{b_c}) | {federated + k * central_pt:.1f} | '
          f'{mark}{federated + central_1w:.1f} | {federated:.1f} |')


if __name__ == '__main__':
  main()
