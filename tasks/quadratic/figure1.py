r"""Seed 000 Fig. 1: FedSGD on the §3 quadratic with constant K, decaying gamma
and decaying K.

  python -m tasks.quadratic.figure1 --output_dir=/tmp/figure1

Runs, for each seed, FedSGD (server SGD at --server_learning_rate, 10 clients
a round drawn from p(z), batch 1, x_0 = 0.4, gamma = 0.1) with
  (a) constant K in {1, 3, 10} and decaying gamma (K = 10, d_gamma = 0.995),
  (b) decaying K = ceil(10 d_K^t) for d_K in {0.99, 0.995, 0.9995},
averages x_t over seeds, plots x_t against the round with the x* line
(`figure1.png`), and prints (and writes `figure1.csv`) the final |x - x*|,
the first round from which |x - x*| stays within --tolerance, and the total
SGD steps relative to constant K = 10.

Two backends run the same algorithm. `tff` runs `tff_mixed.algorithms.
build_fed_avg` with the schedules in the TFF runtime (about 0.2 s a round
for 10 clients on a 2-core machine: hours for 3000 rounds x 7 settings x 5
seeds).
`closed_form` (default) uses that K SGD steps on f(x; z) = z x^2 / 2 - x move
x to 1/z + (1 - gamma z)^K (x - 1/z), with K_t and gamma_t from the same
`tff_mixed.schedules` objects; tests/test_figure1.py checks that both
backends give the same x_t.
"""

import dataclasses
import functools
import os
import sys
from collections.abc import Sequence
from typing import Optional

from absl import app
from absl import flags
import numpy as np

from tasks.common import command
from tasks.common import reports
from tasks.quadratic import task as quadratic_task
from tff_mixed import schedules

flags.DEFINE_string('output_dir', None, 'Where figure1.png/.csv go.')
flags.DEFINE_integer('rounds', 3000, 'Rounds per run.', lower_bound=1)
flags.DEFINE_integer('num_seeds', 5, 'Runs averaged per setting (seed 000 '
                     '§3 averages 10).',
                     lower_bound=1)
flags.DEFINE_integer('clients_per_round', 10, 'Clients sampled per round (M in seed 000 §3).', lower_bound=1)
flags.DEFINE_float('client_learning_rate', 0.1, 'gamma (gamma_0).',
                   lower_bound=0.0)
flags.DEFINE_multi_float('server_learning_rate', [0.001, 0.01],
                         'eta; repeat the flag to compare several (the '
                         'paper used 0.001).')
flags.DEFINE_float('tolerance', 0.005, '|x - x*| counted as converged.',
                   lower_bound=0.0)
flags.DEFINE_enum('backend', 'closed_form', ('closed_form', 'tff'),
                  'closed_form: NumPy; tff: the TFF process (slow).')
command.define_other_names()
FLAGS = flags.FLAGS


@dataclasses.dataclass(frozen=True)
class Setting:
  name: str
  panel: str
  num_local_steps: schedules.Schedule
  learning_rate: schedules.Schedule


def settings(gamma: float) -> list[Setting]:
  """The seven curves of seed 000 Fig. 1."""
  const = schedules.constant
  out = [Setting(f'K={k}', 'a', const(k), const(gamma)) for k in (1, 3, 10)]
  out.append(Setting('K=10, d_gamma=0.995', 'a', const(10),
                     schedules.exponential_decay(gamma, 0.995)))
  for d in (0.99, 0.995, 0.9995):
    out.append(Setting(f'K_0=10, d_K={d}', 'b',
                       schedules.exponential_decay(10, d), const(gamma)))
  return out


def cohorts(seed: int, rounds: int, clients_per_round: int) -> np.ndarray:
  """z of every round's cohort, as `tff_mixed.driver` samples them."""
  return np.stack([
      quadratic_task.sample_z(np.random.default_rng([seed, r]),
                              clients_per_round)
      for r in range(1, rounds + 1)])


@functools.lru_cache(maxsize=None)
def step_counts(setting: Setting, rounds: int) -> np.ndarray:
  """K_1..K_T of the setting."""
  values = setting.num_local_steps.values(rounds)
  return np.array([int(schedules.num_steps(v)) for v in values])


@functools.lru_cache(maxsize=None)
def learning_rates(setting: Setting, rounds: int) -> np.ndarray:
  """gamma_1..gamma_T of the setting."""
  return setting.learning_rate.values(rounds)


def run_closed_form(setting: Setting, z: np.ndarray, server_lr: float,
                    initial_x: float = quadratic_task.INITIAL_X) -> np.ndarray:
  """x_1..x_T of FedSGD; z is (rounds, clients)."""
  ks = step_counts(setting, len(z))
  gammas = learning_rates(setting, len(z))
  x, xs = initial_x, []
  for k, gamma, cohort in zip(ks, gammas, z):
    local = 1.0 / cohort + (1.0 - gamma * cohort)**k * (x - 1.0 / cohort)
    x = x - server_lr * np.mean(x - local)
    xs.append(x)
  return np.array(xs)


@functools.lru_cache(maxsize=None)
def _tff_process(setting: Setting, server_lr: float, initial_x: float):
  """FedSGD for a setting, built once and reused for every seed."""
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  from tasks.common import registry  # pylint: disable=g-import-not-at-top
  return registry.build_process(registry.AlgorithmConfig(
      algorithm='fedavg', num_local_steps=setting.num_local_steps,
      client=registry.OptimizerSpec(
          learning_rate=setting.learning_rate.initial_value),
      server=registry.OptimizerSpec(learning_rate=server_lr),
      client_learning_rate=setting.learning_rate,
      client_weighting=tff.learning.ClientWeighting.UNIFORM),
      lambda: quadratic_task.QuadraticModel(initial_x))


def run_tff(setting: Setting, z: np.ndarray, server_lr: float,
            initial_x: float = quadratic_task.INITIAL_X) -> np.ndarray:
  """The same run through `build_fed_avg` in the TFF runtime."""
  from tff_mixed import driver  # pylint: disable=g-import-not-at-top
  process = _tff_process(setting, server_lr, initial_x)
  xs = []
  driver.run_rounds(
      process, process.initialize(),
      # The closed form's cohorts, so both backends see the same clients.
      lambda r: [quadratic_task.client_dataset(quadratic_task.client_id(c))
                 for c in z[r - 1]],
      range(1, len(z) + 1),
      lambda r, output, seconds: xs.append(
          float(process.get_model_weights(output.state).trainable[0])))
  return np.array(xs)


def first_converged_round(distance: np.ndarray, tolerance: float) -> Optional[int]:
  """The first round (1-based) from which distance stays <= tolerance."""
  outside = np.nonzero(distance > tolerance)[0]
  if len(outside) == 0:
    return 1
  if outside[-1] == len(distance) - 1:
    return None
  return int(outside[-1]) + 2


def run(output_dir: str, *, rounds: int, num_seeds: int,
        clients_per_round: int, gamma: float, server_lrs: Sequence[float],
        tolerance: float, backend: str = 'closed_form') -> list[dict]:
  """Runs every setting for every server lr; writes the plot and table."""
  runner = run_closed_form if backend == 'closed_form' else run_tff
  x_star = quadratic_task.true_minimiser()
  zs = [cohorts(seed, rounds, clients_per_round) for seed in range(num_seeds)]
  curves, rows = {}, []
  base_steps = None
  for server_lr in server_lrs:
    for setting in settings(gamma):
      mean_x = np.mean([runner(setting, z, server_lr) for z in zs], axis=0)
      curves[(server_lr, setting.name)] = (setting.panel, mean_x)
      steps = int(step_counts(setting, rounds).sum()) * clients_per_round
      if setting.name == 'K=10':
        base_steps = steps
      converged = first_converged_round(np.abs(mean_x - x_star), tolerance)
      rows.append(dict(
          server_lr=server_lr, setting=setting.name,
          final_x=float(mean_x[-1]),
          final_distance=float(abs(mean_x[-1] - x_star)),
          converged_round=converged, sgd_steps=steps))
  for row in rows:
    row['steps_vs_constant_k10'] = row['sgd_steps'] / base_steps
  os.makedirs(output_dir, exist_ok=True)
  reports.write_csv(os.path.join(output_dir, 'figure1.csv'), rows)
  _plot(os.path.join(output_dir, 'figure1.png'), curves, x_star)
  return rows


def _plot(path, curves, x_star):
  plt = reports.pyplot()
  server_lrs = sorted({lr for lr, _ in curves})
  fig, axes = plt.subplots(len(server_lrs), 2, squeeze=False,
                           figsize=(11, 3.6 * len(server_lrs)), sharey=True)
  for row, server_lr in enumerate(server_lrs):
    for (lr, name), (panel, xs) in curves.items():
      if lr != server_lr:
        continue
      ax = axes[row][0 if panel == 'a' else 1]
      ax.plot(np.arange(1, len(xs) + 1), xs, label=name, lw=1.2)
    for col, title in enumerate((r'(a) constant $K$ / decaying $\gamma$',
                                 r'(b) decaying $K$, constant $\gamma$')):
      ax = axes[row][col]
      ax.axhline(x_star, color='k', ls='--', lw=0.8, label=r'$x^*$')
      ax.set_title(f'{title}, server lr {server_lr:g}', fontsize=9)
      reports.round_axis(ax)
      ax.legend(fontsize=7)
    axes[row][0].set_ylabel(r'$x_t$ (mean over seeds)')
  fig.suptitle('Seed 000 Fig. 1: FedAvg on the quadratic, constant vs '
               r'decaying $\gamma$ and $K$', fontsize=11)
  fig.tight_layout()
  reports.save_figure(fig, path)


def print_table(rows, tolerance) -> None:
  print(f'x* = {quadratic_task.true_minimiser():.5f}; converged: '
        f'|x - x*| <= {tolerance} from that round on')
  print(f'{"server lr":>9}  {"setting":<22} {"final x":>8} {"|x-x*|":>8} '
        f'{"converged":>9} {"SGD steps":>9} {"vs K=10":>7}')
  for r in rows:
    conv = '-' if r['converged_round'] is None else str(r['converged_round'])
    print(f'{r["server_lr"]:>9g}  {r["setting"]:<22} {r["final_x"]:8.5f} '
          f'{r["final_distance"]:8.5f} {conv:>9} {r["sgd_steps"]:9d} '
          f'{r["steps_vs_constant_k10"]:7.3f}')


def main(argv):
  command.check_arguments(argv, FLAGS.output_dir)
  bad = [lr for lr in FLAGS.server_learning_rate if not lr > 0]
  if bad:
    raise app.UsageError(f'--server_learning_rate must be > 0, got {bad[0]}.')
  rows = run(FLAGS.output_dir, rounds=FLAGS.rounds, num_seeds=FLAGS.num_seeds,
             clients_per_round=FLAGS.clients_per_round,
             gamma=FLAGS.client_learning_rate,
             server_lrs=FLAGS.server_learning_rate,
             tolerance=FLAGS.tolerance, backend=FLAGS.backend)
  print_table(rows, FLAGS.tolerance)
  sys.stdout.flush()


if __name__ == '__main__':
  command.run(main)
