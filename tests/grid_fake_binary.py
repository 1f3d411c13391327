"""A stand-in training binary for the grid runner's tests (no TFF).

  python -m tests.grid_fake_binary --rounds=4 --seed=1 --output_dir=D \
      [--accuracy=0.5] [--fail=true|usage] [--progress=false] [--sleep=S]
      [--epsilon=E]

Appends rounds to D/metrics.csv from the last one there (as a resumed run
does), eval/accuracy = accuracy + 0.01 * seed + 0.001 * round and
sgd_steps_cumulative = 10 * round (and, with --epsilon, dp/epsilon = E *
round, a column only DP runs have); `--fail=true` prints a line and exits 3
before writing anything, `--fail=usage` a flag error as absl prints it
(the error, then its help hint) and exits 1; `--sleep` waits that many
seconds first.
"""

import argparse
import os
import sys
import time


def main():
  parser = argparse.ArgumentParser()
  for name in ('rounds', 'seed'):
    parser.add_argument(f'--{name}', type=int, required=True)
  parser.add_argument('--output_dir', required=True)
  parser.add_argument('--accuracy', type=float, default=0.5)
  parser.add_argument('--fail', default='false')
  parser.add_argument('--progress', default='true')
  parser.add_argument('--sleep', type=float, default=0.0)
  parser.add_argument('--epsilon', type=float, default=None)
  args = parser.parse_args()
  time.sleep(args.sleep)
  if args.fail == 'usage':
    print('FATAL Flags parsing error: flag --rounds=x: not an int',
          file=sys.stderr)
    print('Pass --helpshort or --helpfull to see help on flags.',
          file=sys.stderr)
    sys.exit(1)
  if args.fail == 'true':
    print('Error: this setting cannot run.', file=sys.stderr)
    sys.exit(3)
  os.makedirs(args.output_dir, exist_ok=True)
  path = os.path.join(args.output_dir, 'metrics.csv')
  done = 0
  if os.path.exists(path):
    with open(path) as f:
      done = len(f.read().splitlines()) - 1
  with open(path, 'a') as f:
    dp = args.epsilon is not None
    if not done:
      f.write('round,eval/accuracy,sgd_steps_cumulative'
              + (',dp/epsilon' if dp else '') + '\n')
    for r in range(done + 1, args.rounds + 1):
      value = args.accuracy + 0.01 * args.seed + 0.001 * r
      f.write(f'{r},{value:.6f},{10 * r}'
              + (f',{args.epsilon * r:g}' if dp else '') + '\n')
  print(f'rounds {done + 1}-{args.rounds} done')


if __name__ == '__main__':
  main()
