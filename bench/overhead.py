r"""Per-client overhead of a FedAvg round: faithful and fast mode vs TFF vs bare TF.

  .venv/bin/python bench/overhead.py                 # S in 10,50,200; K=5
  .venv/bin/python bench/overhead.py --clients=10,50,200,1000 --steps=1,5,20

Workload (issue 15's, `bench/workload.py`, the one `bench/peers.py` runs in
FedJAX and pfl-research): a dense 64 -> 128 ReLU -> 10 classifier, every
client 40 examples (batch 8, so 5 batches), K SGD steps at lr 0.1, server SGD
at lr 1, S clients a round. Side by side, alternating within each round:

* `faithful`: `build_fed_avg`, one TFF client per simulated client;
* `seq groups=G`: `build_fed_avg(client_groups=ClientGroups(
  mode='sequential'))` fed `group_data.group_datasets(cohort, G)` (grouping is timed too): each
  group's clients trained one after another;
* `vec groups=G`: the same with the model a `tff_mixed.models.KerasModelFn`
  and `client_groups=ClientGroups()`: each group's clients trained at once
  (`tff_mixed.templates.vectorised`);
* `vec arrays groups=G`: the same fed `group_data.group_arrays` of the
  clients' arrays (no `tf.data` on the driver, as `Task.cohort_groups` does
  for a task with `train_arrays_fn`);
* `tff_reduce` / `tff_iterator`: TFF's `build_weighted_fed_avg` with each
  loop implementation, every client's data pre-cycled to K batches;
* `bare`: one `tf.function` taking the same S x K steps on one model, no
  TFF (the arithmetic plus tf.data);
* `bare jit` (with `--jit`): the same with each step XLA-compiled;
* `faithful ids` (with `--ids`): the faithful process composed with TFF's
  `compose_dataset_computation_with_learning_process`, so a round sends
  client ids and the worker builds each client's dataset;
* `pt groups=2` (with `--mixed`): mixed FL Parallel Training in fast mode,
  its central data one more client's worth (40 examples, J = K steps).

With `--local_workers=N`, a second phase times `groups=2N` on N local TFF
workers behind TFF's mergeable context (after the first phase, so not
interleaved with it).

Prints median round times, per-client overhead (round - bare) / S, the
least-squares fit of round time against S with its R^2, and the driver's and
the worker's resident memory. No timing is asserted anywhere.
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
from tff_mixed import algorithms  # pylint: disable=g-import-not-at-top
from tff_mixed import execution  # pylint: disable=g-import-not-at-top
from tff_mixed import group_data  # pylint: disable=g-import-not-at-top
from tff_mixed import models  # pylint: disable=g-import-not-at-top
from tff_mixed.templates import client_groups  # pylint: disable=g-import-not-at-top

DIM, HIDDEN, CLASSES = workload.INPUT_DIM, workload.HIDDEN, workload.NUM_CLASSES
BATCH, CLIENT_LR = workload.BATCH_SIZE, workload.CLIENT_LR


def input_spec():
  return collections.OrderedDict(
      x=tf.TensorSpec([None, DIM], tf.float32),
      y=tf.TensorSpec([None], tf.int32))


def keras_model():
  return tf.keras.Sequential([
      tf.keras.layers.InputLayer(input_shape=(DIM,)),
      tf.keras.layers.Dense(HIDDEN, activation='relu'),
      tf.keras.layers.Dense(CLASSES),
  ])


def model_fn():
  return tff.learning.models.from_keras_model(
      keras_model(), input_spec=input_spec(),
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))


keras_model_fn = models.KerasModelFn(
    keras_model, input_spec=input_spec(),
    loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))


def client_arrays(num_clients):
  data = [workload.client_data(c) for c in range(num_clients)]
  return np.stack([x for x, _ in data]), np.stack([y for _, y in data])


def datasets(x, y):
  return [tf.data.Dataset.from_tensor_slices(
      collections.OrderedDict(x=xi, y=yi)).batch(BATCH) for xi, yi in zip(x, y)]


def rss_mb(pid):
  try:
    with open(f'/proc/{pid}/status') as f:
      for line in f:
        if line.startswith('VmRSS:'):
          return int(line.split()[1]) / 1024
  except OSError:
    pass
  return float('nan')


def worker_pid():
  watchdog = execution._worker.pid if execution._worker else None  # pylint: disable=protected-access
  if watchdog is None:
    return None
  try:
    with open(f'/proc/{watchdog}/task/{watchdog}/children') as f:
      children = f.read().split()
    return int(children[0]) if children else None
  except OSError:
    return None


def build_bare(steps, jit_step=False):
  """One `tf.function` taking the cohort's S x K steps on one model.

  With `jit_step`, each step is an inner `tf.function(jit_compile=True)`
  (XLA-compiled step, the loop itself stays a TF while loop).
  """
  model = keras_model()
  loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

  def step(batch):
    with tf.GradientTape() as tape:
      loss = loss_fn(batch['y'], model(batch['x']))
    for variable, grad in zip(model.trainable_variables,
                              tape.gradient(loss, model.trainable_variables)):
      variable.assign_sub(CLIENT_LR * grad)

  step = tf.function(step, jit_compile=True) if jit_step else step

  @tf.function
  def bare_round(dataset):
    for batch in dataset:
      step(batch)

  def run(cohort):
    sequence = cohort[0].repeat().take(steps)
    for d in cohort[1:]:
      sequence = sequence.concatenate(d.repeat().take(steps))
    bare_round(sequence)

  return run


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--clients', default='10,50,200')
  parser.add_argument('--steps', default='5')
  parser.add_argument('--groups', default='1,2')
  parser.add_argument('--rounds', type=int, default=5)
  parser.add_argument('--skip', default='',
                      help='Comma-separated implementations not to run.')
  parser.add_argument('--mixed', action='store_true',
                      help='Also time mixed FL Parallel Training (J = K).')
  parser.add_argument('--jit', action='store_true',
                      help='Also time the bare loop with XLA-compiled steps.')
  parser.add_argument('--ids', action='store_true',
                      help='Also time faithful mode sending client ids.')
  parser.add_argument('--local_workers', type=int, default=0,
                      help='Then time fast mode on this many local workers.')
  args = parser.parse_args()
  tf.get_logger().setLevel('ERROR')
  execution.set_local_execution_context()
  sizes = [int(s) for s in args.clients.split(',')]
  group_counts = [int(g) for g in args.groups.split(',')]
  skip = set(filter(None, args.skip.split(',')))
  sgd = lambda lr: tff.learning.optimizers.build_sgdm(learning_rate=lr)
  x_all, y_all = client_arrays(max(sizes))
  weights = tff.learning.models.ModelWeights(
      trainable=workload.initial_weights(), non_trainable=[])
  loops = tff.learning.LoopImplementation
  tff_processes = {
      'tff_reduce': tff.learning.algorithms.build_weighted_fed_avg(
          model_fn, sgd(CLIENT_LR), sgd(1.0),
          loop_implementation=loops.DATASET_REDUCE),
      'tff_iterator': tff.learning.algorithms.build_weighted_fed_avg(
          model_fn, sgd(CLIENT_LR), sgd(1.0),
          loop_implementation=loops.DATASET_ITERATOR),
  }
  rows = []
  for steps in [int(k) for k in args.steps.split(',')]:
    ours = {'faithful': algorithms.build_fed_avg(
        model_fn, sgd(CLIENT_LR), sgd(1.0), num_local_steps=steps)}
    sequential = algorithms.build_fed_avg(
        model_fn, sgd(CLIENT_LR), sgd(1.0), num_local_steps=steps,
        client_groups=client_groups.ClientGroups(
            mode=client_groups.SEQUENTIAL))
    vectorised = algorithms.build_fed_avg(
        keras_model_fn, sgd(CLIENT_LR), sgd(1.0), num_local_steps=steps,
        client_groups=client_groups.ClientGroups())
    for g in group_counts:
      ours[f'seq groups={g}'] = sequential
      ours[f'vec groups={g}'] = vectorised
      ours[f'vec arrays groups={g}'] = vectorised
    if args.ids:
      client_data = tff.simulation.datasets.TestClientData(
          {str(i): collections.OrderedDict(x=x, y=y)
           for i, (x, y) in enumerate(zip(x_all, y_all))}
      ).preprocess(lambda d: d.batch(BATCH))
      ours['faithful ids'] = (
          tff.simulation.compose_dataset_computation_with_learning_process(
              client_data.dataset_computation, ours['faithful']))
    if args.mixed:
      central_x, central_y = workload.client_data(10**6)
      ours['pt groups=2'] = algorithms.build_mixed_fl(
          keras_model_fn, sgd(CLIENT_LR), sgd(1.0),
          central_data_fn=lambda: datasets([central_x], [central_y])[0],
          mixing='parallel_training', num_local_steps=steps,
          num_central_steps=steps, client_groups=client_groups.ClientGroups())
    processes = {**ours, **tff_processes}
    processes = {k: v for k, v in processes.items() if k not in skip}
    states = {name: p.set_model_weights(p.initialize(), weights)
              for name, p in processes.items()}
    bare = build_bare(steps)
    bare_jit = build_bare(steps, jit_step=True) if args.jit else None
    for size in sizes:
      cohort_x, cohort_y = x_all[:size], y_all[:size]
      times = collections.defaultdict(list)
      names = list(processes) + ['bare'] + (['bare jit'] if args.jit else [])
      for r in range(args.rounds + 1):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
          cohort = datasets(cohort_x, cohort_y)
          start = time.perf_counter()
          if name == 'bare':
            bare(cohort)
          elif name == 'bare jit':
            bare_jit(cohort)
          else:
            if 'arrays groups=' in name:
              data = group_data.group_arrays(
                  [collections.OrderedDict(x=x, y=y)
                   for x, y in zip(cohort_x, cohort_y)], BATCH,
                  int(name.split('=')[1]))
            elif 'groups=' in name:
              data = group_data.group_datasets(
                  cohort, int(name.split('=')[1]))
            elif name == 'faithful ids':
              data = [str(i) for i in range(size)]
            elif name.startswith('tff_'):
              data = [d.repeat().take(steps) for d in cohort]
            else:
              data = cohort
            states[name] = processes[name].next(states[name], data).state
          if r:  # Round 0 warms up (tracing, first compilation).
            times[name].append(time.perf_counter() - start)
      bare_s = statistics.median(times['bare'])
      for name in names:
        median = statistics.median(times[name])
        rows.append(dict(K=steps, S=size, impl=name, ms=1000 * median,
                         overhead=1000 * (median - bare_s) / size))
      print(f'K={steps} S={size}: ' + ', '.join(
          f'{n} {1000 * statistics.median(times[n]):.0f} ms' for n in names),
            flush=True)
  print()
  print('| K | S | implementation | round (ms) | per-client overhead (ms) |')
  print('|---|---|---|---|---|')
  for row in rows:
    print(f"| {row['K']} | {row['S']} | {row['impl']} | {row['ms']:.0f} | "
          f"{row['overhead']:.2f} |")
  if len(sizes) > 2:
    print()
    for steps in sorted({r['K'] for r in rows}):
      for name in dict.fromkeys(r['impl'] for r in rows):
        pts = [(r['S'], r['ms']) for r in rows
               if r['K'] == steps and r['impl'] == name]
        s, t = np.array(pts, float).T
        slope, intercept = np.polyfit(s, t, 1)
        r2 = 1 - np.sum((t - (slope * s + intercept)) ** 2) / np.sum(
            (t - t.mean()) ** 2)
        print(f'K={steps} {name}: {slope:.2f} ms/client + {intercept:.0f} ms,'
              f' R^2 = {r2:.4f}')
  if args.local_workers:
    execution.set_multi_worker_context(local_workers=args.local_workers)
    groups = 2 * args.local_workers
    print(f'\n{args.local_workers} local workers, groups={groups}:')
    for steps in [int(k) for k in args.steps.split(',')]:
      process = algorithms.build_fed_avg(
          keras_model_fn, sgd(CLIENT_LR), sgd(1.0), num_local_steps=steps,
          client_groups=client_groups.ClientGroups())
      state = process.set_model_weights(process.initialize(), weights)
      for size in sizes:
        elapsed = []
        for r in range(args.rounds + 1):
          data = group_data.group_arrays(
              [collections.OrderedDict(x=x, y=y)
               for x, y in zip(x_all[:size], y_all[:size])], BATCH, groups)
          start = time.perf_counter()
          state = process.next(state, data).state
          if r:
            elapsed.append(time.perf_counter() - start)
        print(f'| {steps} | {size} | {args.local_workers} workers, vec arrays '
              f'groups={groups} | {1000 * statistics.median(elapsed):.0f} |')
  print(f'\nRSS: driver {rss_mb(os.getpid()):.0f} MB, worker '
        f'{rss_mb(worker_pid()) if worker_pid() else float("nan"):.0f} MB')


if __name__ == '__main__':
  main()
