r"""Memory over many runs in one Python (a notebook, a test worker).

  .venv/bin/python bench/runs_memory.py [--runs=8] [--client_groups=2]
      [--runtime=ray]

Trains `--runs` digits runs of one round (`run(task_registry.spec(...))`)
twice in this process: first keeping every run's result (and so its
process, as the runtimes' caches did before they let a process go), then
dropping each; prints the resident memory after each run and the growth a
run of each half. What the runtime made from a process (its round's
MapReduceForm, its compiled phases) should go with the process: the second
half flat. With `--runtime=ray` the runs share one local Ray (as runs in one
Python do) and the Ray actors' memory is printed too: an actor keeps the
client loops of the last `ray_actor.KEPT` rounds it ran, so it stays flat
whether the results are kept or not.
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


def _rss_mb(pid='self') -> float:
  with open(f'/proc/{pid}/status') as f:
    for line in f:
      if line.startswith('VmRSS:'):
        return int(line.split()[1]) / 1024
  raise RuntimeError(f'no VmRSS in /proc/{pid}/status')


def _runs(count: int, client_groups: int, keep: bool, runtime: str
          ) -> tuple[list[float], list[float]]:
  """RSS after each of `count` runs (their results kept or dropped), of
  this process and of the largest Ray actor (empty in process)."""
  kept, sizes, actors = [], [], []
  for _ in range(count):
    spec = task_registry.spec(
        'digits', rounds=1, eval_every=0, progress=False,
        client_groups=client_groups, runtime=runtime,
        output_dir=tempfile.mkdtemp())
    result = run_lib.run(spec)
    if keep:
      kept.append(result)
    del result
    gc.collect()
    sizes.append(_rss_mb())
    actor = ''
    if runtime == execution.RAY:
      actors.append(max(_rss_mb(pid)
                        for pid in execution.ray_context().actor_pids()))
      actor = f', the largest actor {actors[-1]:.0f} MB'
    print(f'  run {len(sizes)}: {sizes[-1]:.0f} MB{actor}, rounds\' forms '
          f'held: {len(in_process._forms)}', flush=True)  # pylint: disable=protected-access
  return sizes, actors


def _growth(sizes: list[float]) -> float:
  return (sizes[-1] - sizes[0]) / (len(sizes) - 1)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--runs', type=int, default=8)
  parser.add_argument('--client_groups', type=int, default=2)
  parser.add_argument('--runtime', default=execution.IN_PROCESS,
                      choices=(execution.IN_PROCESS, execution.RAY))
  args = parser.parse_args()
  execution.set_local_execution_context()
  growth, actors = {}, {}
  for keep in (True, False):
    print('results kept:' if keep else 'results dropped:')
    sizes, actor_sizes = _runs(args.runs, args.client_groups, keep,
                               args.runtime)
    growth[keep] = _growth(sizes)
    actors[keep] = _growth(actor_sizes) if actor_sizes else None
  print(f'growth a run: {growth[True]:.1f} MB with the results kept, '
        f'{growth[False]:.1f} MB dropped')
  if args.runtime == execution.RAY:
    print(f'the largest actor\'s growth a run: {actors[True]:.1f} MB with '
          f'the results kept, {actors[False]:.1f} MB dropped')
  execution.shutdown()


if __name__ == '__main__':
  main()
