r"""Seed 003's comparison on any benchmark task: FedAvg, AdaptiveFedOpt,
FedGBO, Mimelite and MFL, each adaptive one with SGDm, RMSProp and Adam,
at K = 10.

  python -m tasks.adaptive_fl --output_dir=/tmp/digits_adaptive
  python -m tasks.adaptive_fl --task=cifar100 --data_dir=$HOME/.tff \
      --rounds=5000 --clients_per_round=5 --output_dir=/tmp/cifar_adaptive

Every setting is a run through `tff_mixed.driver` in its own sub-directory,
so an interrupted comparison resumes. With `--tune` each setting tries the
three learning rates of its grid (`GRIDS`; the paper grid-searched eta and
beta, we search eta at the paper's beta 0.9, beta_2 0.99, eps 1e-3) and
keeps the best by best evaluation metric; without it, the middle value.
Prints a table (seed 003's Table 4 and Fig. 1 in numbers: final and best
metric, the round and the KiB per client at which `--target` is first
reached, KiB down and up per client per round, client FLOPs per round by
seed 003 Eq. 22), writes it to `table.csv`, and writes `accuracy.png`, the
metric against the round and against the KiB a client has moved. Every
byte count is in KiB (1024 bytes). The metric is the task's accuracy (top-5
recall for `stackoverflow_tags`).
"""

import dataclasses
import os

from absl import app
from absl import flags
import tensorflow_federated as tff

from tasks.common import benchmark
from tasks.common import outputs
from tasks.common import registry
from tasks.common import run as run_lib
from tff_mixed import keys
from tff_mixed import optimizers

flags.DEFINE_string('output_dir', None, 'Where the runs and the plot go.')
flags.DEFINE_integer('rounds', 60, 'Rounds per setting.', lower_bound=1)
flags.DEFINE_integer('clients_per_round', 10, 'Clients sampled per round (S).', lower_bound=1)
flags.DEFINE_integer('num_local_steps', 10, 'SGD steps every client takes per round (K).', lower_bound=1)
flags.DEFINE_integer('eval_every', 5, 'Evaluate every this many rounds.',
                     lower_bound=1)
flags.DEFINE_float('target', 0.85,
                   'Value of the metric whose first round and bytes the '
                   'table reports.', lower_bound=0.0, upper_bound=1.0)
flags.DEFINE_bool('tune', False, 'Try every learning rate of each grid.')
flags.DEFINE_list('only', [], 'Run only these settings (names as printed).')
flags.DEFINE_integer('seed', 0, 'Seeds initialisation, data split and client sampling.')
benchmark.define_comparison_flags()
FLAGS = flags.FLAGS
# Fast mode (tff_mixed.templates.client_groups): two groups, one per core.
CLIENT_GROUPS = 2

SGD_CLIENT_LR = 0.1  # AdaptiveFedOpt's clients (tuned for FedAvg here).
# Learning-rate grids (eta of the clients; the server's for AdaptiveFedOpt).
GRIDS = {
    ('fedavg', 'sgd'): (0.03, 0.1, 0.3),
    ('adaptive_fed_opt', 'sgdm'): (0.3, 1.0, 3.0),
    ('adaptive_fed_opt', 'rmsprop'): (0.03, 0.1, 0.3),
    ('adaptive_fed_opt', 'adam'): (0.03, 0.1, 0.3),
    **{(a, 'sgdm'): (0.03, 0.1, 0.3) for a in ('fed_gbo', 'mimelite', 'mfl')},
    **{(a, 'rmsprop'): (0.003, 0.01, 0.03) for a in ('fed_gbo', 'mimelite', 'mfl')},
    **{(a, 'adam'): (0.01, 0.03, 0.1) for a in ('fed_gbo', 'mimelite', 'mfl')},
}
NAMES = {'fedavg': 'FedAvg', 'adaptive_fed_opt': 'AdaptiveFedOpt',
         'fed_gbo': 'FedGBO', 'mimelite': 'Mimelite', 'mfl': 'MFL'}
# `plot`: a colour per algorithm, a line style and marker per optimizer.
COLORS = {'fedavg': 'black', 'adaptive_fed_opt': 'tab:blue',
          'fed_gbo': 'tab:orange', 'mimelite': 'tab:green', 'mfl': 'tab:red'}
LINE_STYLES = {'sgd': ('-', 'o'), 'sgdm': ('-', 'o'), 'rmsprop': ('--', 's'),
               'adam': (':', '^')}
KIB = 1024  # Bytes; every table and plot counts bytes in KiB.


@dataclasses.dataclass(frozen=True)
class Setting:
  algorithm: str
  optimizer: str
  learning_rate: float

  @property
  def name(self) -> str:
    if self.algorithm == 'fedavg':
      return 'FedAvg'
    return f'{NAMES[self.algorithm]} {self.optimizer}'


def algorithm_config(setting: Setting,
                     num_local_steps: int) -> registry.AlgorithmConfig:
  """The setting's algorithm, at the paper's decays (App. B.5)."""
  lr = setting.learning_rate
  server_side = setting.algorithm == 'adaptive_fed_opt'
  return registry.AlgorithmConfig(
      algorithm=setting.algorithm, num_local_steps=num_local_steps,
      client=registry.OptimizerSpec(
          learning_rate=SGD_CLIENT_LR if server_side else lr),
      server=registry.OptimizerSpec(learning_rate=lr if server_side else None),
      adaptive=(None if setting.algorithm == 'fedavg'
                else optimizers.get(setting.optimizer)),
      # The paper's uniform mean over clients (seed 003's builders' default).
      client_weighting=tff.learning.ClientWeighting.UNIFORM)


def settings(tune: bool) -> list[list[Setting]]:
  """Per setting, the learning rates to try (all of the grid, or its middle)."""
  out = []
  for (algorithm, optimizer), grid in GRIDS.items():
    rates = grid if tune else (grid[len(grid) // 2],)
    out.append([Setting(algorithm, optimizer, lr) for lr in rates])
  return out


def run_setting(task, setting, num_local_steps: int,
                run_config: registry.RunConfig, data_config):
  """One setting's run, K = `num_local_steps`, as `run_config` says."""
  return run_lib.run(
      task, algorithm_config(setting, num_local_steps), run_config,
      record={'algorithm': setting.algorithm, 'optimizer': setting.optimizer,
              'learning_rate': setting.learning_rate,
              'num_local_steps': num_local_steps, **data_config})


def _best(result, key: str) -> float:
  return max(r[key] for r in result.history if key in r)


def summarise(results: dict, target: float,
              metric: str = 'accuracy') -> list[dict]:
  key = keys.eval_column(metric)
  rows = []
  for name, (setting, result) in results.items():
    history = result.history
    evals = [r for r in history if key in r]
    last = history[-1]
    down = last[keys.ROUND_BYTES_DOWNLOADED]
    up = last[keys.ROUND_BYTES_UPLOADED]
    reached = next((r['round'] for r in evals
                    if r[key] >= target), None)
    rows.append(dict(
        setting=name, learning_rate=setting.learning_rate,
        final=evals[-1][key], best=max(r[key] for r in evals),
        target_round=reached,
        target_kib=None if reached is None else reached * (down + up) / KIB,
        kib_down=down / KIB, kib_up=up / KIB,
        mflops=sum(r[keys.ROUND_CLIENT_FLOPS]
                   for r in history) / len(history) / 1e6))
  return rows


def print_table(rows, target: float) -> None:
  print(f'{"setting":<23}{"eta":>7}{"final":>7}{"best":>7}'
        f'{"round@" + format(target, ".2f"):>11}{"KiB@":>9}{"KiB down":>9}'
        f'{"KiB up":>8}{"MFLOP/rnd":>10}')
  for r in rows:
    at = '-' if r['target_round'] is None else str(r['target_round'])
    kib = '-' if r['target_kib'] is None else f'{r["target_kib"]:.1f}'
    print(f'{r["setting"]:<23}{r["learning_rate"]:>7g}'
          f'{r["final"]:>7.3f}{r["best"]:>7.3f}{at:>11}'
          f'{kib:>9}{r["kib_down"]:>9.1f}{r["kib_up"]:>8.1f}'
          f'{r["mflops"]:>10.3f}')


def plot(results: dict, path: str, metric: str = 'accuracy') -> None:
  """Writes `path`: the metric against the round and against the KiB a
  client has moved (down + up), a colour per algorithm (`COLORS`) and a line
  style per optimizer (`LINE_STYLES`)."""
  key = keys.eval_column(metric)
  plt = outputs.pyplot()
  fig, axes = plt.subplots(1, 2, figsize=(13, 4.5), sharey=True)
  for name, (setting, result) in results.items():
    rows = [r for r in result.history if key in r]
    per_round = (rows[-1][keys.ROUND_BYTES_DOWNLOADED]
                 + rows[-1][keys.ROUND_BYTES_UPLOADED])
    acc = [r[key] for r in rows]
    ls, marker = LINE_STYLES[setting.optimizer]
    style = dict(label=name, lw=1.2, ls=ls, marker=marker, ms=3,
                 color=COLORS[setting.algorithm])  # One evaluation shows too.
    axes[0].plot([r['round'] for r in rows], acc, **style)
    axes[1].plot([r['round'] * per_round / KIB for r in rows], acc, **style)
  outputs.round_axis(axes[0])
  axes[1].set_xlabel('KiB moved per client (down + up)')
  axes[0].set_ylabel(f'evaluation {metric}')
  for ax in axes:
    ax.grid(alpha=0.3)
  axes[1].legend(fontsize=7, ncol=2)
  fig.tight_layout()
  outputs.save_figure(fig, path)


def main(argv):
  outputs.check_arguments(argv, FLAGS.output_dir)
  groups = settings(FLAGS.tune)
  known = [g[0].name for g in groups]
  unknown = [n for n in FLAGS.only if n not in known]
  if unknown:
    raise app.UsageError(
        f'--only: unknown setting {", ".join(unknown)}; choose from '
        f'{", ".join(known)}.')
  outputs.start_tff()
  chosen = benchmark.comparison_task(FLAGS, FLAGS.seed)
  task, key = chosen.task, keys.eval_column(chosen.metric)
  results = {}
  for group in groups:
    if FLAGS.only and group[0].name not in FLAGS.only:
      continue
    runs = []
    for setting in group:
      slug = (f'{setting.algorithm}_{setting.optimizer}_'
              f'lr{setting.learning_rate:g}')
      result = run_setting(
          task, setting, FLAGS.num_local_steps, registry.RunConfig(
              seed=FLAGS.seed, rounds=FLAGS.rounds,
              clients_per_round=FLAGS.clients_per_round,
              output_dir=os.path.join(FLAGS.output_dir, slug),
              eval_every=FLAGS.eval_every, checkpoint_every=FLAGS.eval_every,
              progress=False, client_groups=CLIENT_GROUPS),
          chosen.config)
      runs.append((setting, result))
      print(f'{setting.name} eta={setting.learning_rate:g}: best '
            f'{chosen.metric} {_best(result, key):.4f} '
            f'({result.wall_time_seconds:.0f}s)', flush=True)
    best = max(runs, key=lambda run: _best(run[1], key))
    results[group[0].name] = best
  rows = summarise(results, FLAGS.target, chosen.metric)
  print_table(rows, FLAGS.target)
  outputs.write_csv(os.path.join(FLAGS.output_dir, 'table.csv'), rows)
  path = os.path.join(FLAGS.output_dir, 'accuracy.png')
  plot(results, path, chosen.metric)
  print(f'plot: {path}')


if __name__ == '__main__':
  outputs.run(main)
