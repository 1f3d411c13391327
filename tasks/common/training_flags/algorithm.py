"""The algorithm's flags: `--algorithm`, seed 003's `--optimizer` group,
the client weighting, FedAdam's variant and mixed FL's weights."""

from absl import app
import tensorflow_federated as tff

from tasks.common import flag_table
from tasks.common import parts
from tasks.common import registry
from tff_mixed import algorithms
from tff_mixed import checks
from tff_mixed import optimizers
from tff_mixed import templates
from tff_mixed.templates import mixed_fl_step

WEIGHTINGS = {
    'examples': tff.learning.ClientWeighting.NUM_EXAMPLES,
    'uniform': tff.learning.ClientWeighting.UNIFORM,
    'dataset_size': templates.DATASET_SIZE,
}
# Seed 003's adaptive-FL algorithms, whose optimizer is --optimizer.
ADAPTIVE_ALGORITHMS = registry.ADAPTIVE
ALGORITHMS = registry.NAMES
_ADAPTIVE_FLAGS = ('optimizer', 'beta', 'beta_1', 'beta_2', 'epsilon')
# Flags only the mixed FL algorithms read.
MIXED_FL_FLAGS = ('federated_weight', 'central_weight', 'num_central_steps',
                  'gradient_dissimilarity', 'mixing_probe',
                  'mixing_probe_first_round')


def define_algorithm(define) -> None:
  """Defines `--algorithm` and seed 003's `--optimizer` group through
  `define` (`flag_table.Table.define`)."""
  define(flag_table.ENUM, 'algorithm', 'fedavg', ALGORITHMS,
         '; '.join(f'{name}: {entry.summary}'
                   for name, entry in registry.ALGORITHMS.items()) + '.')
  define(flag_table.ENUM, 'optimizer', 'sgdm', optimizers.NAMES,
         'Seed 003 algorithms: the adaptive optimizer (tff_mixed.optimizers;'
         ' m starts at 0, v at 1, no bias correction).')
  # Bounds [0, 1]; tff_mixed.optimizers refuses 1 where it divides by 1 - b.
  define(flag_table.FLOAT, 'beta', None,
         'Decay of --optimizer=sgdm (in [0, 1)) or rmsprop (in [0, 1]) '
         '(default 0.9).', lower_bound=0.0, upper_bound=1.0)
  define(flag_table.FLOAT, 'beta_1', None,
         'First-moment decay of --optimizer=adam, in [0, 1) (default 0.9).',
         lower_bound=0.0, upper_bound=1.0)
  define(flag_table.FLOAT, 'beta_2', None,
         'Second-moment decay of --optimizer=adam, in [0, 1] (default 0.99).',
         lower_bound=0.0, upper_bound=1.0)
  define(flag_table.FLOAT, 'epsilon', None,
         'Epsilon of --optimizer=rmsprop/adam (default 1e-3).',
         lower_bound=0.0)


def define_weighting_and_mixed_fl(define, *, federated_weight: float,
                                  central_weight: float) -> None:
  """The client weighting, FedAdam's variant and mixed FL's flags."""
  define(flag_table.ENUM, 'client_weighting', None, list(WEIGHTINGS),
         'p_i in the mean of client updates: examples (processed in the K '
         'steps), uniform, or dataset_size (|D_i|, seed 000 Alg. 1). '
         "Default: the algorithm's (examples; uniform for adaptive_fed_opt "
         'and fedadam --server_adam=seed000).')
  define(flag_table.ENUM, 'server_adam', 'tff', algorithms.ADAM_VARIANTS,
         "--algorithm=fedadam's Adam: tff (tff.learning's, eps outside the "
         'square root, beta_2 0.99, eps 1e-3) or seed000 (seed 000 App. B '
         'Alg. 3: eps inside, beta_2 0.999, eps 1e-8, uniform client mean).')
  define(flag_table.FLOAT, 'proximal_strength', None,
         '--algorithm=fedprox: mu, the weight of the proximal term '
         '(mu / 2) ||x - x_t||^2 each client adds to its loss (the FedProx '
         'paper tried 0.001, 0.01, 0.1 and 1).', lower_bound=0.0)
  define(flag_table.ENUM, 'aggregator', 'mean', parts.AGGREGATORS,
         'How the server combines the client updates: mean (the weighted '
         'mean), robust (TFF\'s robust_aggregator: adaptive clipping and '
         'zeroing), dp (DP-FedAvg, Gaussian noise z * C on updates clipped to '
         'C: --clip, --noise_multiplier; an epsilon estimate is printed) or '
         'compression (TFF\'s compression_aggregator). robust and '
         'compression act on each client\'s update: --client_groups=0.')
  define(flag_table.FLOAT, 'clip', None,
         '--aggregator=dp: C, the L2 norm every client update is clipped to.',
         lower_bound=0.0)
  define(flag_table.FLOAT, 'noise_multiplier', None,
         '--aggregator=dp: z; the noise added to the sum of the clipped '
         'updates has standard deviation z * C.', lower_bound=0.0)
  define(flag_table.FLOAT, 'dp_delta', None,
         '--aggregator=dp: the delta of the (epsilon, delta) guarantee '
         'metrics.csv reports each round (dp/epsilon); default 1 / the '
         'number of training clients.', lower_bound=0.0, upper_bound=1.0)
  define(flag_table.INTEGER, 'compression_threshold', None,
         '--aggregator=compression: quantise only the update tensors of more '
         'elements than this (default TFF\'s 20,000; the digits MLP\'s '
         'largest has 2,048).', lower_bound=0)
  define(flag_table.INTEGER, 'compression_bits', None,
         '--aggregator=compression: bits of each quantised value (default '
         '8).', lower_bound=1, upper_bound=16)
  define(flag_table.FLOAT, 'federated_weight', federated_weight,
         'Mixed FL: w_f, the weight of the federated loss.', lower_bound=0.0)
  define(flag_table.FLOAT, 'central_weight', central_weight,
         'Mixed FL: w_c, the weight of the central loss.', lower_bound=0.0)
  define(flag_table.INTEGER, 'num_central_steps', None,
         'Mixed FL: J, central steps per round (default K).', lower_bound=1)
  define(flag_table.BOOL, 'gradient_dissimilarity', False,
         'Mixed FL: log seed 004 Eq. 7 G~^2 and B~^2 each round (one more '
         'model-sized upload per client).')
  define(flag_table.INTEGER, 'mixing_probe', 0,
         'Mixed FL: instead of training, run seed 004 App. C.1\'s probe: '
         'this many simulations (seeds --seed, --seed+1, ...) of --rounds '
         'rounds at K = J = 1 measuring G~^2 and B~^2, then print the max '
         'over rounds >= --mixing_probe_first_round and the advised mixing '
         '(paper: 5 simulations, 100 rounds).', lower_bound=0)
  define(flag_table.INTEGER, 'mixing_probe_first_round', 10,
         'First round (1-based) whose G~^2 / B~^2 the probe counts.',
         lower_bound=1)


def check_unused_mixed_fl_flags(fv, also_read) -> None:
  """Mixed FL's flags given to another algorithm are a usage error."""
  if registry.ALGORITHMS[fv.algorithm].needs_central_data:
    return
  given = [f'--{n}' for n in MIXED_FL_FLAGS
           if fv[n].present and n not in also_read]
  if given:
    raise app.UsageError(
        f'{given[0]} is for the mixed FL algorithms, not --algorithm='
        f'{fv.algorithm}.')


def check_proximal_strength(fv) -> None:
  """--proximal_strength with --algorithm=fedprox, and only with it."""
  if fv.algorithm == 'fedprox' and fv.proximal_strength is None:
    raise app.UsageError('--algorithm=fedprox needs --proximal_strength (mu, '
                         'e.g. 0.01).')
  if fv.algorithm != 'fedprox' and fv['proximal_strength'].present:
    raise app.UsageError(f'--proximal_strength is for --algorithm=fedprox, '
                         f'not --algorithm={fv.algorithm}.')


def check_aggregator(fv) -> None:
  """--aggregator with what it needs, and only where it runs."""
  given = [f'--{n}' for n in ('clip', 'noise_multiplier', 'dp_delta')
           if fv[n].present]
  compression = [f'--{n}' for n in ('compression_threshold',
                                     'compression_bits') if fv[n].present]
  if compression and fv.aggregator != 'compression':
    raise app.UsageError(f'{", ".join(compression)} only apply to '
                         '--aggregator=compression.')
  if fv.aggregator != 'dp':
    if given:
      raise app.UsageError(f'{", ".join(given)} only apply to '
                           '--aggregator=dp.')
  else:
    missing = [f'--{n}' for n in ('clip', 'noise_multiplier')
               if fv[n].value is None]
    if missing:
      raise app.UsageError(f'--aggregator=dp needs {" and ".join(missing)}.')
    if not fv.clip > 0:
      raise app.UsageError('--clip must be > 0 with --aggregator=dp.')
    if fv.dp_delta is not None and not 0 < fv.dp_delta < 1:
      raise app.UsageError(f'--dp_delta={fv.dp_delta:g}: delta must be in '
                           '(0, 1).')
    if fv.client_weighting not in (None, 'uniform'):
      raise app.UsageError(
          f'--client_weighting={fv.client_weighting} cannot be used with '
          '--aggregator=dp, whose mean is unweighted (clipped updates summed, '
          'noised and divided by --clients_per_round).')
    if fv.algorithm in ('mimelite', 'mfl'):
      raise app.UsageError(
          f'--aggregator=dp cannot make --algorithm={fv.algorithm} private: '
          'its clients upload more than the clipped update.')
  if (fv.aggregator != 'mean'
      and fv.algorithm == mixed_fl_step.TWO_WAY_GRADIENT_TRANSFER):
    raise app.UsageError(
        f'--aggregator={fv.aggregator} cannot be used with --algorithm='
        f'{fv.algorithm}: its inferred federated gradient sums the raw client '
        'updates outside the aggregator.')
  if fv.aggregator in parts.PER_CLIENT_AGGREGATORS and fv.client_groups:
    raise app.UsageError(
        f'--aggregator={fv.aggregator} acts on each client\'s update: give '
        f'--client_groups=0 (one TFF client per client; fast mode sends each '
        'group\'s mean).')


def check_two_way_client(fv, client: registry.OptimizerSpec) -> None:
  """2-way GT's inferred federated gradient needs plain SGD on the clients
  (the library's rule, `check_two_way_client_optimizer`, named by flag
  before anything is built)."""
  if fv.algorithm != mixed_fl_step.TWO_WAY_GRADIENT_TRANSFER:
    return
  try:
    mixed_fl_step.check_two_way_client_optimizer(client.build())
  except ValueError as e:
    given = client.name
    if client.name == 'sgdm':
      given += f' with --client_momentum={client.momentum}'
    raise app.UsageError(
        f'--client_optimizer must be sgd with --algorithm={fv.algorithm}, got '
        f'{given}: {mixed_fl_step.TWO_WAY_NEEDS_SGD}.') from e


def adaptive_optimizer(fv) -> optimizers.AdaptiveOptimizer:
  """`--optimizer` with the decay flags given; one-line errors name flags."""
  name = fv.optimizer
  accepted = optimizers.hparam_names(name)
  foreign = [f'--{n}' for n in _ADAPTIVE_FLAGS[1:]
             if fv[n].present and n not in accepted]
  if foreign:
    raise app.UsageError(
        f'--optimizer={name} takes {", ".join("--" + n for n in accepted)}, '
        f'not {", ".join(foreign)}.')
  try:
    return optimizers.get(name, **{n: fv[n].value for n in accepted})
  except checks.ArgumentError as e:  # Its arguments are the flags' names.
    raise app.UsageError(f'--{e.argument} {e.reason}') from e


def check_adaptive_flags(fv) -> None:
  """Flags of seed 003's algorithms only with them, and vice versa."""
  if fv.algorithm not in ADAPTIVE_ALGORITHMS:
    given = [f'--{n}' for n in _ADAPTIVE_FLAGS if fv[n].present]
    if given:
      raise app.UsageError(
          f'{", ".join(given)} only apply to --algorithm='
          f'{"/".join(ADAPTIVE_ALGORITHMS)}.')
    return
  if fv.algorithm != 'adaptive_fed_opt':
    if fv.client_optimizer != 'sgd':
      raise app.UsageError(
          f'--algorithm={fv.algorithm} runs --optimizer on the clients; '
          'drop --client_optimizer.')
    if fv['server_learning_rate'].present:
      raise app.UsageError(
          f'--algorithm={fv.algorithm} has no server learning rate; drop '
          '--server_learning_rate.')
  if fv['server_optimizer'].present:
    raise app.UsageError(
        f'--algorithm={fv.algorithm} uses --optimizer; drop '
        '--server_optimizer.')
