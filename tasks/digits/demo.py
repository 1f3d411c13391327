r"""Offline demo: FedAvg and FedAdam on the digits task, a table and a plot.

  python -m tasks.digits.demo --output_dir=demo_output

Runs in about a minute on two CPU cores (fast mode); needs no download.
"""

import os
import shutil

from absl import flags

from tasks.common import command
from tasks.common import reports
from tasks.common import run as run_lib
from tasks.common import task_registry
from tasks.digits import label_skew
from tff_mixed import keys

flags.DEFINE_string('output_dir', 'demo_output', 'Where runs and plots go.')
flags.DEFINE_integer('rounds', 30, 'Rounds per algorithm.', lower_bound=1)
flags.DEFINE_integer('num_local_steps', 10, 'SGD steps every client takes per round (K).', lower_bound=1)
flags.DEFINE_integer('clients_per_round', 10, 'Clients sampled per round (S).', lower_bound=1)
flags.DEFINE_integer('seed', 0, 'Seeds initialisation, data split and client sampling.')
command.define_other_names()
FLAGS = flags.FLAGS

CLIENT_LR = 0.1
# Fast mode (tff_mixed.templates.client_groups): two groups, one per core.
CLIENT_GROUPS = 2


def _specs(fv):
  """The two runs, from the demo's flags `fv`: what `python -m
  tasks.digits.train` trains with the same values (`task_registry.spec`)."""
  common = dict(
      seed=fv.seed, rounds=fv.rounds, clients_per_round=fv.clients_per_round,
      num_local_steps=fv.num_local_steps, client_learning_rate=CLIENT_LR,
      eval_every=2, checkpoint_every=fv.rounds, client_groups=CLIENT_GROUPS)
  return {
      name: task_registry.spec(
          'digits', **common, **extra,
          output_dir=os.path.join(fv.output_dir, name.lower()))
      for name, extra in (
          ('FedAvg', dict(algorithm='fedavg')),
          ('FedAdam', dict(algorithm='fedadam', server_learning_rate=0.03)))
  }


def main(argv):
  del argv
  command.quiet_logs()
  results = {}
  for name, spec in _specs(FLAGS).items():
    # The demo always starts fresh.
    shutil.rmtree(spec.execution.output_dir, ignore_errors=True)
    results[name] = run_lib.run(spec)

  header = f'{"algorithm":<10}{"eval accuracy":>15}{"rounds":>8}{"client SGD steps":>18}{"wall time (s)":>15}'
  print(header)
  print('-' * len(header))
  for name, result in results.items():
    last = result.history[-1]
    print(f'{name:<10}{result.final_eval["accuracy"]:>15.4f}{int(last["round"]):>8}'
          f'{int(last[keys.SGD_STEPS_CUMULATIVE]):>18}{result.wall_time_seconds:>15.1f}')

  fig, ax = reports.pyplot().subplots(figsize=(6, 4))
  for name, result in results.items():
    accuracy_key = keys.eval_column('accuracy')
    rows = [r for r in result.history if accuracy_key in r]
    ax.plot([r[keys.ROUND] for r in rows], [r[accuracy_key] for r in rows],
            marker='o', markersize=3, label=name)
  reports.round_axis(ax)
  ax.set_ylabel('evaluation accuracy (fraction, all labels)')
  ax.set_title(f'digits, {FLAGS.clients_per_round} clients/round, K={FLAGS.num_local_steps}')
  ax.grid(alpha=0.3)
  ax.legend()
  path = os.path.join(FLAGS.output_dir, 'eval_accuracy.png')
  fig.tight_layout()
  reports.save_figure(fig, path, dpi=120)
  print(f'plot: {path}\n')

  print(f'Label skew (seed 004 §5.1): clients hold digits 0-4, the '
        f'datacentre 5-9; {FLAGS.rounds} rounds, K = J = {FLAGS.num_local_steps}.')
  comparison = label_skew.run_comparison(
      os.path.join(FLAGS.output_dir, 'label_skew'), rounds=FLAGS.rounds,
      clients_per_round=FLAGS.clients_per_round,
      num_local_steps=FLAGS.num_local_steps, seed=FLAGS.seed)
  label_skew.print_table(comparison)
  path = os.path.join(FLAGS.output_dir, 'label_skew.png')
  label_skew.plot(comparison, path)
  print(f'plot: {path}')


if __name__ == '__main__':
  command.run(main)
