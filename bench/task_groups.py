r"""Fast mode on the seed tasks: sequential vs vectorised client groups.

  .venv/bin/python bench/task_groups.py [--rounds=6] [--repeats=2]
      [--flags='--clients_per_round=4 --client_groups=1 --num_local_steps=10']

Runs each benchmark task's training binary at its `cpu_small` preset on the
synthetic stand-in of its data (`--use_synthetic_data`: the real loaders on
small files in the source's format) with `--group_mode=sequential` and
`--group_mode=vectorised`, alternating, and prints each mode's median
`round_seconds` (metrics.csv, rounds 2 on: round 1 traces) and the
binary's peak resident memory (`ru_maxrss` of the child; the TFF worker is
its own process and not counted). `--flags` adds flags to every run (the
`cpu_small` presets train 2 clients a round in 2 groups: one client a
group, nothing to vectorise). A model that cannot train a group at once
runs sequentially in both (the binary's log says why), so its ratio is ~1.
No timing is asserted anywhere.
"""

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile

TASKS = ('femnist', 'cifar100', 'shakespeare', 'stackoverflow_tags',
         'sent140', 'celeba')
MODES = ('sequential', 'vectorised')
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_binary(task, mode, rounds, out, extra=()):
  """`(round seconds after round 1, peak RSS in MB, why sequential)`."""
  command = [sys.executable, '-m', f'tasks.{task}.train',
             '--use_synthetic_data', '--preset=cpu_small',
             f'--rounds={rounds}', f'--eval_every={rounds}',
             f'--checkpoint_every={rounds}', '--noprogress',
             f'--group_mode={mode}', f'--output_dir={out}', *extra]
  with tempfile.TemporaryFile('w+') as log:
    child = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log, text=True,
        env={**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '2'})
    _, status, usage = os.wait4(child.pid, 0)  # This child's own rusage.
    child.returncode = os.waitstatus_to_exitcode(status)
    log.seek(0)
    stderr = log.read()
  if child.returncode:
    raise RuntimeError(f'{task} {mode} failed:\n{stderr[-2000:]}')
  peak = usage.ru_maxrss
  with open(os.path.join(out, 'metrics.csv')) as f:
    seconds = [float(row['round_seconds']) for row in csv.DictReader(f)
               if int(row['round']) > 1]
  why = [l.split('another: ', 1)[1] for l in stderr.splitlines()
         if 'train their clients one after another: ' in l]
  return seconds, peak / 1024, why[0] if why else ''


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--rounds', type=int, default=6)
  parser.add_argument('--repeats', type=int, default=2)
  parser.add_argument('--tasks', default=','.join(TASKS))
  parser.add_argument('--flags', default='',
                      help='Flags added to every run, space-separated.')
  args = parser.parse_args()
  results = {}
  with tempfile.TemporaryDirectory() as tmp:
    for repeat in range(args.repeats):
      for task in args.tasks.split(','):
        modes = MODES if repeat % 2 == 0 else MODES[::-1]
        for mode in modes:
          out = os.path.join(tmp, f'{task}_{mode}_{repeat}')
          seconds, peak, why = run_binary(task, mode, args.rounds, out,
                                          args.flags.split())
          entry = results.setdefault((task, mode), ([], [], why))
          entry[0].extend(seconds)
          entry[1].append(peak)
          print(f'{task} {mode}: {1000 * statistics.median(seconds):.0f} ms',
                file=sys.stderr, flush=True)
  print('| task (cpu_small) | sequential ms | vectorised ms | sequential / '
        'vectorised | peak RSS seq / vec (MB) | vectorised? |')
  print('|---|---|---|---|---|---|')
  for task in args.tasks.split(','):
    seq, vec = results[task, 'sequential'], results[task, 'vectorised']
    s, v = statistics.median(seq[0]), statistics.median(vec[0])
    print(f'| {task} | {1000 * s:.0f} | {1000 * v:.0f} | {s / v:.2f} | '
          f'{max(seq[1]):.0f} / {max(vec[1]):.0f} | '
          f'{"no: " + vec[2] if vec[2] else "yes"} |')


if __name__ == '__main__':
  main()
