r"""Where an in-process FedAvg round's fixed cost goes, piece by piece.

  .venv/bin/python bench/round_fixed_cost.py            # S in 1,10,50
  .venv/bin/python bench/round_fixed_cost.py --sizes=1,50 --rounds=40

The workload of `bench/workload.py` (the one `bench/peers.py` runs in FedJAX
and pfl-research: MLP 64-128-10, 40 examples and K = 5 SGD steps of batch 8
a client) on the in-process runtime, in faithful mode (`build_fed_avg`, a TFF
client per client, datasets) and in fast mode (two vectorised client groups,
the model a `tff_mixed.models.KerasModelFn`, the groups built from arrays by
`group_data.group_arrays`, as `bench/peers.py` does). For each mode and
cohort size S, --warmup untimed rounds, then --rounds timed ones.

Each timed round is `process.next(state, data)`; timing wrappers around the
functions the runtime calls split it into pieces (a wrapper times its
outermost call only; the pieces of a round add up to less than the round,
the rest is Python between them):

* `next`: the whole call; `tff call`: TFF's part of it, outside
  `InProcessContext.invoke` (packing the arguments, the context stack);
* `invoke`: the context's part: the compiled round, and `to py containers`,
  its result in the Python containers of the round's type;
* the round's pieces: `flatten state`, `flatten data` (`tf_phase.flatten`),
  `start` (one call: `prepare` and `zero`), `stack` (`tf.stack` of the
  clients' tensors), `clients` (every client's `work` and `accumulate`: the
  `client loop` call, then `remainder`, a group's call for each binary
  digit of the count's remainder over the concurrency), `finish` (one
  call: `report` and `update`); and, where a revision has them, each phase
  called on its own (`prepare`, ...) and `pack` (`tf_phase.pack`, the
  result in `Struct`s before `to py containers`).

Prints the median milliseconds of every piece over the timed rounds. No
timing is asserted anywhere.
"""

import argparse
import collections
import contextlib
import os
import statistics
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import tensorflow as tf  # pylint: disable=g-import-not-at-top
import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top

import tff_processes  # bench/ is sys.path[0]. pylint: disable=g-import-not-at-top
import workload  # pylint: disable=g-import-not-at-top
from tff_mixed import algorithms  # pylint: disable=g-import-not-at-top
from tff_mixed import execution  # pylint: disable=g-import-not-at-top
from tff_mixed import group_data  # pylint: disable=g-import-not-at-top
from tff_mixed import models  # pylint: disable=g-import-not-at-top
from tff_mixed.runtimes import in_process  # pylint: disable=g-import-not-at-top
from tff_mixed.runtimes import tf_phase  # pylint: disable=g-import-not-at-top
from tff_mixed.templates import client_groups  # pylint: disable=g-import-not-at-top

NUM_GROUPS = 2
PHASES = ('prepare', 'zero', 'report', 'update')
ORDER = ('next', 'tff call', 'invoke', 'round', 'to py containers',
         'flatten state', 'start', 'flatten data', *PHASES, 'stack',
         'clients', 'client loop', 'remainder', 'finish', 'pack',
         'other calls')


def _input_spec():
  return (tf.TensorSpec([None, workload.INPUT_DIM], tf.float32),
          tf.TensorSpec([None], tf.int32))


def _loss():
  return tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def build(mode):
  """`(process, data_fn)`: FedAvg in `mode` ('faithful' or 'fast') and
  `data_fn(client_ids)`, a round's client data."""
  sgd = lambda lr: tff.learning.optimizers.build_sgdm(learning_rate=lr)
  if mode == 'faithful':
    model_fn = lambda: tff.learning.models.from_keras_model(
        tff_processes.keras_mlp(), loss=_loss(), input_spec=_input_spec())
    kwargs = {}

    def data_fn(client_ids):
      return [tf.data.Dataset.from_tensor_slices(workload.client_data(c))
              .batch(workload.BATCH_SIZE) for c in client_ids]
  else:
    model_fn = models.KerasModelFn(tff_processes.keras_mlp, loss=_loss(),
                                   input_spec=_input_spec())
    kwargs = {'client_groups': client_groups.ClientGroups(NUM_GROUPS)}

    def data_fn(client_ids):
      return group_data.group_arrays(
          [workload.client_data(c) for c in client_ids],
          workload.BATCH_SIZE, NUM_GROUPS)
  process = algorithms.build_fed_avg(
      model_fn, sgd(workload.CLIENT_LR), sgd(workload.SERVER_LR),
      num_local_steps=workload.LOCAL_STEPS, **kwargs)
  return process, data_fn


class Pieces:
  """Timing wrappers: `wrap(owner, name, label)` replaces `owner.name` by a
  function that adds its outermost calls' seconds to `seconds[label]`
  (`label` may be a function of the call's arguments) until `restore()`."""

  def __init__(self):
    self.seconds = collections.defaultdict(float)
    self._restore = []

  def wrap(self, owner, name, label):
    original = getattr(owner, name, None)
    if original is None:
      return
    depth = [0]

    def timed(*args, **kwargs):
      if depth[0]:
        return original(*args, **kwargs)
      depth[0] += 1
      start = time.perf_counter()
      try:
        return original(*args, **kwargs)
      finally:
        depth[0] -= 1
        key = label(*args, **kwargs) if callable(label) else label
        self.seconds[key] += time.perf_counter() - start

    had_own = name in vars(owner)
    setattr(owner, name, timed)
    self._restore.append((owner, name, original, had_own))

  def restore(self):
    for owner, name, original, had_own in reversed(self._restore):
      if had_own:
        setattr(owner, name, original)
      else:
        delattr(owner, name)
    self._restore.clear()


@contextlib.contextmanager
def timed_pieces(context, round_):
  """Wraps the runtime's functions (module docstring) while the block
  runs; yields the `Pieces`."""
  pieces = Pieces()
  pieces.wrap(context, 'invoke', 'invoke')
  compiled = context.compiled

  def compiled_and_timed(computation):
    result = compiled(computation)
    if result is not round_:
      return result

    def call(arg):
      start = time.perf_counter()
      try:
        return round_(arg)
      finally:
        pieces.seconds['round'] += time.perf_counter() - start
    return call

  context.compiled = compiled_and_timed
  pieces.wrap(tff.types, 'type_to_py_container', 'to py containers')
  pieces.wrap(tf_phase, 'flatten', lambda *a, **k: (
      'flatten data' if len(a) > 3 or 'datasets' in k else 'flatten state'))
  pieces.wrap(tf_phase, 'pack', 'pack')
  pieces.wrap(tf, 'stack', 'stack')

  def call_label(function, flat):
    del flat
    start, finish = getattr(round_, '_server', None) or (None, None)
    if function is start:
      return 'start'
    if function is finish:
      return 'finish'
    if function is getattr(round_, '_client_loop', None):
      return 'client loop'
    if any(function is g for g in getattr(round_, '_groups', {}).values()):
      return 'remainder'
    return 'other calls'

  pieces.wrap(tf_phase, 'call', call_label)
  for phase in PHASES:
    if isinstance(getattr(round_, phase, None), tf_phase.Phase):
      pieces.wrap(getattr(round_, phase), 'call_flat', phase)
  pieces.wrap(round_, '_clients', 'clients')
  try:
    yield pieces
  finally:
    pieces.restore()
    del context.compiled


def run(mode, size, args):
  """{piece: median ms} of `args.rounds` rounds of `size` clients."""
  process, data_fn = build(mode)
  context = (execution.in_process_context() if args.concurrency is None
             else in_process.InProcessContext(args.concurrency))
  with tff.framework.get_context_stack().install(context):
    state = process.initialize()
    round_ = context.compiled(process.next)
    assert isinstance(round_, in_process.MapReduceRound), type(round_)
    times = collections.defaultdict(list)
    for r in range(args.warmup + args.rounds):
      data = data_fn(workload.cohort(r, size))
      with timed_pieces(context, round_) as pieces:
        start = time.perf_counter()
        state = process.next(state, data).state
        pieces.seconds['next'] = time.perf_counter() - start
      if r >= args.warmup:
        seconds = dict(pieces.seconds)
        seconds['tff call'] = seconds['next'] - seconds['invoke']
        for piece, s in seconds.items():
          times[piece].append(s)
  return {piece: 1e3 * statistics.median(t) for piece, t in times.items()}


def main():
  parser = argparse.ArgumentParser(
      description=__doc__.splitlines()[0],
      formatter_class=argparse.RawDescriptionHelpFormatter,
      epilog='\n'.join(__doc__.splitlines()[1:]))
  parser.add_argument('--sizes', default='1,10,50',
                      help='clients per round S, comma separated')
  parser.add_argument('--modes', default='faithful,fast',
                      help='comma separated subset of faithful,fast')
  parser.add_argument('--rounds', type=int, default=30,
                      help='timed rounds per mode and S')
  parser.add_argument('--warmup', type=int, default=3,
                      help='untimed rounds before them')
  parser.add_argument('--concurrency', type=int, default=None,
                      help='clients (groups) at once (default: the '
                      'machine\'s, in_process.default_concurrency())')
  args = parser.parse_args()
  tf.get_logger().setLevel('ERROR')
  sizes = [int(s) for s in args.sizes.split(',')]
  columns = [(mode, s) for mode in args.modes.split(',') for s in sizes]
  medians = {column: run(*column, args) for column in columns}
  concurrency = args.concurrency or in_process.default_concurrency()
  print(f'Median ms of {args.rounds} rounds (after {args.warmup}) of '
        'bench/workload.py\'s FedAvg in process; concurrency '
        f'{concurrency}')
  print()
  header = ['piece'] + [f'{mode} S={s}' for mode, s in columns]
  print('| ' + ' | '.join(header) + ' |')
  print('|' + '---|' * len(header))
  for piece in ORDER:
    if any(piece in m for m in medians.values()):
      print('| ' + ' | '.join([piece] + [
          f'{medians[c][piece]:.2f}' if piece in medians[c] else '-'
          for c in columns]) + ' |')


if __name__ == '__main__':
  main()
