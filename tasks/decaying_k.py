r"""Decaying K (seeds 000 and 001): fixed K and gamma, decaying gamma, and
every decaying-K schedule, on any benchmark task.

  python -m tasks.decaying_k --output_dir=/tmp/digits_decaying_k
  python -m tasks.decaying_k --task=femnist --data_dir=$HOME/.tff \
      --rounds=4000 --clients_per_round=20 --num_local_steps=10 \
      --client_learning_rate=0.3 --output_dir=/tmp/femnist_decaying_k

Each setting is a FedAvg run through `tff_mixed.driver` (its own
sub-directory, so an interrupted comparison resumes). Prints a table (final
and best evaluation metric, total client SGD steps and their ratio to fixed
K: seed 000's Table 1 and seed 001's Table 4; the last K, simulated
wall-clock from seed 001's runtime model), writes it to `table.csv` and
writes `accuracy.png`: the metric against the round and against simulated
time. The metric is the task's accuracy (top-5 recall for
`stackoverflow_tags`).
"""

import dataclasses
import os
from typing import Optional

from absl import app
from absl import flags

from tasks import benchmark
from tasks import outputs
from tasks import registry
from tff_mixed import driver
from tff_mixed import schedules
from tff_mixed.metrics import runtime

flags.DEFINE_string('output_dir', None, 'Where the runs and the plot go.')
flags.DEFINE_integer('rounds', 100, 'Rounds per setting.', lower_bound=1)
flags.DEFINE_integer('clients_per_round', 10, 'Cohort size.', lower_bound=1)
flags.DEFINE_integer('num_local_steps', 20, 'K_0.', lower_bound=1)
flags.DEFINE_float('client_learning_rate', 0.1, 'gamma_0.', lower_bound=0.0)
flags.DEFINE_integer('eval_every', 5, 'Evaluate every this many rounds.',
                     lower_bound=1)
flags.DEFINE_integer('seed', 0, 'Seed.')
flags.DEFINE_float('minibatch_seconds', 0.017,
                   'Simulated client minibatch time (seed 001 runtime model).',
                   lower_bound=0.0)
flags.DEFINE_multi_string(
    'only', [], 'Run only these settings (names as printed; repeat the flag). '
    'The first, fixed K and gamma, always runs: the table is relative to it.')
benchmark.define_comparison_flags()
FLAGS = flags.FLAGS
# Fast mode (tff_mixed.templates.client_groups): two groups, one per core.
CLIENT_GROUPS = 2


@dataclasses.dataclass(frozen=True)
class Setting:
  name: str
  num_local_steps: schedules.ScheduleOrValue
  client_learning_rate: Optional[schedules.Schedule] = None


def settings(k0: int, gamma: float, rounds: int) -> list[Setting]:
  """Fixed, decaying gamma, and the five decaying-K schedules.

  Decay rates are set from the horizon so that each schedule ends near one
  step (exponential, inverse-time) or decays as the papers suggest
  (power 1/4, loss ratio ^ 1/2, halving on a 10-round plateau).
  """
  d = (1.0 / k0)**(1.0 / max(rounds - 1, 1))  # K_0 d^(T-1) = 1.
  b = max(rounds / (k0 - 1), 1.0) if k0 > 1 else 1.0  # K_0 b / (b + T) ~ 1.
  return [
      Setting('fixed K, gamma', k0),
      Setting('decaying gamma', k0, schedules.exponential_decay(gamma, d)),
      Setting('K exponential', schedules.exponential_decay(k0, d)),
      Setting('K inverse-time', schedules.inverse_time_decay(k0 * b, b)),
      Setting('K-rounds (power 1/4)', schedules.power_decay(k0, 0.25)),
      Setting('K-error (loss ratio)', schedules.loss_ratio(k0, 0.5, window=10)),
      Setting('K-step (plateau)', schedules.on_plateau(k0, 0.5, patience=10,
                                                       window=5)),
  ]


def run_setting(task, setting, output_dir, *, rounds, clients_per_round,
                gamma, seed, eval_every, runtime_model, data_config,
                base=registry.ExperimentConfig()):
  """One setting's run; `base` gives the server side (FedAvg at server lr
  1 by default; a preset's: FedSGD with a decaying server lr, or FedAdam)."""
  process = registry.build_process(dataclasses.replace(
      base, num_local_steps=setting.num_local_steps,
      client=dataclasses.replace(base.client, learning_rate=gamma),
      client_learning_rate=setting.client_learning_rate,
      client_groups=CLIENT_GROUPS), task.model_fn)
  return driver.run_experiment(
      task, process, rounds=rounds, clients_per_round=clients_per_round,
      output_dir=output_dir, seed=seed, eval_every=eval_every,
      checkpoint_every=eval_every, progress=False,
      config={'setting': setting.name, 'k': repr(setting.num_local_steps),
              'lr': repr(setting.client_learning_rate), 'gamma': gamma,
              **data_config},
      runtime_model=runtime_model, client_groups=CLIENT_GROUPS)


def summarise(results: dict, metric: str = 'accuracy') -> list[dict]:
  key = f'eval/{metric}'
  rows = []
  base = None
  for name, result in results.items():
    history = result.history
    evals = [r[key] for r in history if key in r]
    steps = history[-1]['sgd_steps_cumulative']
    base = steps if base is None else base
    rows.append(dict(
        setting=name, final=evals[-1], best=max(evals),
        sgd_steps=int(steps), steps_vs_fixed=steps / base,
        final_k=int(history[-1]['client_work/num_local_steps']),
        simulated_minutes=history[-1]['simulated_seconds_cumulative'] / 60))
  return rows


def print_table(rows, metric: str = 'accuracy') -> None:
  short = metric[:9]
  print(f'{"setting":<22}{"final " + short:>16}{"best " + short:>15}'
        f'{"SGD steps":>10}{"vs fixed":>9}{"last K":>7}{"sim. minutes":>13}')
  for r in rows:
    print(f'{r["setting"]:<22}{r["final"]:>16.4f}'
          f'{r["best"]:>15.4f}{r["sgd_steps"]:>10d}'
          f'{r["steps_vs_fixed"]:>9.3f}{r["final_k"]:>7d}'
          f'{r["simulated_minutes"]:>13.3f}')


def plot(results: dict, path: str, metric: str = 'accuracy') -> None:
  key = f'eval/{metric}'
  plt = outputs.pyplot()
  fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
  for name, result in results.items():
    rows = [r for r in result.history if key in r]
    acc = [r[key] for r in rows]
    style = dict(label=name, lw=1.2, marker='o', ms=2.5)  # One eval shows.
    axes[0].plot([r['round'] for r in rows], acc, **style)
    axes[1].plot([r['simulated_seconds_cumulative'] / 60 for r in rows], acc,
                 **style)
  axes[0].set_xlabel('round')
  axes[1].set_xlabel('simulated wall-clock (minutes, seed 001 runtime model)')
  axes[0].set_ylabel(f'evaluation {metric}')
  for ax in axes:
    ax.grid(alpha=0.3)
  axes[1].legend(fontsize=8)
  fig.tight_layout()
  outputs.save_figure(fig, path)


def main(argv):
  outputs.check_arguments(argv, FLAGS.output_dir)
  known = [s.name for s in settings(2, 0.1, 2)]
  unknown = [n for n in FLAGS.only if n not in known]
  if unknown:
    raise app.UsageError(f'--only: unknown setting {", ".join(unknown)}; '
                         f'choose from {", ".join(known)}.')
  outputs.start_tff()
  chosen = benchmark.comparison_task(FLAGS.seed)
  task = chosen.task
  base = benchmark.preset_config(chosen.preset)
  if base.algorithm not in ('fedavg', 'fedadam'):
    raise app.UsageError(
        f'--preset={FLAGS.preset} trains {base.algorithm}; this comparison '
        'is of FedSGD/FedAdam schedules (tasks.adaptive_fl compares seed '
        "003's algorithms).")
  runtime_model = runtime.RuntimeModel(
      minibatch_seconds=FLAGS.minibatch_seconds)
  results = {}
  for i, setting in enumerate(settings(
      FLAGS.num_local_steps, FLAGS.client_learning_rate, FLAGS.rounds)):
    if i and FLAGS.only and setting.name not in FLAGS.only:
      continue
    results[setting.name] = run_setting(
        task, setting, os.path.join(FLAGS.output_dir, f'setting_{i}'),
        rounds=FLAGS.rounds, clients_per_round=FLAGS.clients_per_round,
        gamma=FLAGS.client_learning_rate, seed=FLAGS.seed,
        eval_every=FLAGS.eval_every, runtime_model=runtime_model,
        data_config=chosen.config, base=base)
    print(f'{setting.name}: done in {results[setting.name].wall_time_seconds:.0f}s',
          flush=True)
  rows = summarise(results, chosen.metric)
  print_table(rows, chosen.metric)
  outputs.write_csv(os.path.join(FLAGS.output_dir, 'table.csv'), rows)
  path = os.path.join(FLAGS.output_dir, 'accuracy.png')
  plot(results, path, chosen.metric)
  print(f'plot: {path}')


if __name__ == '__main__':
  outputs.run(main)
