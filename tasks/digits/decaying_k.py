r"""Decaying K on the digits task (seeds 000 and 001): fixed K and gamma,
decaying gamma, and every decaying-K schedule.

  python -m tasks.digits.decaying_k --output_dir=/tmp/digits_decaying_k

Each setting is a FedAvg run through `tff_mixed.driver` (its own
sub-directory, so an interrupted comparison resumes). Prints a table (final
and best evaluation accuracy, total client SGD steps relative to fixed K,
simulated wall-clock from seed 001's runtime model) and writes
`accuracy.png`: accuracy against the round and against simulated time.
"""

import dataclasses
import os
from typing import Optional

from absl import flags

from tasks import outputs
from tasks import registry
from tasks.digits import task as digits_task
from tff_mixed import driver
from tff_mixed import schedules
from tff_mixed.metrics import runtime

flags.DEFINE_string('output_dir', None, 'Where the runs and the plot go.')
flags.DEFINE_integer('rounds', 100, 'Rounds per setting.', lower_bound=1)
flags.DEFINE_integer('clients_per_round', 10, 'Cohort size.', lower_bound=1)
flags.DEFINE_integer('num_clients', 100, 'Training clients.', lower_bound=1)
flags.DEFINE_float('dirichlet_alpha', 0.3, 'Label skew of the split.',
                   lower_bound=0.0)
flags.DEFINE_integer('num_local_steps', 20, 'K_0.', lower_bound=1)
flags.DEFINE_float('client_learning_rate', 0.1, 'gamma_0.', lower_bound=0.0)
flags.DEFINE_integer('eval_every', 5, 'Evaluate every this many rounds.',
                     lower_bound=1)
flags.DEFINE_integer('seed', 0, 'Seed.')
flags.DEFINE_float('minibatch_seconds', 0.017,
                   'Simulated client minibatch time (seed 001 runtime model).',
                   lower_bound=0.0)
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
                gamma, seed, eval_every, runtime_model, data_config):
  process = registry.build_process(registry.ExperimentConfig(
      algorithm='fedavg', num_local_steps=setting.num_local_steps,
      client=registry.OptimizerSpec(learning_rate=gamma),
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


def summarise(results: dict) -> list[dict]:
  rows = []
  base = None
  for name, result in results.items():
    history = result.history
    evals = [r['eval/accuracy'] for r in history if 'eval/accuracy' in r]
    steps = history[-1]['sgd_steps_cumulative']
    base = steps if base is None else base
    rows.append(dict(
        setting=name, final_accuracy=evals[-1], best_accuracy=max(evals),
        sgd_steps=int(steps), steps_vs_fixed=steps / base,
        final_k=int(history[-1]['client_work/num_local_steps']),
        simulated_minutes=history[-1]['simulated_seconds_cumulative'] / 60))
  return rows


def print_table(rows) -> None:
  print(f'{"setting":<22}{"final acc":>10}{"best acc":>9}{"SGD steps":>10}'
        f'{"vs fixed":>9}{"last K":>7}{"sim. minutes":>13}')
  for r in rows:
    print(f'{r["setting"]:<22}{r["final_accuracy"]:>10.4f}'
          f'{r["best_accuracy"]:>9.4f}{r["sgd_steps"]:>10d}'
          f'{r["steps_vs_fixed"]:>9.3f}{r["final_k"]:>7d}'
          f'{r["simulated_minutes"]:>13.3f}')


def plot(results: dict, path: str) -> None:
  plt = outputs.pyplot()
  fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
  for name, result in results.items():
    rows = [r for r in result.history if 'eval/accuracy' in r]
    acc = [r['eval/accuracy'] for r in rows]
    axes[0].plot([r['round'] for r in rows], acc, label=name, lw=1.2)
    axes[1].plot([r['simulated_seconds_cumulative'] / 60 for r in rows], acc,
                 label=name, lw=1.2)
  axes[0].set_xlabel('round')
  axes[1].set_xlabel('simulated wall-clock (minutes, seed 001 runtime model)')
  axes[0].set_ylabel('evaluation accuracy')
  for ax in axes:
    ax.grid(alpha=0.3)
  axes[1].legend(fontsize=8)
  fig.tight_layout()
  outputs.save_figure(fig, path)


def main(argv):
  outputs.check_arguments(argv, FLAGS.output_dir)
  outputs.start_tff()
  task = digits_task.create_digits_task(
      num_clients=FLAGS.num_clients, dirichlet_alpha=FLAGS.dirichlet_alpha,
      seed=FLAGS.seed)
  runtime_model = runtime.RuntimeModel(
      minibatch_seconds=FLAGS.minibatch_seconds)
  results = {}
  for i, setting in enumerate(settings(
      FLAGS.num_local_steps, FLAGS.client_learning_rate, FLAGS.rounds)):
    results[setting.name] = run_setting(
        task, setting, os.path.join(FLAGS.output_dir, f'setting_{i}'),
        rounds=FLAGS.rounds, clients_per_round=FLAGS.clients_per_round,
        gamma=FLAGS.client_learning_rate, seed=FLAGS.seed,
        eval_every=FLAGS.eval_every, runtime_model=runtime_model,
        data_config={'num_clients': FLAGS.num_clients,
                     'dirichlet_alpha': FLAGS.dirichlet_alpha})
    print(f'{setting.name}: done in {results[setting.name].wall_time_seconds:.0f}s',
          flush=True)
  print_table(summarise(results))
  path = os.path.join(FLAGS.output_dir, 'accuracy.png')
  plot(results, path)
  print(f'plot: {path}')


if __name__ == '__main__':
  outputs.run(main)
