"""Seed 004 §5.1's label-skew scenario on digits: FL-only vs mixed FL vs oracle.

Clients hold only some labels (`client_labels`), the datacentre holds the
rest, evaluation covers all labels. Five runs: FL-only (FedAvg on the
clients), Parallel Training, 1-way and 2-way Gradient Transfer (w_f = w_c =
0.5), and the centralised oracle: all training data pooled, K SGD steps a
round on batches of clients_per_round x batch_size examples (the examples a
round's cohort processes per step), same learning rate.

Central batches follow App. C.2's rubric: 100 examples for Parallel Training
and 2-way GT, 1000 for 1-way GT (whose one central batch a round is the
gradient every client step adds). Digits' central half holds ~720 training
examples, so 1-way GT's batch is all of them.
"""

import dataclasses
import os
import shutil

import numpy as np

from tasks.common import registry
from tasks.common import reports
from tasks.common import run as run_lib
from tasks.common import run_config
from tasks.common import run_spec
from tff_mixed import driver
from tff_mixed import keys
from tff_mixed.algorithms import mixed_fl
from tff_mixed.templates import client_groups

# Fast mode (tff_mixed.templates.client_groups): two groups, one per core.
CLIENT_GROUPS = 2
RUNS = ('FL only', 'PT', '1-way GT', '2-way GT', 'oracle')
# One colour per run in every panel of `plot`.
COLORS = {'FL only': 'tab:blue', 'PT': 'tab:orange', '1-way GT': 'tab:green',
          '2-way GT': 'tab:red', 'oracle': 'black'}
# The evaluation on all labels (the digits task's `all` group under skew).
ALL_ACCURACY = 'all/accuracy'
# Seed 004 App. C.2: |B_c| per mixing.
CENTRAL_BATCH_SIZE = {'PT': 100, '1-way GT': 1000, '2-way GT': 100}
_MIXING = {
    'PT': mixed_fl.PARALLEL_TRAINING,
    '1-way GT': mixed_fl.ONE_WAY_GRADIENT_TRANSFER,
    '2-way GT': mixed_fl.TWO_WAY_GRADIENT_TRANSFER,
}


@dataclasses.dataclass
class Comparison:
  results: dict[str, driver.ExperimentResult]
  group_accuracy: dict[str, dict[str, float]]
  rounds_to_90pct_oracle: dict[str, float]


def run_comparison(
    output_dir: str,
    *,
    client_labels=(0, 1, 2, 3, 4),
    rounds: int = 30,
    clients_per_round: int = 10,
    num_local_steps: int = 10,
    client_learning_rate: float = 0.1,
    batch_size: int = 10,
    seed: int = 0,
    progress: bool = True,
) -> Comparison:
  """Runs the five, each evaluated on all labels and per label group (the
digits task's evaluation under label skew)."""
  results = {}
  for name in RUNS:
    algorithm = registry.AlgorithmConfig(
        algorithm=_MIXING.get(name, 'oracle' if name == 'oracle' else 'fedavg'),
        num_local_steps=num_local_steps,
        client=registry.OptimizerSpec(learning_rate=client_learning_rate),
        gradient_dissimilarity=name in _MIXING,
        # The whole central data shuffled once (as seed 004 App. C.2.3
        # shuffles MovieLens's datacentre examples).
        central_shuffle_buffer=1000)
    spec = run_spec.RunSpec(
        'digits',
        task_args=dict(
            num_clients=100, dirichlet_alpha=0.5, batch_size=batch_size,
            client_labels=list(client_labels),
            # The oracle pools the central data in the clients' batch size.
            central_batch_size=CENTRAL_BATCH_SIZE.get(name, batch_size)),
        algorithm=algorithm,
        run=run_config.RunConfig(seed=seed,
                                 clients_per_round=clients_per_round),
        execution=run_config.Execution(
            rounds=rounds,
            client_groups=client_groups.ClientGroups(CLIENT_GROUPS),
            eval_every=2, checkpoint_every=rounds,
            progress=progress, output_dir=os.path.join(
                output_dir, name.replace(' ', '_').lower())))
    shutil.rmtree(spec.execution.output_dir, ignore_errors=True)
    results[name] = run_lib.run(spec)
  group_accuracy = {
      name: {group: result.final_eval[f'{part}/accuracy']
             for group, part in (('clients\' labels', 'clients'),
                                 ('central labels', 'central'))}
      for name, result in results.items()}
  target = 0.9 * results['oracle'].final_eval[ALL_ACCURACY]
  reached = {}
  for name, result in results.items():
    rounds_hit = [r['round'] for r in result.history
                  if r.get(keys.eval_column(ALL_ACCURACY), -1.0) >= target]
    reached[name] = rounds_hit[0] if rounds_hit else float('nan')
  return Comparison(results, group_accuracy, reached)


def print_table(comparison: Comparison) -> None:
  header = (f'{"run":<10}{"acc (all)":>10}{"acc 0-4":>9}{"acc 5-9":>9}'
            f'{"rounds to 90% oracle":>22}')
  print(header)
  print('-' * len(header))
  for name, result in comparison.results.items():
    group = list(comparison.group_accuracy[name].values())
    hit = comparison.rounds_to_90pct_oracle[name]
    print(f'{name:<10}{result.final_eval[ALL_ACCURACY]:>10.4f}{group[0]:>9.4f}'
          f'{group[1]:>9.4f}{"never" if np.isnan(hit) else int(hit):>22}')


def plot(comparison: Comparison, path: str) -> None:
  """Writes `path`: evaluation accuracy and loss on all labels, and the mixed
  runs' sampled G~_t^2 and B~_t^2 (seed 004 Eq. 7), against the round.

  Each run has one colour (`COLORS`) in every panel and one entry in a
  legend below the panels.
  """
  plt = reports.pyplot()
  fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), sharex=True)
  (accuracy, loss), (g_squared, b_squared) = axes
  handles = {}
  for name, result in comparison.results.items():
    style = dict(label=name, color=COLORS.get(name, 'tab:gray'), lw=1.4,
                 marker='o', ms=3)  # A single evaluation shows too.
    accuracy_key = keys.eval_column(ALL_ACCURACY)
    rows = [r for r in result.history if accuracy_key in r]
    rounds = [r[keys.ROUND] for r in rows]
    handles[name], = accuracy.plot(
        rounds, [r[accuracy_key] for r in rows], **style)
    loss.plot(rounds, [r[keys.eval_column(f'all/{keys.LOSS}')] for r in rows],
              **style)
    for ax, key in ((g_squared, keys.ROUND_G_SQUARED),
                    (b_squared, keys.ROUND_B_SQUARED)):
      rows = [r for r in result.history if key in r]
      if rows:
        ax.plot([r['round'] for r in rows], [r[key] for r in rows],
                **dict(style, ms=0))
  accuracy.set_ylabel('accuracy (fraction of all labels)')
  loss.set_ylabel('loss (cross-entropy, nats)')
  g_squared.set_ylabel(r'$\tilde G_t^2$ (squared gradient norm)')
  b_squared.set_ylabel(r'$\tilde B_t^2$ (ratio; 1 = gradients agree)')
  accuracy.set_title('evaluation accuracy, all labels')
  loss.set_title('evaluation loss, all labels')
  g_squared.set_title(r'$\tilde G_t^2$ (seed 004 Eq. 7, $B = 1$), mixed runs')
  b_squared.set_title(r'$\tilde B_t^2$ (seed 004 Eq. 7, $G = 0$), mixed runs')
  # Where the weighted gradients agree.
  g_squared.axhline(0.0, color='gray', lw=0.8, ls='--')
  b_squared.axhline(1.0, color='gray', lw=0.8, ls='--')
  for ax in axes.flat:
    ax.grid(alpha=0.3)
    ax.tick_params(labelbottom=True)  # sharex hides the top row's ticks.
  reports.round_axis(*axes.flat)
  fig.legend(handles=list(handles.values()), loc='lower center',
             ncol=len(handles), frameon=False)
  fig.tight_layout(rect=(0, 0.05, 1, 1))
  reports.save_figure(fig, path)
