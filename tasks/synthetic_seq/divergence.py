r"""FedAvg's divergence from centralised training on SyntheticSeq (seed 002
§4.2-4.4, Fig. 4.5-4.6).

  python -m tasks.synthetic_seq.divergence --preset=cpu_small \
      --output_dir=/tmp/synthetic_seq_divergence

For feature shift (SyntheticSeq(K, 0), K over `--num_clusters`) and concept
drift (SyntheticSeq(1, epsilon), epsilon over `--epsilons`): FedAvg
(`tff_mixed.algorithms.build_fed_avg`; 20 clients every round, each one
full batch, so a local step is a gradient-descent step on its data) for
every learning rate x local steps E, and centralised gradient descent on the
union of the clients' data at the same learning rate, both from the same
initial weights. Omega(t, E) = L_FedAvg(round t) - L_central(E t steps)
(Eq. 4.1 in losses; the same number of gradient steps, as Ch. 3 compares),
both on the union of the training data. With E = 1 FedAvg *is* centralised
gradient descent (equal clients, full batches), so Omega is 0 there.

Writes `divergence.csv` (one row per setting, learning rate, E and round:
both losses and Omega),
`feature_shift.png` / `concept_drift.png` (Omega over round x E, a cell per
measured pair, on one colour scale diverging from 0 shared by every panel; a
row per setting and a column per learning rate, as Fig. 4.5-4.6) and
`runs/` (one file per run: a restart with the same flags reuses finished
runs), and prints the mean Omega of each setting. The paper grid (8
settings x 3 rates x 5 E x 1000 rounds) takes days here; `cpu_small`
(4 settings x 1 rate x 3 E x 20 rounds) minutes.
"""

import sys

from absl import app
from absl import flags
import numpy as np

from tasks.common import command
from tasks.synthetic_seq import data
from tasks.synthetic_seq import experiment
from tff_mixed import driver

PRESETS = {
    'paper': dict(num_clusters=['1', '2', '5', '10'],
                  epsilons=['1', '2', '5', '10'],
                  learning_rates=['0.1', '0.01', '0.001'],
                  local_steps=['1', '2', '5', '10', '20'], rounds=1000),
    # One rate above the paper's grid, so that 20 rounds leave the start.
    'cpu_small': dict(num_clusters=['1', '10'], epsilons=['1', '10'],
                      learning_rates=['1.0'], local_steps=['1', '2', '5'],
                      rounds=20),
}
flags.DEFINE_string('output_dir', None, 'Where the table, plots and runs go.')
command.define_preset_flag(
    PRESETS, 'Grid: paper (§4.2-4.4) or cpu_small; the flags below override it.',
    durations={'paper': 'days (4 x 4 settings x 3 rates x 5 E x 1000 rounds; '
                        'docs/niid.md)'})
flags.DEFINE_enum('shift', 'both', ['feature', 'concept', 'both'],
                  'Which experiment: feature shift (K), concept drift '
                  '(epsilon) or both.')
flags.DEFINE_list('num_clusters', None, 'K of SyntheticSeq(K, 0).')
flags.DEFINE_list('epsilons', None, 'epsilon of SyntheticSeq(1, epsilon).')
flags.DEFINE_list('learning_rates', None, 'Client (and centralised) rates.')
flags.DEFINE_list('local_steps', None, 'Local steps E per round.')
flags.DEFINE_integer('rounds', None, 'Rounds per run (T); default the preset\'s.', lower_bound=1)
flags.DEFINE_integer('seed', 0, 'Seeds the data and the initial weights.')
flags.DEFINE_enum('reading', data.ALGORITHM_3, data.READINGS,
                  'How SyntheticSeq draws client weights and start tokens: '
                  'algorithm_3 (Alg. 3 as printed: N(0, eps) alone, start '
                  'token sampled from [1..K]) or shared_base (ours: base + '
                  'N(0, eps), cluster c mod K); see tasks/synthetic_seq/'
                  'data.py.')
command.define_other_names()
FLAGS = flags.FLAGS


def main(argv):
  command.check_arguments(argv, FLAGS.output_dir)
  command.apply_preset(PRESETS)

  def pick(name, cast, minimum):
    return command.parse_numbers(
        name, FLAGS[name].value, cast, minimum=minimum,
        exclusive=name == 'learning_rates')

  config = data.SyntheticSeqConfig()
  num_clusters = pick('num_clusters', int, 1)
  if max(num_clusters) > config.num_clients:
    raise app.UsageError(f'--num_clusters must be <= {config.num_clients} '
                         f'(the clients), got {max(num_clusters)}.')
  epsilons = pick('epsilons', float, 0.0)
  learning_rates = pick('learning_rates', float, 0.0)
  local_steps = pick('local_steps', int, 1)
  rounds = FLAGS.rounds
  settings = []
  if FLAGS.shift in ('feature', 'both'):
    settings += [('feature', k, 0.0) for k in num_clusters]
  if FLAGS.shift in ('concept', 'both'):
    settings += [('concept', 1, eps) for eps in epsilons]
  try:
    driver.prepare_output_dir(FLAGS.output_dir, dict(
        settings=settings, learning_rates=learning_rates,
        local_steps=local_steps, rounds=rounds, seed=FLAGS.seed,
        reading=FLAGS.reading))
  except driver.OutputDirError as e:
    sys.exit(f'Error: {e}')
  command.quiet_logs()
  results = experiment.run(
      FLAGS.output_dir, settings=settings, learning_rates=learning_rates,
      local_steps=local_steps, rounds=rounds, seed=FLAGS.seed, config=config,
      reading=FLAGS.reading)
  print(f'{"setting":<16}' + ''.join(f'{f"lr {lr:g}":>12}'
                                     for lr in learning_rates)
        + '   (mean Omega over E and rounds)')
  for shift, k, epsilon in settings:
    value = k if shift == 'feature' else epsilon
    label = f'K={k}' if shift == 'feature' else f'epsilon={epsilon:g}'
    print(f'{label:<16}' + ''.join(
        f'{np.mean([results[shift, value, lr, e] for e in local_steps]):>12.4f}'
        for lr in learning_rates))
  print(f'written: {FLAGS.output_dir}/divergence.csv and plots')


if __name__ == '__main__':
  command.run(main)
