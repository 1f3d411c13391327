r"""Where a fast-mode round's TensorFlow time goes, by op type and by loop.

  .venv/bin/python bench/work_profile.py              # S = 1
  .venv/bin/python bench/work_profile.py --size=50 --rounds=20

`bench/round_fixed_cost.py`'s fast mode (two vectorised client groups) on
the in-process runtime: --warmup untimed rounds, --rounds timed ones, then
--rounds under TensorFlow's profiler (host tracer level 3: every op). Sums
the ops the executor ran per round from the profile's xplane.pb, by op type
and by where they sit: a step of the vectorised K-step loop (its
`vectorized_map`, its loop control, the rest) or a chunk of clients. Op
counts are the robust measure (times under the tracer are inflated).
"""

import argparse
import collections
import glob
import os
import re
import tempfile
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import tensorflow as tf  # pylint: disable=g-import-not-at-top
import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
from tensorflow.tsl.profiler.protobuf import xplane_pb2  # pylint: disable=g-import-not-at-top

import round_fixed_cost  # bench/ is sys.path[0]. pylint: disable=g-import-not-at-top
from tff_mixed import execution  # pylint: disable=g-import-not-at-top

_PLACES = (('step vectorized_map', 'while/body/while/body/loop_body'),
           ('step other', 'while/body/while/body'),
           ('step loop control', 'while/body/while'),
           ('chunk vectorized_map', 'while/body/loop_body'),
           ('chunk other', 'while/body'), ('chunk loop control', 'while'))


def _place(path):
  for name, marker in _PLACES:
    if marker in path:
      return name
  return 'outside loops'


def ops_per_round(directory, rounds):
  """({op type: count}, {place: count}, {op type: ms}) per round."""
  path = sorted(glob.glob(os.path.join(directory, '**', '*.xplane.pb'),
                          recursive=True))[-1]
  space = xplane_pb2.XSpace()
  with open(path, 'rb') as f:
    space.ParseFromString(f.read())
  types, places = collections.Counter(), collections.Counter()
  ms = collections.Counter()
  for plane in space.planes:
    for line in plane.lines:
      if not line.name.startswith('tf_Compute'):
        continue
      for event in line.events:
        name = plane.event_metadata[event.metadata_id].name
        if ':' not in name or name.startswith(('ExecutorState', 'Propagate')):
          continue
        node, op = name.rsplit(':', 1)
        types[op] += 1
        ms[op] += event.duration_ps / 1e9
        places[_place(re.sub(r'/_\d+', '', node))] += 1
  per = lambda c: {k: v / rounds for k, v in c.items()}
  return per(types), per(places), per(ms)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--size', type=int, default=1)
  parser.add_argument('--warmup', type=int, default=5)
  parser.add_argument('--rounds', type=int, default=20)
  parser.add_argument('--top', type=int, default=25)
  args = parser.parse_args()
  process, data_fn = round_fixed_cost.build('fast')
  directory = tempfile.mkdtemp(prefix='work_profile_')
  with tff.framework.get_context_stack().install(
      execution.in_process_context()):
    state = process.initialize()
    data = data_fn(list(range(args.size)))
    for _ in range(args.warmup):
      state = process.next(state, data).state
    start = time.perf_counter()
    for _ in range(args.rounds):
      state = process.next(state, data).state
    round_ms = (time.perf_counter() - start) / args.rounds * 1e3
    tf.profiler.experimental.start(
        directory, options=tf.profiler.experimental.ProfilerOptions(
            host_tracer_level=3))
    for _ in range(args.rounds):
      state = process.next(state, data).state
    tf.profiler.experimental.stop()
  types, places, ms = ops_per_round(directory, args.rounds)
  print(f'S = {args.size}: {round_ms:.2f} ms a round (untraced); '
        f'{sum(places.values()):.0f} ops a round ({directory})')
  for place, count in sorted(places.items(), key=lambda kv: -kv[1]):
    print(f'  {count:7.1f}  {place}')
  print('By op type (count, traced ms):')
  for op, count in sorted(types.items(), key=lambda kv: -kv[1])[:args.top]:
    print(f'  {count:7.1f}  {ms[op]:7.3f}  {op}')


if __name__ == '__main__':
  main()
