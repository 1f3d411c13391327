"""`make demo` (`python -m tasks.digits.demo`) at two rounds, read as a user
reads it: the FedAvg/FedAdam table, the label-skew table of
`label_skew.run_comparison` and the plots."""

import csv

import numpy as np

from tasks.digits import label_skew
from tasks.digits import task as digits_task
from tests import binaries

ROUNDS, CLIENTS, K = 2, 2, 1


def _rows(lines, first):
  """The table rows under the header starting with `first`."""
  start = next(i for i, line in enumerate(lines) if line.startswith(first))
  rows = []
  for line in lines[start + 2:]:  # Header, rule.
    if not line.strip() or line.startswith('plot:'):
      break
    rows.append(line)
  return rows


def test_the_demo_at_two_rounds(tmp_path):
  out = tmp_path / 'demo'
  run = binaries.run('tasks.digits.demo', f'--rounds={ROUNDS}',
                     f'--clients_per_round={CLIENTS}',
                     f'--num_local_steps={K}', f'--output_dir={out}')
  assert run.returncode == 0, run.stderr[-3000:]
  lines = run.stdout.splitlines()

  # FedAvg and FedAdam: every round's clients took exactly K steps.
  table = [line.split() for line in _rows(lines, 'algorithm')]
  assert [row[0] for row in table] == ['FedAvg', 'FedAdam']
  for name, accuracy, rounds, steps, _ in table:
    assert (int(rounds), int(steps)) == (ROUNDS, ROUNDS * CLIENTS * K), name
    with open(out / name.lower() / 'metrics.csv') as f:
      last = list(csv.DictReader(f))[-1]
    assert float(accuracy) == round(float(last['eval/accuracy']), 4)
  assert f'plot: {out}/eval_accuracy.png' in lines

  # Label skew: the five runs; the accuracy on all labels is the two label
  # groups' accuracies weighted by their sizes in the evaluation set.
  skew = _rows(lines, 'run')
  names = [row[:10].strip() for row in skew]
  assert names == list(label_skew.RUNS)
  _, _, _, y_eval = digits_task.load_digits(0)
  clients_share = np.isin(y_eval, [0, 1, 2, 3, 4]).mean()
  for row in skew:
    overall, clients, central, reached = row[10:].split()
    assert abs(float(overall) - (clients_share * float(clients) + (
        1 - clients_share) * float(central))) <= 1.5e-4, row
    if row.startswith('oracle'):  # 90% of its own final accuracy: reached.
      assert 1 <= int(reached) <= ROUNDS
    else:
      assert reached == 'never' or 1 <= int(reached) <= ROUNDS
  for name in label_skew.RUNS:
    run_dir = out / 'label_skew' / name.replace(' ', '_').lower()
    assert (run_dir / 'metrics.csv').exists(), run_dir
  assert lines[-1] == f'plot: {out}/label_skew.png'
  assert (out / 'label_skew.png').stat().st_size > 10_000
