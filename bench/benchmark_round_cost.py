r"""What a full reproduction of each paper preset costs on this machine.

  .venv/bin/python bench/benchmark_round_cost.py [--repeats=5]

For every `--preset=paper_*` of the benchmark tasks (FEMNIST, Shakespeare,
CIFAR-100, Stack Overflow tags, Sent140) times one SGD step of the preset's
model at its batch size (`paper_round_cost.step_seconds`: a plain
`tf.function` on random data of the real shapes) and prints a round's
client compute (S x K steps, one machine) and the whole run (x rounds) in
hours. TFF's per-client overhead (`bench/overhead.py`) and evaluation come
on top; FedGBO's optimizer arithmetic is a few operations per parameter
and is not timed.
"""

import argparse
import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import tensorflow as tf  # pylint: disable=g-import-not-at-top

import paper_round_cost  # bench/ is sys.path[0]. pylint: disable=g-import-not-at-top
from tasks.cifar100 import data as cifar_data  # pylint: disable=g-import-not-at-top
from tasks.cifar100 import task as cifar100  # pylint: disable=g-import-not-at-top
from tasks.femnist import task as femnist  # pylint: disable=g-import-not-at-top
from tasks.sent140 import task as sent140  # pylint: disable=g-import-not-at-top
from tasks.shakespeare import data as shakespeare_data  # pylint: disable=g-import-not-at-top
from tasks.shakespeare import task as shakespeare  # pylint: disable=g-import-not-at-top
from tasks.stackoverflow_tags import task as stackoverflow_tags  # pylint: disable=g-import-not-at-top
from tff_mixed import execution  # pylint: disable=g-import-not-at-top


def _images(shape, classes, label_dtype):
  return lambda n: {'x': tf.random.uniform((n, *shape)),
                    'y': tf.random.uniform((n,), 0, classes, label_dtype)}


# task -> (module, model name -> model_fn, random batch of n)
TASKS = {
    'femnist': (femnist, femnist.model_fn_for,
                _images((28, 28, 1), 62, tf.int32)),
    'cifar100': (cifar100, cifar100.model_fn_for,
                 _images(cifar_data.CROP_SHAPE, 100, tf.int64)),
    'shakespeare': (shakespeare, shakespeare.model_fn_for, lambda n: {
        k: tf.random.uniform((n, shakespeare_data.SEQUENCE_LENGTH), 0,
                             shakespeare_data.VOCAB_SIZE, tf.int32)
        for k in ('x', 'y')}),
    'stackoverflow_tags': (
        stackoverflow_tags, lambda model: stackoverflow_tags.model_fn_for(),
        lambda n: {'x': tf.random.uniform((n, 10_000)) / 50.0,
                   'y': tf.cast(tf.random.uniform((n, 500)) > 0.99,
                                tf.float32)}),
    'sent140': (sent140, sent140.model_fn_for, lambda n: {
        'x': tf.random.uniform((n, 5_000)) / 10.0,
        'y': tf.random.uniform((n,), 0, 2, tf.int32)}),
}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--repeats', type=int, default=5)
  args = parser.parse_args()
  tf.get_logger().setLevel('ERROR')
  # Our context: TFF's import-time default leaves its worker behind at exit.
  execution.set_local_execution_context()
  try:
    _print_table(args.repeats)
  finally:
    execution.shutdown()


def _print_table(repeats):
  print('| task | preset | model | B | step (ms) | S x K | round (s) | '
        'rounds | run (h) |')
  print('|---|---|---|---|---|---|---|---|---|')
  for name, (module, model_fn_for, make_batch) in TASKS.items():
    for preset, values in module.PRESETS.items():
      if not preset.startswith('paper_'):
        continue
      model = values.get('model', module.MODELS[0])
      b = values['batch_size']
      step = paper_round_cost.step_seconds(model_fn_for(model), make_batch, b,
                                           repeats)
      s, k, rounds = (values['clients_per_round'], values['num_local_steps'],
                      values['rounds'])
      round_seconds = s * k * step
      print(f'| {name} | {preset} | {model} | {b} | {1000 * step:.1f} | '
            f'{s} x {k} | {round_seconds:.2f} | {rounds} | '
            f'{round_seconds * rounds / 3600:.1f} |', flush=True)


if __name__ == '__main__':
  main()
