r"""A round of each paper preset's model on both runtimes, side by side.

  .venv/bin/python bench/runtime_round_cost.py [--clients=2] [--repeats=2]
      [--tasks=femnist,sent140,...]

For every `--preset=paper_*` of the benchmark tasks (FEMNIST, Shakespeare,
CIFAR-100, Stack Overflow tags, Sent140), builds the preset's model in
FedAvg with client SGD at its K (`num_local_steps`), in faithful mode, and
times whole rounds of --clients clients, each holding exactly K batches of
the preset's batch size of random data of the model's input shapes, on
TFF's runtime
(its worker: every client's dataset shipped, the C++ executor) and on the
in-process runtime (`tff_mixed.runtimes`), alternating the two --repeats
times after one untimed round each. A round of S clients costs S times a
client here (clients train one after another on both), so it prints, per
runtime: the median seconds per client, a round of the preset's S and the
whole run (x rounds) in hours; and the in-process / TFF ratio. No
evaluation, no server-optimizer cost beyond FedAvg's (FedGBO's arithmetic
is a few operations a parameter). `bench/benchmark_round_cost.py` times the
bare step (a plain `tf.function`) the same way, the floor under both.
"""

import argparse
import os
import statistics
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import tensorflow as tf  # pylint: disable=g-import-not-at-top
import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top

import benchmark_round_cost  # bench/ is sys.path[0]. pylint: disable=g-import-not-at-top
from tff_mixed import algorithms  # pylint: disable=g-import-not-at-top
from tff_mixed import execution  # pylint: disable=g-import-not-at-top

RUNTIMES = ('tff', 'in_process')


def _random_examples(input_spec, n):
  """`n` random examples of the model's input spec: floats uniform in
  [0, 1), integers (labels, token ids) 0 or 1, valid for every model here;
  the cost does not depend on the values."""
  def tensor(spec):
    shape = [n] + spec.shape[1:].as_list()
    if spec.dtype.is_floating:
      return tf.random.uniform(shape, dtype=spec.dtype)
    return tf.random.uniform(shape, 0, 2, dtype=spec.dtype)
  return tf.nest.map_structure(tensor, input_spec)


def _clients(model_fn, batch_size, steps, count):
  """`count` client datasets of exactly `steps` batches of `batch_size`."""
  spec = model_fn().input_spec
  return [tf.data.Dataset.from_tensor_slices(
      _random_examples(spec, batch_size * steps)).batch(batch_size)
          for _ in range(count)]


def client_seconds(model_fn, batch_size, steps, clients, repeats):
  """`{runtime: median seconds per client}` of FedAvg rounds."""
  process = algorithms.build_fed_avg(
      model_fn, tff.learning.optimizers.build_sgdm(learning_rate=0.01),
      num_local_steps=steps)
  data = _clients(model_fn, batch_size, steps, clients)
  states, times = {}, {r: [] for r in RUNTIMES}
  for runtime in RUNTIMES:  # Untimed: compiles and traces.
    with execution.running_on(runtime):
      state = process.initialize()
      states[runtime] = process.next(state, data).state
  for _ in range(repeats):
    for runtime in RUNTIMES:
      with execution.running_on(runtime):
        start = time.perf_counter()
        states[runtime] = process.next(states[runtime], data).state
        times[runtime].append((time.perf_counter() - start) / clients)
  return {r: statistics.median(t) for r, t in times.items()}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--clients', type=int, default=2)
  parser.add_argument('--repeats', type=int, default=2)
  parser.add_argument('--tasks', default=','.join(benchmark_round_cost.TASKS))
  args = parser.parse_args()
  tf.get_logger().setLevel('ERROR')
  execution.set_local_execution_context()
  print('| task | preset | model | B | K | tff s/client | in-process '
        's/client | in-process/tff | S | round tff (s) | round in-process '
        '(s) | rounds | run tff (h) | run in-process (h) |')
  print('|' + '---|' * 14)
  try:
    for name in args.tasks.split(','):
      module, model_fn_for, _ = benchmark_round_cost.TASKS[name]
      for preset, values in module.PRESETS.items():
        if not preset.startswith('paper_'):
          continue
        model = values.get('model', module.MODELS[0])
        b, k = values['batch_size'], values['num_local_steps']
        s, rounds = values['clients_per_round'], values['rounds']
        seconds = client_seconds(model_fn_for(model), b, k, args.clients,
                                 args.repeats)
        tff_s, ours = seconds['tff'], seconds['in_process']
        print(f'| {name} | {preset} | {model} | {b} | {k} | {tff_s:.2f} | '
              f'{ours:.2f} | {ours / tff_s:.2f} | {s} | {s * tff_s:.1f} | '
              f'{s * ours:.1f} | {rounds} | {s * tff_s * rounds / 3600:.0f} | '
              f'{s * ours * rounds / 3600:.0f} |', flush=True)
  finally:
    execution.shutdown()


if __name__ == '__main__':
  main()
