r"""What building a process and compiling it for TFF's worker cost.

  .venv/bin/python bench/build_cost.py [--repeats=3]

Two costs every run, test and notebook pays before its first round, timed
side by side in one process (alternating, so machine noise hits both):

* compiling for TFF's worker: each computation of a process (`initialize`,
  `next`, `get_model_weights`, `set_model_weights`) compiled by TFF's two
  functions chained, as `tff_mixed.execution` did
  (`tff.backends.test.replace_secure_intrinsics_with_bodies`, then
  `tff.backends.native.desugar_and_transform_to_native`), and by
  `tff_mixed.runtimes.worker_compiler.compile_for_worker`, the same passes
  with the building block made once;
* building the process: digits FedAvg in faithful mode and with vectorised
  client groups (`tasks.common.run.build`), whose difference is the
  vectorised group's trace (`tff_mixed.templates.vectorised`).

Prints the medians and the ratios.
"""

import argparse
import os
import statistics
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import tensorflow as tf  # pylint: disable=g-import-not-at-top
import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top

from tasks.common import registry  # pylint: disable=g-import-not-at-top
from tasks.common import run  # pylint: disable=g-import-not-at-top
from tasks.common import run_config  # pylint: disable=g-import-not-at-top
from tasks.common import run_spec  # pylint: disable=g-import-not-at-top
from tff_mixed import execution  # pylint: disable=g-import-not-at-top
from tff_mixed.runtimes import worker_compiler  # pylint: disable=g-import-not-at-top

COMPUTATIONS = ('initialize', 'next', 'get_model_weights', 'set_model_weights')


def tffs_chain(comp):
  comp = tff.backends.test.replace_secure_intrinsics_with_bodies(comp)
  return tff.backends.native.desugar_and_transform_to_native(comp)


def _spec(mode):
  return run_spec.RunSpec(
      task='digits', algorithm=registry.AlgorithmConfig(algorithm='fedavg'),
      execution=run_config.Execution(
          progress=False, **({'client_groups': None}
                             if mode == 'faithful' else {})))


def _seconds(fn):
  start = time.perf_counter()
  fn()
  return time.perf_counter() - start


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--repeats', type=int, default=3)
  args = parser.parse_args()
  tf.get_logger().setLevel('ERROR')
  execution.set_local_execution_context()
  for mode in ('faithful', 'fast'):  # Warm-up: imports, AutoGraph's cache.
    run.build(_spec(mode))
  builds = {'faithful': [], 'fast': []}
  compiles = {'tff': [], 'ours': []}
  for _ in range(args.repeats):
    for mode in builds:
      builds[mode].append(_seconds(lambda m=mode: run.build(_spec(m))))
    _, process = run.build(_spec('faithful'))
    took = {'tff': 0.0, 'ours': 0.0}
    for name in COMPUTATIONS:
      comp = getattr(process, name)
      took['tff'] += _seconds(lambda c=comp: tffs_chain(c))
      took['ours'] += _seconds(
          lambda c=comp: worker_compiler.compile_for_worker(c))
    for key, seconds in took.items():
      compiles[key].append(seconds)
  per_process = {k: statistics.median(v) for k, v in compiles.items()}
  median = {k: statistics.median(v) for k, v in builds.items()}
  print(f'compiling digits FedAvg (faithful) for the worker, '
        f'{len(COMPUTATIONS)} computations: TFF\'s chain '
        f'{per_process["tff"]:.3f} s, compile_for_worker '
        f'{per_process["ours"]:.3f} s: ratio '
        f'{per_process["ours"] / per_process["tff"]:.2f}')
  print(f'building digits FedAvg: faithful {median["faithful"]:.2f} s, '
        f'vectorised groups {median["fast"]:.2f} s: ratio '
        f'{median["fast"] / median["faithful"]:.2f}')
  execution.shutdown()


if __name__ == '__main__':
  main()
