r"""Decaying K (seeds 000 and 001): fixed K and gamma, decaying gamma, and
every decaying-K schedule, on any benchmark task.

  python -m tasks.decaying_k --output_dir=/tmp/digits_decaying_k
  python -m tasks.decaying_k --task=femnist --data_dir=$HOME/.tff \
      --rounds=4000 --clients_per_round=20 --num_local_steps=10 \
      --client_learning_rate=0.3 --output_dir=/tmp/femnist_decaying_k

Each setting is a FedAvg run through `tff_mixed.driver` in its own
sub-directory, named after the setting (`run_dir_name`: `fixed_k_gamma`,
`k_exponential`, ...), so an interrupted comparison resumes; a run left in
an older version's `setting_<i>` is moved there and resumed. Prints a table
(final and best evaluation metric, total client SGD steps and their ratio
to fixed K: seed 000's Table 1 and seed 001's Table 4; the last K, simulated
wall-clock from seed 001's runtime model), writes it to `table.csv` and
writes `accuracy.png`: the metric against the round and against simulated
time (curves that coincide, such as schedules that never left K_0, are
drawn nested and marked in the legend). The metric is the task's accuracy
(top-5 recall for `stackoverflow_tags`).
"""

import dataclasses
import json
import os
import re
from typing import Optional

from absl import app
from absl import flags
import numpy as np

from tasks.common import benchmark
from tasks.common import outputs
from tasks.common import registry
from tasks.common import run as run_lib
from tff_mixed import keys
from tff_mixed import schedules
from tff_mixed.metrics import runtime

flags.DEFINE_string('output_dir', None, 'Where the runs and the plot go.')
flags.DEFINE_integer('rounds', 100, 'Rounds per setting.', lower_bound=1)
flags.DEFINE_integer('clients_per_round', 10, 'Clients sampled per round (S).', lower_bound=1)
flags.DEFINE_integer('num_local_steps', 20, 'Initial SGD steps per client and round (K_0).', lower_bound=1)
flags.DEFINE_float('client_learning_rate', 0.1, 'Initial client learning rate (gamma_0).', lower_bound=0.0)
flags.DEFINE_integer('eval_every', 5, 'Evaluate every this many rounds.',
                     lower_bound=1)
flags.DEFINE_integer('seed', 0, 'Seeds initialisation, data split and client sampling.')
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
                base=registry.AlgorithmConfig()):
  """One setting's run; `base` gives the server side (FedAvg at server lr
  1 by default; a preset's: FedSGD with a decaying server lr, or FedAdam)."""
  algorithm = dataclasses.replace(
      base, num_local_steps=setting.num_local_steps,
      client=dataclasses.replace(base.client, learning_rate=gamma),
      client_learning_rate=setting.client_learning_rate)
  if isinstance(algorithm, registry.ExperimentConfig):
    algorithm = algorithm.algorithm_config
  return run_lib.run(
      task, algorithm, registry.RunConfig(
          seed=seed, rounds=rounds, clients_per_round=clients_per_round,
          output_dir=output_dir, eval_every=eval_every,
          checkpoint_every=eval_every, progress=False,
          runtime_model=runtime_model, client_groups=CLIENT_GROUPS),
      record={'setting': setting.name, 'k': repr(setting.num_local_steps),
              'lr': repr(setting.client_learning_rate), 'gamma': gamma,
              **data_config})


def run_dir_name(name: str) -> str:
  """A setting's sub-directory: its name in lower case, every run of other
  characters one '_' ('K-rounds (power 1/4)' -> 'k_rounds_power_1_4')."""
  return re.sub(r'[^a-z0-9]+', '_', name.lower()).strip('_')


def setting_dir(output_dir: str, index: int, name: str) -> str:
  """`output_dir`'s sub-directory for the `index`-th setting, `name`.

  Before runs were named after their setting they were `setting_<index>`;
  such a run of this setting (its config.json says so) is renamed to
  `run_dir_name(name)`, so that the comparison resumes it.
  """
  path = os.path.join(output_dir, run_dir_name(name))
  legacy = os.path.join(output_dir, f'setting_{index}')
  if not os.path.exists(path) and os.path.isdir(legacy):
    try:
      with open(os.path.join(legacy, 'config.json')) as f:
        owner = json.load(f).get('setting')
    except (OSError, ValueError):
      owner = None
    if owner == name:
      os.rename(legacy, path)
      print(f'{name}: moved {legacy} to {path}', flush=True)
  return path


def summarise(results: dict, metric: str = 'accuracy') -> list[dict]:
  key = keys.eval_column(metric)
  rows = []
  base = None
  for name, result in results.items():
    history = result.history
    evals = [r[key] for r in history if key in r]
    steps = history[-1][keys.SGD_STEPS_CUMULATIVE]
    base = steps if base is None else base
    rows.append(dict(
        setting=name, final=evals[-1], best=max(evals),
        sgd_steps=int(steps), steps_vs_fixed=steps / base,
        final_k=int(history[-1][keys.ROUND_NUM_LOCAL_STEPS]),
        simulated_minutes=history[-1][keys.SIMULATED_SECONDS_CUMULATIVE] / 60))
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


# `plot`'s colour and marker of each setting (by name, as `settings` gives
# them); any other name takes the next of matplotlib's colours.
STYLES = {
    'fixed K, gamma': ('black', 'o'),
    'decaying gamma': ('tab:gray', 's'),
    'K exponential': ('tab:blue', '^'),
    'K inverse-time': ('tab:orange', 'v'),
    'K-rounds (power 1/4)': ('tab:green', 'D'),
    'K-error (loss ratio)': ('tab:red', 'P'),
    'K-step (plateau)': ('tab:purple', 'X'),
}


def _same_curve(a, b) -> bool:
  """Whether two (rounds, minutes, values) curves coincide."""
  return all(len(x) == len(y) and np.allclose(x, y, rtol=0, atol=1e-9)
             for x, y in zip(a, b))


def plot(results: dict, path: str, metric: str = 'accuracy',
         title: Optional[str] = None) -> None:
  """Writes `path`: the metric against the round and against simulated time.

  Settings whose curves coincide (schedules that never left K_0 give fixed
  K's run) are drawn nested, the first widest, and their legend entries say
  which curve they repeat.

  Args:
    results: Setting name -> `driver.ExperimentResult`, fixed K first.
    path: The PNG to write.
    metric: The evaluation metric (`eval/<metric>` in the histories).
    title: The figure's title; None gives a generic one.
  """
  key = keys.eval_column(metric)
  plt = outputs.pyplot()
  fig, axes = plt.subplots(1, 2, figsize=(12, 5.2), sharey=True,
                           layout='constrained')
  curves = {}
  for name, result in results.items():
    rows = [r for r in result.history if key in r]
    curves[name] = ([r[keys.ROUND] for r in rows],
                    [r[keys.SIMULATED_SECONDS_CUMULATIVE] / 60 for r in rows],
                    [r[key] for r in rows])
  groups = {}  # First setting with the curve -> the settings that repeat it.
  for name, curve in curves.items():
    first = next(n for n in curves if _same_curve(curves[n], curve))
    groups.setdefault(first, []).append(name)
  order = list(curves)
  for first, names in groups.items():
    for depth, name in enumerate(names):
      rounds, minutes, values = curves[name]
      color, marker = STYLES.get(name, (f'C{order.index(name) % 10}', 'o'))
      wider = len(names) - 1 - depth  # The first of a group is the widest.
      label = name if not depth else f'{name} (same curve as {first})'
      style = dict(label=label, color=color, marker=marker,
                   lw=1.2 + 2.2 * wider, ms=3.5 + 3 * wider,
                   zorder=2 + depth)  # A single evaluation shows too.
      axes[0].plot(rounds, values, **style)
      axes[1].plot(minutes, values, **dict(style, label=None))
  outputs.round_axis(axes[0])
  axes[1].set_xlabel('simulated wall-clock (minutes, seed 001 runtime model)')
  axes[0].set_ylabel(f'evaluation {metric}')
  for ax in axes:
    ax.grid(alpha=0.3)
  fig.suptitle(title or rf'Evaluation {metric} of each $K$ / $\gamma$ schedule')
  fig.legend(loc='outside lower center', ncol=3, fontsize=8, frameon=False)
  outputs.save_figure(fig, path)


def main(argv):
  outputs.check_arguments(argv, FLAGS.output_dir)
  known = [s.name for s in settings(2, 0.1, 2)]
  unknown = [n for n in FLAGS.only if n not in known]
  if unknown:
    raise app.UsageError(f'--only: unknown setting {", ".join(unknown)}; '
                         f'choose from {", ".join(known)}.')
  outputs.start_tff()
  chosen = benchmark.comparison_task(FLAGS, FLAGS.seed)
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
        task, setting, setting_dir(FLAGS.output_dir, i, setting.name),
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
  plot(results, path, chosen.metric, title=(
      f'{"FedAdam" if base.algorithm == "fedadam" else "FedAvg"} on '
      f'{FLAGS.task}: $K$ and $\\gamma$ schedules '
      f'($K_0$ = {FLAGS.num_local_steps}, $\\gamma_0$ = '
      f'{FLAGS.client_learning_rate:g}, {FLAGS.clients_per_round} clients a '
      f'round, {FLAGS.rounds} rounds)'))
  print(f'plot: {path}')


if __name__ == '__main__':
  outputs.run(main)
