r"""The ray runtime's cost a round, and what a second actor buys.

  .venv/bin/python bench/ray_round.py [--rounds=6] [--parts=fixed,scaling]
      [--fixed_clients=200] [--cnn_clients=20] [--cnn_steps=5]

Each round trains a task's cohort (`Task.named_cohort`, rebuilt by each
actor from this module: `Task.rebuild`) as a run does: on Ray the actors get
client ids and build their clients' data; in process, and on the row
"data sent", the driver builds the datasets each round (in the round's
time) and Ray ships them to the actors as their graphs.

`fixed`: `bench/workload.py`'s FedAvg (MLP 64-128-10, 40 examples a client,
K = 5, tff_mixed's `build_fed_avg`, faithful mode) at S = --fixed_clients,
in process and on Ray with one and two actors, side by side (alternating
round by round after two untimed rounds each), then in fast mode
(--groups vectorised client groups). Per runtime: the median round; on Ray
also the median of the longest actor's time (building its clients' data
and training them) and of the rest of the round, the runtime's own cost a
round: preparing, dispatch, the accumulators' return and merge, report and
update (issue 53's goal: <= 10 ms at S = 200).

`scaling`: FEMNIST's CNN (`tasks.femnist.task`, two conv layers and two
dense, 62 classes) at S = --cnn_clients clients of --cnn_steps batches of
20 random images each, on Ray with one actor and with two, each actor's
TensorFlow on one thread, side by side: the speed-up of the second actor
(goal >= 1.7x; a 2-core machine has two cores for everything, the driver
included). Beside it, what the machine gives without Ray: the actors' work
in plain processes (the in-process runtime on one TensorFlow thread, one
client at a time, each round building its clients' data from their ids):
the whole cohort in one process, then its two halves in two processes
released at once (once both have started and warmed up); the speed-up of
the second process, which the second actor could at best match.

No timing is asserted anywhere.
"""

import argparse
import collections
import functools
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top

import tff_processes  # bench/ is sys.path[0]. pylint: disable=g-import-not-at-top
import workload  # pylint: disable=g-import-not-at-top
from tasks.femnist import task as femnist  # pylint: disable=g-import-not-at-top
from tff_mixed import algorithms  # pylint: disable=g-import-not-at-top
from tff_mixed import execution  # pylint: disable=g-import-not-at-top
from tff_mixed import models  # pylint: disable=g-import-not-at-top
from tff_mixed import task as task_lib  # pylint: disable=g-import-not-at-top
from tff_mixed.runtimes import ray_runtime  # pylint: disable=g-import-not-at-top
from tff_mixed.templates import client_groups  # pylint: disable=g-import-not-at-top


def _sgd(learning_rate):
  return tff.learning.optimizers.build_sgdm(learning_rate=learning_rate)


def _mlp_fn():
  return tff.learning.models.from_keras_model(
      tff_processes.keras_mlp(), input_spec=tff_processes.INPUT_SPEC,
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))


# The same model for fast mode's vectorised groups.
_mlp_vectorised = models.KerasModelFn(
    tff_processes.keras_mlp, input_spec=tff_processes.INPUT_SPEC,
    loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))


def _arrays_task(name, model_fn, arrays_fn, clients, batch_size, rebuild):
  """A task of `clients` clients whose examples are `arrays_fn(client)`,
  held in memory as a task's data is, rebuilt by each Ray actor from this
  module (`Task.rebuild`), so a round on Ray sends the actors client ids
  and each builds its clients' datasets."""
  arrays = [arrays_fn(c) for c in range(clients)]

  def dataset_fn(cid):
    return tf.data.Dataset.from_tensor_slices(arrays[int(cid)]).batch(
        batch_size)
  return task_lib.Task(
      name=name, model_fn=model_fn,
      train_client_ids=[str(c) for c in range(clients)],
      train_dataset_fn=dataset_fn, client_shuffle=task_lib.NO_SHUFFLE,
      train_arrays_fn=lambda cid: arrays[int(cid)],
      train_batch_size=batch_size,
      rebuild=rebuild)


def _mlp_arrays(client):
  x, y = workload.client_data(client)
  return collections.OrderedDict(x=x, y=y.astype(np.int32))


def _cnn_arrays(client, steps=5, batch_size=20):
  rng = np.random.default_rng(client)
  return collections.OrderedDict(
      x=rng.random((steps * batch_size, 28, 28, 1), np.float32),
      y=rng.integers(0, 62, steps * batch_size).astype(np.int32))


def _mlp_task(clients):
  return _arrays_task('mlp', _mlp_fn, _mlp_arrays, clients,
                      workload.BATCH_SIZE,
                      functools.partial(_mlp_task, clients))


def _cnn_task(clients, steps):
  return _arrays_task(
      'cnn', femnist.model_fn_for('cnn'),
      functools.partial(_cnn_arrays, steps=steps), clients, 20,
      functools.partial(_cnn_task, clients, steps))


def _time(process, cohort, settings, rounds, warmup=2):
  """{setting name: (median round, median longest actor, median rest)}:
  each setting (`execution.running_on`'s arguments, and whether the round
  gets the `cohort` as it is, ids the actors build data from, or as its
  datasets, built by the driver each round as a run builds them, in the
  round's time) run from the same state, alternating round by round after
  `warmup` untimed rounds."""
  with execution.running_on('in_process'):
    start = process.initialize()

  def next_round(state, by_ids):
    return process.next(state, cohort if by_ids else list(cohort)).state

  states = {}
  for name, (runtime, options, by_ids) in settings.items():
    with execution.running_on(runtime, **options):
      state = start
      for _ in range(warmup):
        state = next_round(state, by_ids)
      states[name] = state
  rounds_s = {name: [] for name in settings}
  actors = {name: [] for name in settings}
  for _ in range(rounds):
    for name, (runtime, options, by_ids) in settings.items():
      with execution.running_on(runtime, **options):
        begin = time.perf_counter()
        states[name] = next_round(states[name], by_ids)
        rounds_s[name].append(time.perf_counter() - begin)
        if runtime == 'ray':
          actors[name].append(max(execution.ray_context().last_actor_seconds))
  result = {}
  for name in settings:
    rest = [r - s for r, s in zip(rounds_s[name], actors[name])]
    result[name] = (statistics.median(rounds_s[name]),
                    statistics.median(actors[name]) if actors[name] else None,
                    statistics.median(rest) if rest else None)
  return result


def _print(result):
  print(f'{"":<16} {"round ms":>9} {"actors ms":>10} {"rest ms":>8}')
  for name, (round_s, share_s, rest_s) in result.items():
    share = f'{1e3 * share_s:10.1f}' if share_s is not None else f'{"":>10}'
    rest = f'{1e3 * rest_s:8.1f}' if rest_s is not None else ''
    print(f'{name:<16} {1e3 * round_s:9.1f} {share} {rest}', flush=True)


def fixed(args):
  print(f'\nfixed: FedAvg MLP, S = {args.fixed_clients}, K = '
        f'{workload.LOCAL_STEPS}, faithful')
  process = algorithms.build_fed_avg(
      _mlp_fn, client_optimizer_fn=_sgd(workload.CLIENT_LR),
      server_optimizer_fn=_sgd(workload.SERVER_LR),
      num_local_steps=workload.LOCAL_STEPS)
  # One Ray (two CPUs) for both: an actor count is how many actors a round
  # uses, so switching between them restarts nothing.
  task = _mlp_task(args.fixed_clients)
  result = _time(process, task.named_cohort(0, 1, args.fixed_clients), {
      'in_process': ('in_process', {}, False),
      'ray 1 actor': ('ray', dict(workers=1), True),
      'ray 2 actors': ('ray', dict(workers=2), True),
      'ray 2, data sent': ('ray', dict(workers=2), False),
  }, args.rounds)
  _print(result)
  print(f'\nfixed: the same in fast mode, {args.groups} vectorised client '
        'groups')
  process = algorithms.build_fed_avg(
      _mlp_vectorised, client_optimizer_fn=_sgd(workload.CLIENT_LR),
      server_optimizer_fn=_sgd(workload.SERVER_LR),
      num_local_steps=workload.LOCAL_STEPS,
      client_groups=client_groups.ClientGroups(args.groups))
  _print(_time(process, task.named_cohort(0, 1, args.fixed_clients,
                                          args.groups), {
      'in_process': ('in_process', {}, False),
      'ray 2 actors': ('ray', dict(workers=2), True),
  }, args.rounds))


def scaling(args):
  print(f'\nscaling: FEMNIST CNN, S = {args.cnn_clients}, K = '
        f'{args.cnn_steps} batches of 20, one TensorFlow thread an actor')
  process = _cnn_process(args.cnn_steps)
  task = _cnn_task(args.cnn_clients, args.cnn_steps)
  result = _time(process, task.named_cohort(0, 1, args.cnn_clients), {
      'ray 1 actor': ('ray', dict(workers=1), True),
      'ray 2 actors': ('ray', dict(workers=2), True),
  }, args.rounds)
  _print(result)
  one, two = result['ray 1 actor'][0], result['ray 2 actors'][0]
  print(f'speed-up of the second actor: {one / two:.2f}x')
  execution.shutdown()  # The ceiling's processes get the machine to themselves.
  machine = ceiling(args)
  print(f'the second actor gives {one / two / machine:.2f} of what a second '
        'process gives on this machine')


def _cnn_process(steps):
  return algorithms.build_fed_avg(
      femnist.model_fn_for('cnn'), client_optimizer_fn=_sgd(0.1),
      server_optimizer_fn=_sgd(1.0), num_local_steps=steps)


def _share_child(clients: int, first: int, share: int, steps: int,
                 rounds: int) -> None:
  """`--ceiling_child`: an actor's work without Ray. In process, on one
  TensorFlow thread, one client at a time: rounds on clients `first` to
  `first + share` of `scaling`'s cohort, each round building their
  datasets from their ids as an actor does; `rounds` of them once a line
  arrives on stdin, then prints their seconds."""
  tf.config.threading.set_intra_op_parallelism_threads(1)
  tf.config.threading.set_inter_op_parallelism_threads(1)
  process = _cnn_process(steps)
  task = _cnn_task(clients, steps)
  cohort = task.named_cohort(0, 1, clients)
  with execution.running_on('in_process', concurrency=1):
    state = process.initialize()

    def next_round(state):
      return process.next(state, [cohort[i] for i in range(
          first, first + share)]).state

    for _ in range(2):
      state = next_round(state)
    print('ready', flush=True)
    sys.stdin.readline()
    begin = time.perf_counter()
    for _ in range(rounds):
      state = next_round(state)
    print(time.perf_counter() - begin, flush=True)


def _shares_at_once(args, shares: int, rounds: int) -> float:
  """Seconds a round of the slowest of `shares` `_share_child`ren (the
  cohort split as the actors split it), released at once."""
  children = [subprocess.Popen(
      [sys.executable, __file__, '--ceiling_child=' + ','.join(str(v) for v in (
          args.cnn_clients, block.start, len(block), args.cnn_steps,
          rounds))],
      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
              for block in ray_runtime.blocks(args.cnn_clients, shares)]
  try:
    for child in children:
      if child.stdout.readline().strip() != 'ready':
        raise RuntimeError('a --ceiling_child did not start')
    for child in children:
      child.stdin.write('go\n')
      child.stdin.flush()
    seconds = [float(child.stdout.readline()) for child in children]
  finally:
    for child in children:
      child.kill()
      child.wait()
  return max(seconds) / rounds


def ceiling(args) -> float:
  """Two plain processes' speed-up over one on the actors' work (module
  docstring), printed."""
  alone, together = [], []
  for _ in range(2):
    alone.append(_shares_at_once(args, 1, args.rounds))
    together.append(_shares_at_once(args, 2, args.rounds))
  alone, together = statistics.median(alone), statistics.median(together)
  print(f'without Ray: the cohort in one process {1e3 * alone:.1f} ms a '
        f'round, its halves in two at once {1e3 * together:.1f} ms: two '
        f'processes give {alone / together:.2f}x')
  return alone / together


def main():
  if len(sys.argv) == 2 and sys.argv[1].startswith('--ceiling_child='):
    _share_child(*(int(v) for v in sys.argv[1].split('=')[1].split(',')))
    return
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--rounds', type=int, default=6)
  parser.add_argument('--parts', default='fixed,scaling')
  parser.add_argument('--fixed_clients', type=int, default=200)
  parser.add_argument('--groups', type=int, default=4)
  parser.add_argument('--cnn_clients', type=int, default=20)
  parser.add_argument('--cnn_steps', type=int, default=5)
  args = parser.parse_args()
  parts = {'fixed': fixed, 'scaling': scaling}
  unknown = sorted(set(args.parts.split(',')) - set(parts))
  if unknown:
    parser.error(f'--parts: unknown {unknown}; choose from {sorted(parts)}')
  try:
    for part in args.parts.split(','):
      parts[part](args)
  finally:
    execution.shutdown()


if __name__ == '__main__':
  main()
