r"""Memory over many runs in one Python (a notebook, a test worker).

  .venv/bin/python bench/runs_memory.py [--runs=8] [--client_groups=2]

Trains `--runs` digits runs of one round (`run(task_registry.spec(...))`)
twice in this process: first keeping every run's result (and so its
process, as the runtimes' caches did before they let a process go), then
dropping each; prints the resident memory after each run and the growth a
run of each half. What the runtime made from a process (its round's
MapReduceForm, its compiled phases) should go with the process: the second
half flat.
"""

import argparse
import gc
import os
import tempfile

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from tasks.common import run as run_lib  # pylint: disable=g-import-not-at-top
from tasks.common import task_registry  # pylint: disable=g-import-not-at-top
from tff_mixed import execution  # pylint: disable=g-import-not-at-top
from tff_mixed.runtimes import in_process  # pylint: disable=g-import-not-at-top


def _rss_mb() -> float:
  with open('/proc/self/status') as f:
    for line in f:
      if line.startswith('VmRSS:'):
        return int(line.split()[1]) / 1024
  raise RuntimeError('no VmRSS in /proc/self/status')


def _runs(count: int, client_groups: int, keep: bool) -> list[float]:
  """RSS after each of `count` runs (their results kept or dropped)."""
  kept, sizes = [], []
  for _ in range(count):
    spec = task_registry.spec(
        'digits', rounds=1, eval_every=0, progress=False,
        client_groups=client_groups, output_dir=tempfile.mkdtemp())
    result = run_lib.run(spec)
    if keep:
      kept.append(result)
    del result
    gc.collect()
    sizes.append(_rss_mb())
    print(f'  run {len(sizes)}: {sizes[-1]:.0f} MB, rounds\' forms held: '
          f'{len(in_process._forms)}', flush=True)  # pylint: disable=protected-access
  return sizes


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--runs', type=int, default=8)
  parser.add_argument('--client_groups', type=int, default=2)
  args = parser.parse_args()
  execution.set_local_execution_context()
  growth = {}
  for keep in (True, False):
    print('results kept:' if keep else 'results dropped:')
    sizes = _runs(args.runs, args.client_groups, keep)
    growth[keep] = (sizes[-1] - sizes[0]) / (len(sizes) - 1)
  print(f'growth a run: {growth[True]:.1f} MB with the results kept, '
        f'{growth[False]:.1f} MB dropped')
  execution.shutdown()


if __name__ == '__main__':
  main()
