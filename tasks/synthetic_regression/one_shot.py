r"""One-shot averaging on NIID two-client linear regression (seed 002 §2.4).

  python -m tasks.synthetic_regression.one_shot --output_dir=/tmp/one_shot

Omega (Eq. 2.19) between the least-squares line of the pooled data and the
average of the two clients' lines, averaged over `--num_seeds` samples, on
four surfaces: Fig. 2.6 varies client 1's feature distribution (mu_1,
sigma_1) without (Eq. 2.20) and with (Eq. 2.21) concept drift; Fig. 2.7
varies its concept (alpha_1, beta_1) without (Eq. 2.22) and with (Eq. 2.23)
feature shift. The thesis does not give the grid ranges; the flags set
ours. Writes `one_shot.csv` (one row per grid point) and `one_shot.png`
(the four surfaces) and prints each surface's range of Omega.
"""

import os

from absl import app
from absl import flags
import numpy as np

from tasks.common import command
from tasks.common import reports
from tasks.synthetic_regression import data

flags.DEFINE_string('output_dir', None, 'Where one_shot.csv/.png go.')
flags.DEFINE_integer('num_points', data.NUM_POINTS, 'Points per client.',
                     lower_bound=2)
flags.DEFINE_integer('num_seeds', 5, 'Samples averaged per grid point.',
                     lower_bound=1)
flags.DEFINE_integer('grid_size', 21, 'Points per surface axis.',
                     lower_bound=2)
flags.DEFINE_list('mu_range', ['-10', '10'], 'mu_1 from, to (Fig. 2.6).')
flags.DEFINE_list('sigma_range', ['0.1', '10'],
                  'sigma_1 from, to (a standard deviation; Fig. 2.6).')
flags.DEFINE_list('alpha_range', ['-20', '20'], 'alpha_1 from, to (Fig. 2.7).')
flags.DEFINE_list('beta_range', ['-20', '20'], 'beta_1 from, to (Fig. 2.7).')
flags.DEFINE_bool('fitted', False,
                  'Average the clients\' least-squares fits instead of their '
                  'generative parameters (Eq. 2.14 takes those as known).')
FLAGS = flags.FLAGS

# (panel, parameter set, x field, y field, range flags)
PANELS = (
    ('fig_2_6a_no_concept_drift', 'eq_2_20', 'mu', 'sigma'),
    ('fig_2_6b_concept_drift', 'eq_2_21', 'mu', 'sigma'),
    ('fig_2_7a_no_feature_shift', 'eq_2_22', 'alpha', 'beta'),
    ('fig_2_7b_feature_shift', 'eq_2_23', 'alpha', 'beta'),
)


def parse_range(name: str, values, num: int, positive: bool = False):
  """`--{name}_range` as `num` points; a one-line UsageError if bad."""
  try:
    low, high = (float(v) for v in values)
  except ValueError as e:
    raise app.UsageError(
        f'--{name}_range must be two numbers "from,to", got '
        f'{",".join(values)}.') from e
  if not high > low or (positive and not low > 0):
    bound = ' > 0' if positive else ''
    raise app.UsageError(
        f'--{name}_range must have from < to{bound and ", from" + bound}, '
        f'got {low:g},{high:g}.')
  return np.linspace(low, high, num)


def surface(parameters, x_field, y_field, xs, ys, *, num_points, num_seeds,
            fitted):
  """Omega over the grid (rows: ys, columns: xs), mean over seeds."""
  omega = np.zeros((len(ys), len(xs)))
  for i, y in enumerate(ys):
    for j, x in enumerate(xs):
      clients = data.with_client_1(parameters, **{x_field: x, y_field: y})
      omega[i, j] = np.mean([
          data.one_shot_divergence(clients, num_points=num_points, seed=seed,
                                   fitted=fitted)
          for seed in range(num_seeds)])
  return omega


def run(output_dir, axes, *, num_points, num_seeds, fitted):
  """Computes the four surfaces; writes the CSV and the figure."""
  results, rows = {}, []
  for panel, parameter_set, x_field, y_field in PANELS:
    xs, ys = axes[x_field], axes[y_field]
    omega = surface(data.PARAMETER_SETS[parameter_set], x_field, y_field, xs,
                    ys, num_points=num_points, num_seeds=num_seeds,
                    fitted=fitted)
    results[panel] = (x_field, y_field, xs, ys, omega)
    for i, y in enumerate(ys):
      for j, x in enumerate(xs):
        rows.append(dict(panel=panel, parameter_set=parameter_set,
                         x_name=f'{x_field}_1', x=x, y_name=f'{y_field}_1',
                         y=y, omega=omega[i, j]))
  os.makedirs(output_dir, exist_ok=True)
  reports.write_csv(os.path.join(output_dir, 'one_shot.csv'), rows)
  plot(results, os.path.join(output_dir, 'one_shot.png'))
  return results


def plot(results, path):
  """One 3-D surface of Omega a panel, each with its own colour bar."""
  from matplotlib import ticker  # pylint: disable=g-import-not-at-top
  plt = reports.pyplot()
  fig = plt.figure(figsize=(12, 10.5))
  symbols = {'mu': r'$\mu_1$', 'sigma': r'$\sigma_1$',
             'alpha': r'$\alpha_1$', 'beta': r'$\beta_1$'}
  for index, (panel, (x_field, y_field, xs, ys, omega)) in enumerate(
      results.items()):
    ax = fig.add_subplot(2, 2, index + 1, projection='3d')
    grid_x, grid_y = np.meshgrid(xs, ys)
    surface = ax.plot_surface(grid_x, grid_y, omega, cmap='viridis',
                              linewidth=0)
    ax.set_xlabel(symbols.get(x_field, f'{x_field}_1'), labelpad=6)
    ax.set_ylabel(symbols.get(y_field, f'{y_field}_1'), labelpad=6)
    ax.set_zlabel(r'$\Omega$', labelpad=8)
    for axis in (ax.xaxis, ax.yaxis, ax.zaxis):  # Ticks that do not collide.
      axis.set_major_locator(ticker.MaxNLocator(5))
    ax.tick_params(labelsize=8)
    figure, _, what = panel.partition('_')[2].partition('_')[2].partition(
        '_')  # 'fig_2_6a_no_concept_drift' -> '6a', 'no_concept_drift'.
    ax.set_title(f'Fig. 2.{figure}: {what.replace("_", " ")}', fontsize=10)
    fig.colorbar(surface, ax=ax, shrink=0.55, pad=0.12,
                 label=r'$\Omega$ (mean over seeds)')
  fig.suptitle(r'One-shot averaging: divergence $\Omega$ (Eq. 2.19) of the '
               'averaged model from the pooled fit')
  fig.tight_layout()
  reports.save_figure(fig, path)


def main(argv):
  command.check_arguments(argv, FLAGS.output_dir)
  n = FLAGS.grid_size
  axes = {'mu': parse_range('mu', FLAGS.mu_range, n),
          'sigma': parse_range('sigma', FLAGS.sigma_range, n, positive=True),
          'alpha': parse_range('alpha', FLAGS.alpha_range, n),
          'beta': parse_range('beta', FLAGS.beta_range, n)}
  results = run(FLAGS.output_dir, axes, num_points=FLAGS.num_points,
                num_seeds=FLAGS.num_seeds, fitted=FLAGS.fitted)
  print(f'{"panel":<28}{"min Omega":>10}{"max Omega":>10}  argmin')
  for panel, (x_field, y_field, xs, ys, omega) in results.items():
    i, j = np.unravel_index(np.argmin(omega), omega.shape)
    print(f'{panel:<28}{omega.min():>10.4f}{omega.max():>10.4f}  '
          f'{x_field}_1={xs[j]:g}, {y_field}_1={ys[i]:g}')
  print(f'written: {FLAGS.output_dir}/one_shot.csv, one_shot.png')


if __name__ == '__main__':
  command.run(main)
