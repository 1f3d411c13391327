r"""Seed 003's comparison on the digits task: FedAvg, AdaptiveFedOpt, FedGBO,
Mimelite and MFL, each adaptive one with SGDm, RMSProp and Adam, at K = 10.

  python -m tasks.digits.adaptive_fl --output_dir=/tmp/digits_adaptive

Every setting is a run through `tff_mixed.driver` in its own sub-directory,
so an interrupted comparison resumes. With `--tune` each setting tries the
three learning rates of its grid (`GRIDS`; the paper grid-searched eta and
beta, we search eta at the paper's beta 0.9, beta_2 0.99, eps 1e-3) and
keeps the best by best evaluation accuracy; without it, the middle value.
Prints a table (final and best accuracy, the round and the megabytes per
client at which `--target_accuracy` is first reached, bytes down and up per
client per round, client FLOPs per round by seed 003 Eq. 22) and writes
`accuracy.png`, accuracy against the round and against the bytes a client
has moved.
"""

import dataclasses
import os

from absl import app
from absl import flags
import tensorflow_federated as tff

from tasks import outputs
from tasks import registry
from tasks.digits import task as digits_task
from tff_mixed import driver
from tff_mixed import optimizers

flags.DEFINE_string('output_dir', None, 'Where the runs and the plot go.')
flags.DEFINE_integer('rounds', 60, 'Rounds per setting.', lower_bound=1)
flags.DEFINE_integer('clients_per_round', 10, 'Cohort size.', lower_bound=1)
flags.DEFINE_integer('num_clients', 100, 'Training clients.', lower_bound=1)
flags.DEFINE_float('dirichlet_alpha', 0.3, 'Label skew of the split.',
                   lower_bound=1e-6)
flags.DEFINE_integer('num_local_steps', 10, 'K.', lower_bound=1)
flags.DEFINE_integer('eval_every', 5, 'Evaluate every this many rounds.',
                     lower_bound=1)
flags.DEFINE_float('target_accuracy', 0.85,
                   'Accuracy whose first round and bytes the table reports.',
                   lower_bound=0.0, upper_bound=1.0)
flags.DEFINE_bool('tune', False, 'Try every learning rate of each grid.')
flags.DEFINE_list('only', [], 'Run only these settings (names as printed).')
flags.DEFINE_integer('seed', 0, 'Seed.')
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


def build_process(task, setting: Setting, num_local_steps: int):
  """The setting's process, at the paper's decays (App. B.5)."""
  lr = setting.learning_rate
  server_side = setting.algorithm == 'adaptive_fed_opt'
  config = registry.ExperimentConfig(
      algorithm=setting.algorithm, num_local_steps=num_local_steps,
      client=registry.OptimizerSpec(
          learning_rate=SGD_CLIENT_LR if server_side else lr),
      server=registry.OptimizerSpec(learning_rate=lr if server_side else None),
      adaptive=(None if setting.algorithm == 'fedavg'
                else optimizers.get(setting.optimizer)),
      # The paper's uniform mean over clients (seed 003's builders' default).
      client_weighting=tff.learning.ClientWeighting.UNIFORM,
      client_groups=CLIENT_GROUPS)
  return registry.build_process(
      config, task.model_fn, flops_per_example=task.flops_per_example)


def settings(tune: bool) -> list[list[Setting]]:
  """Per setting, the learning rates to try (all of the grid, or its middle)."""
  out = []
  for (algorithm, optimizer), grid in GRIDS.items():
    rates = grid if tune else (grid[len(grid) // 2],)
    out.append([Setting(algorithm, optimizer, lr) for lr in rates])
  return out


def run_setting(task, setting, output_dir):
  process = build_process(task, setting, FLAGS.num_local_steps)
  return driver.run_experiment(
      task, process, rounds=FLAGS.rounds,
      clients_per_round=FLAGS.clients_per_round, output_dir=output_dir,
      seed=FLAGS.seed, eval_every=FLAGS.eval_every,
      checkpoint_every=FLAGS.eval_every, progress=False,
      client_groups=CLIENT_GROUPS,
      config={'algorithm': setting.algorithm, 'optimizer': setting.optimizer,
              'learning_rate': setting.learning_rate,
              'num_local_steps': FLAGS.num_local_steps,
              'num_clients': FLAGS.num_clients,
              'dirichlet_alpha': FLAGS.dirichlet_alpha})


def _best_accuracy(result) -> float:
  return max(r['eval/accuracy'] for r in result.history
             if 'eval/accuracy' in r)


def summarise(results: dict, target: float) -> list[dict]:
  rows = []
  for name, (setting, result) in results.items():
    history = result.history
    evals = [r for r in history if 'eval/accuracy' in r]
    last = history[-1]
    down = last['client_work/bytes_downloaded_per_client']
    up = last['client_work/bytes_uploaded_per_client']
    reached = next((r['round'] for r in evals
                    if r['eval/accuracy'] >= target), None)
    rows.append(dict(
        setting=name, learning_rate=setting.learning_rate,
        final_accuracy=evals[-1]['eval/accuracy'],
        best_accuracy=max(r['eval/accuracy'] for r in evals),
        target_round=reached,
        target_megabytes=None if reached is None else reached * (down + up) / 1e6,
        kib_down=down / 1024, kib_up=up / 1024,
        mflops=sum(r['client_work/client_flops_per_client']
                   for r in history) / len(history) / 1e6))
  return rows


def print_table(rows, target: float) -> None:
  print(f'{"setting":<23}{"eta":>7}{"final":>7}{"best":>7}'
        f'{"round@" + format(target, ".2f"):>11}{"MB@":>7}{"KiB down":>9}'
        f'{"KiB up":>8}{"MFLOP/rnd":>10}')
  for r in rows:
    at = '-' if r['target_round'] is None else str(r['target_round'])
    mb = '-' if r['target_megabytes'] is None else f'{r["target_megabytes"]:.2f}'
    print(f'{r["setting"]:<23}{r["learning_rate"]:>7g}'
          f'{r["final_accuracy"]:>7.3f}{r["best_accuracy"]:>7.3f}{at:>11}'
          f'{mb:>7}{r["kib_down"]:>9.1f}{r["kib_up"]:>8.1f}'
          f'{r["mflops"]:>10.3f}')


def plot(results: dict, path: str) -> None:
  plt = outputs.pyplot()
  fig, axes = plt.subplots(1, 2, figsize=(13, 4.5), sharey=True)
  styles = {'sgd': '-', 'sgdm': '-', 'rmsprop': '--', 'adam': ':'}
  for name, (setting, result) in results.items():
    rows = [r for r in result.history if 'eval/accuracy' in r]
    per_round = (rows[-1]['client_work/bytes_downloaded_per_client']
                 + rows[-1]['client_work/bytes_uploaded_per_client'])
    acc = [r['eval/accuracy'] for r in rows]
    style = dict(label=name, lw=1.2, ls=styles[setting.optimizer])
    axes[0].plot([r['round'] for r in rows], acc, **style)
    axes[1].plot([r['round'] * per_round / 1e6 for r in rows], acc, **style)
  axes[0].set_xlabel('round')
  axes[1].set_xlabel('megabytes moved per client (down + up)')
  axes[0].set_ylabel('evaluation accuracy')
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
  task = digits_task.create_digits_task(
      num_clients=FLAGS.num_clients, dirichlet_alpha=FLAGS.dirichlet_alpha,
      seed=FLAGS.seed)
  results = {}
  for group in groups:
    if FLAGS.only and group[0].name not in FLAGS.only:
      continue
    runs = []
    for setting in group:
      slug = (f'{setting.algorithm}_{setting.optimizer}_'
              f'lr{setting.learning_rate:g}')
      result = run_setting(task, setting, os.path.join(FLAGS.output_dir, slug))
      runs.append((setting, result))
      print(f'{setting.name} eta={setting.learning_rate:g}: best accuracy '
            f'{_best_accuracy(result):.4f} '
            f'({result.wall_time_seconds:.0f}s)', flush=True)
    best = max(runs, key=lambda run: _best_accuracy(run[1]))
    results[group[0].name] = best
  rows = summarise(results, FLAGS.target_accuracy)
  print_table(rows, FLAGS.target_accuracy)
  path = os.path.join(FLAGS.output_dir, 'accuracy.png')
  plot(results, path)
  print(f'plot: {path}')


if __name__ == '__main__':
  outputs.run(main)
