r"""TFF's own learning processes on both runtimes, side by side.

  .venv/bin/python bench/tff_processes.py [--clients=20] [--rounds=8]
      [--processes=weighted_fed_avg,fed_sgd,...]

Each of `tff.learning.algorithms`' processes (weighted and unweighted
FedAvg, weighted FedProx, weighted MimeLite, FedSGD, federated evaluation),
built once on `bench/workload.py`'s model (dense 64 -> 128 ReLU -> 10) with
client SGD at lr 0.1, run from the same initial state on TFF's worker
(`--runtime=tff`) and in process (`tff_mixed.runtimes`, the default), the
two alternating round by round after three untimed rounds each, on the
same --clients clients (`workload.client_data`: 40 examples in batches of 8,
so K = 5 steps a client in TFF's `Dataset.reduce` loop). Prints, per
process, the median round on each runtime, the in-process / TFF ratio (the
goal of issue 53: <= 0.5 for each) and the largest absolute difference
between the two runtimes' states after the three untimed rounds. No timing
is asserted anywhere (tests/test_tff_processes.py checks exactness).
"""

import argparse
import collections
import os
import statistics
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top

import workload  # bench/ is sys.path[0]. pylint: disable=g-import-not-at-top
from tff_mixed import execution  # pylint: disable=g-import-not-at-top

RUNTIMES = ('tff', 'in_process')
WARMUP_ROUNDS = 3


def keras_mlp():
  """`bench/workload.py`'s model in Keras."""
  return tf.keras.Sequential([
      tf.keras.layers.InputLayer(input_shape=(workload.INPUT_DIM,)),
      tf.keras.layers.Dense(workload.HIDDEN, activation='relu'),
      tf.keras.layers.Dense(workload.NUM_CLASSES),
  ])


INPUT_SPEC = collections.OrderedDict(
    x=tf.TensorSpec([None, workload.INPUT_DIM], tf.float32),
    y=tf.TensorSpec([None], tf.int32))


def model_fn():
  return tff.learning.models.from_keras_model(
      keras_mlp(), input_spec=INPUT_SPEC,
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      metrics=[tf.keras.metrics.SparseCategoricalAccuracy()])


def _sgd(learning_rate):
  return tff.learning.optimizers.build_sgdm(learning_rate=learning_rate)


BUILDERS = {
    'weighted_fed_avg': lambda: tff.learning.algorithms.build_weighted_fed_avg(
        model_fn, _sgd(workload.CLIENT_LR), _sgd(workload.SERVER_LR)),
    'unweighted_fed_avg':
        lambda: tff.learning.algorithms.build_unweighted_fed_avg(
            model_fn, _sgd(workload.CLIENT_LR), _sgd(workload.SERVER_LR)),
    'weighted_fed_prox':
        lambda: tff.learning.algorithms.build_weighted_fed_prox(
            model_fn, 0.1, _sgd(workload.CLIENT_LR), _sgd(workload.SERVER_LR)),
    'weighted_mime_lite':
        lambda: tff.learning.algorithms.build_weighted_mime_lite(
            model_fn, _sgd(workload.CLIENT_LR), _sgd(workload.SERVER_LR)),
    'fed_sgd': lambda: tff.learning.algorithms.build_fed_sgd(
        model_fn, _sgd(workload.CLIENT_LR)),
    'fed_eval': lambda: tff.learning.algorithms.build_fed_eval(model_fn),
}


def client_datasets(clients):
  """`workload.client_data` of clients 0 to `clients` - 1, batched."""
  datasets = []
  for client in range(clients):
    x, y = workload.client_data(client)
    datasets.append(tf.data.Dataset.from_tensor_slices(
        collections.OrderedDict(x=x, y=y.astype(np.int32))).batch(
            workload.BATCH_SIZE))
  return datasets


def _max_difference(a, b) -> float:
  return max((float(np.max(np.abs(np.asarray(x, np.float64) -
                                  np.asarray(y, np.float64))))
              for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b))
              if np.asarray(x).size), default=0.0)


def measure(name, clients, rounds):
  """(median seconds a round on each runtime, max |difference| of the
  states after the untimed rounds)."""
  process = BUILDERS[name]()
  data = client_datasets(clients)
  with execution.running_on('in_process'):
    start = process.initialize()
  states = {}
  for runtime in RUNTIMES:
    with execution.running_on(runtime):
      state = start
      for _ in range(WARMUP_ROUNDS):
        state = process.next(state, data).state
      states[runtime] = state
  times = {runtime: [] for runtime in RUNTIMES}
  for _ in range(rounds):
    for runtime in RUNTIMES:
      with execution.running_on(runtime):
        begin = time.perf_counter()
        states[runtime] = process.next(states[runtime], data).state
        times[runtime].append(time.perf_counter() - begin)
  medians = {r: statistics.median(t) for r, t in times.items()}
  return medians, _max_difference(*[states[r] for r in RUNTIMES])


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--clients', type=int, default=20)
  parser.add_argument('--rounds', type=int, default=8)
  parser.add_argument('--processes', default=','.join(BUILDERS))
  args = parser.parse_args()
  names = args.processes.split(',')
  unknown = sorted(set(names) - set(BUILDERS))
  if unknown:
    parser.error(f'--processes: unknown {unknown}; choose from '
                 f'{sorted(BUILDERS)}')
  print(f'{args.clients} clients, {args.rounds} timed rounds a runtime '
        '(median ms a round)')
  print(f'{"process":<20} {"tff":>9} {"in_process":>11} {"ratio":>6} '
        f'{"max |dw|":>9}')
  for name in names:
    medians, difference = measure(name, args.clients, args.rounds)
    print(f'{name:<20} {1e3 * medians["tff"]:9.1f} '
          f'{1e3 * medians["in_process"]:11.1f} '
          f'{medians["in_process"] / medians["tff"]:6.3f} '
          f'{difference:9.1e}', flush=True)
  execution.shutdown()


if __name__ == '__main__':
  main()
