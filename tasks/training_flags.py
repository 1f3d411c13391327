"""Flags shared by every training binary, read once into an experiment config.

A binary defines its task flags and calls `define_training_flags()`; its
`main` calls `config_from_flags(task_flag_names)` first (every flag is read
and checked there, once: one-line errors naming the flag, nothing written),
then builds its task and calls `run_task(task, config)`, which builds the
process through `tasks.registry` and runs `tff_mixed.driver`. Optimizer flags come in prefixed groups
(`--client_optimizer`, `--client_learning_rate`, ... and `--server_...`), as
do the schedules of K (`--k_schedule`, `--k_decay_rate`, ...) and of the
client learning rate (`--client_lr_schedule`, ...); `--download_mbps`,
`--upload_mbps` and `--minibatch_seconds` set the simulated-time model.
"""

import dataclasses
import functools
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional

from absl import app
from absl import flags
import tensorflow as tf
import tensorflow_federated as tff

from tasks import outputs
from tasks import registry
from tasks.runner import run as run_lib
from tff_mixed import algorithms
from tff_mixed import checks
from tff_mixed.algorithms import fed_avg
from tff_mixed import driver
from tff_mixed import keys
from tff_mixed import optimizers
from tff_mixed import schedules
from tff_mixed import templates
from tff_mixed.metrics import runtime
from tff_mixed.templates import mixed_fl_step
from tff_mixed.task import Task

FLAGS = flags.FLAGS

# Seed 003's adaptive-FL algorithms, whose optimizer is --optimizer.
WEIGHTINGS = {
    'examples': tff.learning.ClientWeighting.NUM_EXAMPLES,
    'uniform': tff.learning.ClientWeighting.UNIFORM,
    'dataset_size': templates.DATASET_SIZE,
}
ADAPTIVE_ALGORITHMS = registry.ADAPTIVE
ALGORITHMS = registry.NAMES
_ADAPTIVE_FLAGS = ('optimizer', 'beta', 'beta_1', 'beta_2', 'epsilon')
OPTIMIZERS = registry.OPTIMIZERS
# Recorded in config.json only when set, so that run directories made before
# the flag existed still resume with the same command.
_RECORDED_WHEN_SET = frozenset({'use_synthetic_data'})
# Flags that do not change the trained model: a restart may change them.
_NOT_IN_CONFIG = frozenset(
    {'rounds', 'output_dir', 'eval_every', 'checkpoint_every', 'progress',
     'on_non_finite',
     'download_mbps', 'upload_mbps', 'minibatch_seconds', 'local_workers',
     'workers'}
)
_DEFINED: dict[str, None] = {}  # Names of the training flags, in order.
TRAIN_LOSS = 'train_loss'
# --k_monitor / --client_lr_monitor -> the process hyper-parameter they move.
_MONITORED = {'k': keys.NUM_LOCAL_STEPS, 'client_lr': keys.LEARNING_RATE}


def _define_in(define_fn, name, *args, flag_values=FLAGS, **kwargs):
  define_fn(name, *args, flag_values=flag_values, **kwargs)
  _DEFINED[name] = None


def define_training_flags(
    *,
    rounds: int = 100,
    clients_per_round: int = 10,
    num_local_steps: int = 10,
    client_learning_rate: float = 0.1,
    client_learning_rate_help: str = '',
    federated_weight: float = 0.5,
    central_weight: float = 0.5,
    flag_values: flags.FlagValues = FLAGS,
) -> None:
  """Defines the algorithm, optimizer and driver flags with these defaults.

  `client_learning_rate_help` is appended to the flag's help (e.g. a
  per-algorithm default the binary applies). `flag_values` (default the
  global `FLAGS`) lets tests define them in a fresh `flags.FlagValues`.
  """
  _define = functools.partial(_define_in, flag_values=flag_values)
  _define(flags.DEFINE_enum, 'algorithm', 'fedavg', ALGORITHMS,
          '; '.join(f'{name}: {entry.summary}'
                    for name, entry in registry.ALGORITHMS.items()) + '.')
  _define(flags.DEFINE_enum, 'optimizer', 'sgdm', optimizers.NAMES,
          'Seed 003 algorithms: the adaptive optimizer (tff_mixed.optimizers;'
          ' m starts at 0, v at 1, no bias correction).')
  # Bounds [0, 1]; tff_mixed.optimizers refuses 1 where it divides by 1 - b.
  _define(flags.DEFINE_float, 'beta', None,
          'Decay of --optimizer=sgdm (in [0, 1)) or rmsprop (in [0, 1]) '
          '(default 0.9).', lower_bound=0.0, upper_bound=1.0)
  _define(flags.DEFINE_float, 'beta_1', None,
          'First-moment decay of --optimizer=adam, in [0, 1) (default 0.9).',
          lower_bound=0.0, upper_bound=1.0)
  _define(flags.DEFINE_float, 'beta_2', None,
          'Second-moment decay of --optimizer=adam, in [0, 1] (default 0.99).',
          lower_bound=0.0, upper_bound=1.0)
  _define(flags.DEFINE_float, 'epsilon', None,
          'Epsilon of --optimizer=rmsprop/adam (default 1e-3).',
          lower_bound=0.0)
  _define(flags.DEFINE_integer, 'num_local_steps', num_local_steps,
          'K (K_0 with --k_schedule): SGD steps every client takes per round.',
          lower_bound=1, upper_bound=checks.MAX_STEPS)
  for prefix, what, start in (('k', 'K', '--num_local_steps'),
                              ('client_lr', 'the client learning rate',
                               '--client_learning_rate'),
                              ('server_lr', 'the server learning rate (fedavg, '
                               'fedadam, adaptive_fed_opt; a schedule of the '
                               'round)', '--server_learning_rate')):
    _define(flags.DEFINE_enum, f'{prefix}_schedule', 'constant',
            schedules.NAMES,
            f'Schedule of {what} from {start} (tff_mixed.schedules): '
            'exponential v0*d^t, inverse_time v0/(b+t), power v0*(t+1)^-p, '
            'loss_ratio v0*(F_t/F_0)^p, on_plateau.')
    _define(flags.DEFINE_float, f'{prefix}_decay_rate', 0.995,
            f'd of --{prefix}_schedule=exponential.', lower_bound=0.0,
            upper_bound=1.0)
    _define(flags.DEFINE_float, f'{prefix}_offset', 1.0,
            f'b of --{prefix}_schedule=inverse_time.', lower_bound=0.0)
    _define(flags.DEFINE_float, f'{prefix}_exponent', None,
            f'p of --{prefix}_schedule=power (default 0.25) or loss_ratio '
            '(default 0.5).', lower_bound=0.0)
    _define(flags.DEFINE_integer, f'{prefix}_window', None,
            f'Rounds in the rolling loss mean of --{prefix}_schedule='
            'loss_ratio (default 10) or on_plateau (default 1).',
            lower_bound=1)
    _define(flags.DEFINE_float, f'{prefix}_factor', 0.5,
            f'Multiplier of --{prefix}_schedule=on_plateau.', lower_bound=0.0,
            upper_bound=1.0)
    _define(flags.DEFINE_integer, f'{prefix}_patience', 10,
            f'Rounds (evaluations with --{prefix}_monitor=eval/...) without '
            f'improvement before --{prefix}_schedule=on_plateau decays.',
            lower_bound=1)
  for prefix in ('k', 'client_lr'):
    _define(flags.DEFINE_string, f'{prefix}_monitor', TRAIN_LOSS,
            f'What --{prefix}_schedule=on_plateau watches: {TRAIN_LOSS} (the '
            'loss clients report after their first step, every round) or a '
            'column of metrics.csv the evaluation writes, e.g. eval/loss '
            "(seed 001 §3.5's validation error, every --eval_every rounds).")
    _define(flags.DEFINE_enum, f'{prefix}_monitor_mode', 'min',
            ('min', 'max'),
            f'Whether --{prefix}_monitor=eval/... improves by falling (a loss '
            'or an error) or rising (an accuracy).')
  default_lr_help = {
      'client': client_learning_rate_help and f' ({client_learning_rate_help})',
      'server': (' (default: 1.0; '
                 f'{fed_avg.FED_ADAM_LEARNING_RATE} for fedadam).'),
      'central': ' (mixed FL; default: client lr x server lr, App. C.2).',
      'merge': ' (mixed FL; default 1.0).',
  }
  for side, default_opt, default_lr in (
      ('client', 'sgd', client_learning_rate),
      ('server', 'sgd', None),
      ('central', 'sgd', None),
      ('merge', 'sgd', None),
  ):
    _define(flags.DEFINE_enum, f'{side}_optimizer', default_opt, OPTIMIZERS,
            f'{side.capitalize()} optimizer (tff.learning.optimizers).')
    _define(flags.DEFINE_float, f'{side}_learning_rate', default_lr,
            f'{side.capitalize()} learning rate' + default_lr_help[side],
            lower_bound=0.0)
    # The bounds of tff.learning's optimizers; `_check_decays` refuses 1
    # where it breaks them.
    _define(flags.DEFINE_float, f'{side}_momentum', 0.9,
            f'Momentum of --{side}_optimizer=sgdm, in [0, 1].',
            lower_bound=0.0, upper_bound=1.0)
    _define(flags.DEFINE_float, f'{side}_beta_1', 0.9,
            f'beta_1 of adam/yogi for the {side}, in [0, 1).',
            lower_bound=0.0, upper_bound=1.0)
    _define(flags.DEFINE_float, f'{side}_beta_2', 0.99,
            f'beta_2 of adam/yogi/rmsprop for the {side}, in [0, 1] '
            '([0, 1) with --server_adam=seed000).',
            lower_bound=0.0, upper_bound=1.0)
    _define(flags.DEFINE_float, f'{side}_epsilon', 1e-3,
            f'epsilon of the {side} adaptive optimizer.', lower_bound=0.0)
  _define(flags.DEFINE_enum, 'client_weighting', None, list(WEIGHTINGS),
          'p_i in the mean of client updates: examples (processed in the K '
          'steps), uniform, or dataset_size (|D_i|, seed 000 Alg. 1). '
          "Default: the algorithm's (examples; uniform for adaptive_fed_opt "
          'and fedadam --server_adam=seed000).')
  _define(flags.DEFINE_enum, 'server_adam', 'tff', algorithms.ADAM_VARIANTS,
          "--algorithm=fedadam's Adam: tff (tff.learning's, eps outside the "
          'square root, beta_2 0.99, eps 1e-3) or seed000 (seed 000 App. B '
          'Alg. 3: eps inside, beta_2 0.999, eps 1e-8, uniform client mean).')
  _define(flags.DEFINE_float, 'federated_weight', federated_weight,
          'Mixed FL: w_f, the weight of the federated loss.', lower_bound=0.0)
  _define(flags.DEFINE_float, 'central_weight', central_weight,
          'Mixed FL: w_c, the weight of the central loss.', lower_bound=0.0)
  _define(flags.DEFINE_integer, 'num_central_steps', None,
          'Mixed FL: J, central steps per round (default K).', lower_bound=1)
  _define(flags.DEFINE_bool, 'gradient_dissimilarity', False,
          'Mixed FL: log seed 004 Eq. 7 G~^2 and B~^2 each round (one more '
          'model-sized upload per client).')
  _define(flags.DEFINE_integer, 'mixing_probe', 0,
          'Mixed FL: instead of training, run seed 004 App. C.1\'s probe: '
          'this many simulations (seeds --seed, --seed+1, ...) of --rounds '
          'rounds at K = J = 1 measuring G~^2 and B~^2, then print the max '
          'over rounds >= --mixing_probe_first_round and the advised mixing '
          '(paper: 5 simulations, 100 rounds).', lower_bound=0)
  _define(flags.DEFINE_integer, 'mixing_probe_first_round', 10,
          'First round (1-based) whose G~^2 / B~^2 the probe counts.',
          lower_bound=1)
  _define(flags.DEFINE_integer, 'rounds', rounds, 'Number of rounds.',
          lower_bound=1)
  # google-research/federated's trainers' names, so their commands work here.
  flags.DEFINE_alias('total_rounds', 'rounds', flag_values=flag_values)
  _define(flags.DEFINE_integer, 'clients_per_round', clients_per_round,
          'Clients sampled per round.', lower_bound=1)
  _define(flags.DEFINE_integer, 'client_groups', 2,
          'Fast mode: split each round\'s cohort into this many client '
          'groups, each trained in one TF call (same model as one TFF client '
          'per client, to float rounding); 0: one TFF client per client '
          '(faithful mode, needed for per-client aggregators).',
          lower_bound=0)
  _define(flags.DEFINE_integer, 'local_workers', 1,
          'TFF workers to start on this machine; with '
          '--workers or more than 1, TFF\'s mergeable context splits each '
          'round\'s clients (or client groups) across all of them.',
          lower_bound=0)
  _define(flags.DEFINE_list, 'workers', [],
          'host:port of TFF worker_binary processes started elsewhere '
          '(unauthenticated gRPC: trusted networks only; file-backed data '
          'must be at the same path on every worker).')
  _define(flags.DEFINE_integer, 'seed', 0,
          'Seeds initialisation, data split and client sampling.')
  _define(flags.DEFINE_string, 'output_dir', None,
          'Directory for config.json, metrics.csv, checkpoints/, tensorboard/.'
          ' Restarting with the same flags resumes the run.')
  flags.DEFINE_string(
      'root_output_dir', None, 'With --experiment_name, as '
      'google-research/federated\'s trainers take it: --output_dir is '
      '<root_output_dir>/<experiment_name>.', flag_values=flag_values)
  flags.DEFINE_string('experiment_name', None, 'See --root_output_dir.',
                      flag_values=flag_values)
  _define(flags.DEFINE_integer, 'eval_every', 10,
          'Evaluate every this many rounds (0: only at the end).',
          lower_bound=0)
  flags.DEFINE_alias('rounds_per_eval', 'eval_every', flag_values=flag_values)
  _define(flags.DEFINE_integer, 'checkpoint_every', 10,
          'Checkpoint every this many rounds.', lower_bound=1)
  _define(flags.DEFINE_bool, 'progress', True, 'Show a progress bar.')
  _define(flags.DEFINE_enum, 'on_non_finite', 'stop', driver.ON_NON_FINITE,
          'A round whose new model or server state is not finite: stop '
          '(exit 1, the last checkpoint kept) or skip (undo the round, warn, '
          'count it in metrics.csv skipped_non_finite). Not part of the '
          "run's configuration: a stopped run can resume with skip.")
  _define(flags.DEFINE_float, 'download_mbps', runtime.RuntimeModel.download_mbps,
          'Simulated client download bandwidth (Mbit/s; seed 001 runtime '
          'model).', lower_bound=0.0)
  _define(flags.DEFINE_float, 'upload_mbps', runtime.RuntimeModel.upload_mbps,
          'Simulated client upload bandwidth (Mbit/s).', lower_bound=0.0)
  _define(flags.DEFINE_float, 'minibatch_seconds',
          runtime.RuntimeModel.minibatch_seconds,
          'Simulated time of one client minibatch step (seconds).',
          lower_bound=0.0)
  flags.register_multi_flags_validator(
      ['output_dir', 'root_output_dir', 'experiment_name'], _one_output_dir,
      message='give --output_dir, or --root_output_dir with '
      '--experiment_name.', flag_values=flag_values)
  outputs.require_finite_floats(flag_values)

  def algorithm_matches_server(values):
    return not (
        values['algorithm'] == 'fedadam'
        and values['server_optimizer'] not in ('sgd', 'adam')
    )

  flags.register_multi_flags_validator(
      ['algorithm', 'server_optimizer'], algorithm_matches_server,
      flag_values=flag_values,
      message='--algorithm=fedadam uses Adam; drop --server_optimizer.')


def _optimizer_spec(fv, side: str) -> registry.OptimizerSpec:
  """The `--{side}_optimizer` group."""
  return registry.OptimizerSpec(
      **{field.name: fv[f'{side}_{field.name}' if field.name != 'name'
                           else f'{side}_optimizer'].value
         for field in dataclasses.fields(registry.OptimizerSpec)})


def _schedule(fv, prefix: str, initial_value: float) -> schedules.Schedule:
  """The `--{prefix}_schedule` group as a schedule starting at `initial_value`."""
  name = fv[f'{prefix}_schedule'].value
  knobs = _SCHEDULE_KNOBS
  try:
    return schedules.from_name(
        name, initial_value,
        **{knob: fv[f'{prefix}_{knob}'].value for knob in knobs})
  except (TypeError, ValueError) as e:
    message = str(e)
    start = {'k': 'num_local_steps', 'client_lr': 'client_learning_rate',
             'server_lr': 'server_learning_rate'}
    for knob in knobs:  # Name the flag, not the Python argument.
      if message.startswith(f'{knob} '):
        message = f'--{prefix}_{message}'
        break
    else:
      if message.startswith('initial_value '):
        message = f'--{start[prefix]}' + message[len('initial_value'):]
      else:
        message = f'--{prefix}_schedule={name}: {message}'
    raise app.UsageError(message) from e


SERVER_LR_SCHEDULE_ALGORITHMS = ('fedavg', 'fedadam', 'adaptive_fed_opt')
# The prefixes of the `--{side}_optimizer` flag groups.
_SIDES = ('client', 'server', 'central', 'merge')
_SCHEDULE_KNOBS = ('decay_rate', 'offset', 'exponent', 'window', 'factor',
                   'patience')
# Flags only the mixed FL algorithms read.
_MIXED_FL_FLAGS = ('federated_weight', 'central_weight', 'num_central_steps',
                   'gradient_dissimilarity', 'mixing_probe',
                   'mixing_probe_first_round')


def _one_output_dir(values) -> bool:
  """--output_dir, or both of --root_output_dir and --experiment_name."""
  split = values['root_output_dir'], values['experiment_name']
  if values['output_dir'] is not None:
    return split == (None, None)
  return None not in split


def _output_dir(fv) -> str:
  if fv.output_dir is not None:
    return fv.output_dir
  return os.path.join(fv.root_output_dir, fv.experiment_name)


def _check_unused_flags(fv, also_read: Sequence[str] = ()) -> None:
  """A flag given but not read by the chosen schedule, optimizer or
  algorithm is a usage error (it would otherwise be silently ignored)."""
  for prefix in ('k', 'client_lr', 'server_lr'):
    name = fv[f'{prefix}_schedule'].value
    takes = schedules.parameter_names(name)
    for knob in _SCHEDULE_KNOBS:
      if fv[f'{prefix}_{knob}'].present and knob not in takes:
        takes_flags = ', '.join(f'--{prefix}_{k}' for k in takes
                                if k in _SCHEDULE_KNOBS) or 'no parameter'
        raise app.UsageError(
            f'--{prefix}_{knob} is not read by --{prefix}_schedule={name} '
            f'(it takes {takes_flags}).')
  mixed = registry.ALGORITHMS[fv.algorithm].needs_central_data
  for side in _SIDES:
    if side in ('central', 'merge') and not mixed:
      given = [f'--{side}_{n}' for n in ('optimizer', 'learning_rate',
                                          'momentum', 'beta_1', 'beta_2',
                                          'epsilon') if fv[f'{side}_{n}'].present]
      if given:
        raise app.UsageError(
            f'{given[0]} is for the mixed FL algorithms, not --algorithm='
            f'{fv.algorithm}.')
      continue
    optimizer = _side_optimizer(fv, side)
    takes = registry.OPTIMIZER_HPARAMS[optimizer]
    for knob in ('momentum', 'beta_1', 'beta_2', 'epsilon'):
      if fv[f'{side}_{knob}'].present and knob not in takes:
        raise app.UsageError(
            f'--{side}_{knob} is not read by --{side}_optimizer={optimizer}.')
  if not mixed:
    given = [f'--{n}' for n in _MIXED_FL_FLAGS
             if fv[n].present and n not in also_read]
    if given:
      raise app.UsageError(
          f'{given[0]} is for the mixed FL algorithms, not --algorithm='
          f'{fv.algorithm}.')


def _side_optimizer(fv, side: str) -> str:
  """The `tff.learning` optimizer the `--{side}_...` flags feed."""
  if side == 'server' and fv.algorithm == 'fedadam':
    return 'adam'
  return fv[f'{side}_optimizer'].value


def _check_decays(fv) -> None:
  """A decay of 1 where the optimizer it feeds cannot take it.

  The flags' bounds are `tff.learning`'s, [0, 1]. But TFF's Adam and Yogi
  divide their step by 1 - beta_1^t (NaN from the first step), and seed
  000's Adam (`--server_adam=seed000`) refuses beta_1 = 1 and beta_2 = 1.
  """
  for side in _SIDES:
    optimizer = _side_optimizer(fv, side)
    if optimizer in ('adam', 'yogi') and fv[f'{side}_beta_1'].value == 1:
      raise app.UsageError(
          f'--{side}_beta_1 must be in [0, 1) for {optimizer} (its bias '
          'correction divides by 1 - beta_1^t), got 1.0.')
  if (fv.algorithm == 'fedadam' and fv.server_adam == algorithms.SEED000_ADAM
      and fv.server_beta_2 == 1):
    raise app.UsageError('--server_beta_2 must be in [0, 1) with '
                         '--server_adam=seed000, got 1.0.')


def _check_two_way_client(fv, client: registry.OptimizerSpec) -> None:
  """2-way GT's inferred federated gradient needs plain SGD on the clients."""
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


def _server_learning_rate(fv) -> Optional[schedules.Schedule]:
  """`--server_lr_schedule` from `--server_learning_rate`, or None."""
  name = fv.server_lr_schedule
  if name == 'constant':
    return None
  if fv.algorithm not in SERVER_LR_SCHEDULE_ALGORITHMS:
    raise app.UsageError(
        f'--server_lr_schedule={name} is for --algorithm='
        f'{"/".join(SERVER_LR_SCHEDULE_ALGORITHMS)}; {fv.algorithm} does not '
        'take a server learning-rate schedule.')
  if name in ('loss_ratio', 'on_plateau'):
    raise app.UsageError(
        f'--server_lr_schedule={name} reads the client loss, which the server '
        'step does not see; use exponential, inverse_time or power.')
  initial = fv.server_learning_rate
  if initial is None:
    initial = (fed_avg.FED_ADAM_LEARNING_RATE if fv.algorithm == 'fedadam'
               else 1.0)
  return _schedule(fv, 'server_lr', initial)


def _eval_plateaus(fv) -> tuple[driver.EvalPlateau, ...]:
  """`--k_monitor` / `--client_lr_monitor` on an evaluation column."""
  plateaus = []
  for prefix, hparam in _MONITORED.items():
    monitor, mode = fv[f'{prefix}_monitor'], fv[f'{prefix}_monitor_mode']
    if monitor.value == TRAIN_LOSS:
      if mode.present:
        raise app.UsageError(
            f'--{prefix}_monitor_mode is for --{prefix}_monitor=eval/...; '
            f'--{prefix}_monitor={TRAIN_LOSS} is a loss.')
      continue
    if fv[f'{prefix}_schedule'].value != 'on_plateau':
      raise app.UsageError(
          f'--{prefix}_monitor={monitor.value} is for --{prefix}_schedule='
          f'on_plateau, not {fv[f"{prefix}_schedule"].value}.')
    if not monitor.value.startswith(keys.eval_column('')):
      raise app.UsageError(
          f'--{prefix}_monitor must be {TRAIN_LOSS} or an evaluation column '
          f'eval/<metric> (e.g. eval/loss), got {monitor.value!r}.')
    if fv.eval_every < 1:
      raise app.UsageError(
          f'--{prefix}_monitor={monitor.value} needs --eval_every >= 1.')
    if fv.mixing_probe:
      raise app.UsageError(
          f'--mixing_probe runs at K = 1 without evaluation; drop '
          f'--{prefix}_monitor.')
    initial = (fv.num_local_steps if prefix == 'k'
               else fv.client_learning_rate)
    plateaus.append(driver.EvalPlateau(
        _schedule(fv, prefix, initial), hparam=hparam, metric=monitor.value,
        mode=mode.value))
  return tuple(plateaus)


def _adaptive_optimizer(fv) -> optimizers.AdaptiveOptimizer:
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
  except ValueError as e:
    raise app.UsageError(f'--{e}') from e


def _check_adaptive_flags(fv) -> None:
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


def config_from_flags(
    task_flag_names: Sequence[str] = (), flag_values: flags.FlagValues = FLAGS,
    *, also_read: Sequence[str] = (),
) -> registry.ExperimentConfig:
  """Reads and checks every training flag, once.

  `task_flag_names` are the binary's own flags that define the run; they
  are recorded in `config.record` with the training flags (restarting in
  the same `--output_dir` must repeat them). `also_read` names training
  flags the binary reads itself, which are therefore not refused as unused
  by the algorithm.

  Raises:
    app.UsageError: One line naming the flag that is wrong.
  """
  fv = flag_values
  _check_unused_flags(fv, also_read)
  _check_adaptive_flags(fv)
  if fv.mixing_probe and fv.mixing_probe_first_round > fv.rounds:
    raise app.UsageError(
        f'--mixing_probe_first_round={fv.mixing_probe_first_round} is '
        f'after the last of --rounds={fv.rounds}.')
  _check_decays(fv)
  client = _optimizer_spec(fv, 'client')
  _check_two_way_client(fv, client)
  eval_plateaus = _eval_plateaus(fv)
  monitored = {p.hparam for p in eval_plateaus}
  num_local_steps = fv.num_local_steps
  if fv.k_schedule != 'constant' and keys.NUM_LOCAL_STEPS not in monitored:
    num_local_steps = _schedule(fv, 'k', num_local_steps)
  client_learning_rate = None
  if (fv.client_lr_schedule != 'constant'
      and keys.LEARNING_RATE not in monitored):
    client_learning_rate = _schedule(fv, 'client_lr', fv.client_learning_rate)
  if fv.algorithm == 'oracle':
    given = [f'--{n}' for n in ('server_optimizer', 'server_learning_rate',
                                'server_lr_schedule') if fv[n].present]
    if given:
      raise app.UsageError(
          f'--algorithm=oracle is centralised SGD at the client learning '
          f'rate; drop {", ".join(given)}.')
  server_learning_rate = _server_learning_rate(fv)
  server = _optimizer_spec(fv, 'server')
  if fv.server_adam != algorithms.TFF_ADAM:
    if fv.algorithm != 'fedadam':
      raise app.UsageError(
          f'--server_adam={fv.server_adam} is for --algorithm=fedadam, not '
          f'{fv.algorithm}.')
    beta_2, epsilon = fed_avg.ADAM_DEFAULTS[fv.server_adam]
    server = dataclasses.replace(
        server,
        beta_2=fv.server_beta_2 if fv['server_beta_2'].present else beta_2,
        epsilon=(fv.server_epsilon if fv['server_epsilon'].present
                 else epsilon))
  adaptive = (_adaptive_optimizer(fv) if fv.algorithm in ADAPTIVE_ALGORITHMS
              else None)
  try:
    runtime_model = runtime.RuntimeModel(
        download_mbps=fv.download_mbps, upload_mbps=fv.upload_mbps,
        minibatch_seconds=fv.minibatch_seconds)
  except ValueError as e:
    raise app.UsageError(str(e)) from e
  # With an evaluation monitor, when the model is evaluated changes training.
  names = [n for n in (*_DEFINED, *task_flag_names)
           if (n not in _NOT_IN_CONFIG or (n == 'eval_every' and eval_plateaus))
           and not (n in _RECORDED_WHEN_SET and not fv[n].value)]
  return registry.ExperimentConfig(
      algorithm=fv.algorithm,
      num_local_steps=num_local_steps,
      client_learning_rate=client_learning_rate,
      server_learning_rate=server_learning_rate,
      server_adam=fv.server_adam,
      client_weighting=(None if fv.client_weighting is None
                        else WEIGHTINGS[fv.client_weighting]),
      client=client,
      server=server,
      central=_optimizer_spec(fv, 'central'),
      merge=_optimizer_spec(fv, 'merge'),
      adaptive=adaptive,
      federated_weight=fv.federated_weight,
      central_weight=fv.central_weight,
      num_central_steps=fv.num_central_steps,
      gradient_dissimilarity=fv.gradient_dissimilarity,
      mixing_probe=fv.mixing_probe,
      mixing_probe_first_round=fv.mixing_probe_first_round,
      eval_plateaus=eval_plateaus,
      seed=fv.seed,
      rounds=fv.rounds,
      clients_per_round=fv.clients_per_round,
      client_groups=fv.client_groups,
      local_workers=fv.local_workers,
      workers=tuple(fv.workers),
      output_dir=_output_dir(fv),
      eval_every=fv.eval_every,
      checkpoint_every=fv.checkpoint_every,
      progress=fv.progress,
      on_non_finite=fv.on_non_finite,
      runtime_model=runtime_model,
      record={name: fv[name].value for name in names},
  )


def run_task(
    task: Task,
    config: registry.ExperimentConfig,
    central_data_fn: Optional[Callable[[], tf.data.Dataset]] = None,
    process_fn: Optional[
        Callable[[], tff.learning.templates.LearningProcess]] = None,
    central_data_flags: str = '',
) -> driver.ExperimentResult:
  """Runs `config`'s experiment on `task` (`tasks.runner.run.run`), then
  plots `metrics.png` and prints a line of what it did.

  A process that cannot be built is a one-line usage error.
  `central_data_flags` names the flags that give this task central data, for
  the error when a mixed FL algorithm has none.
  """
  outputs.start_tff()
  if config.algorithm == 'oracle':
    if process_fn is not None:
      raise app.UsageError(
          '--algorithm=oracle pools the data of tasks trained by the registry; '
          'this binary builds its own process.')
    print(f'oracle: {len(task.train_client_ids)} clients'
          f'{" and the central data" if central_data_fn else ""} pooled; '
          f'batches of {config.clients_per_round} x the largest client batch.')
  try:
    result = run_lib.run(task, config.algorithm_config, config.run_config,
                         central_data_fn, record=config.record,
                         process_fn=process_fn)
  except run_lib.MissingCentralDataError as e:
    raise app.UsageError(
        f'--algorithm={config.algorithm} needs central data, which this task '
        + (f'gets with {central_data_flags}.' if central_data_flags
           else 'does not have with these flags.')) from e
  except run_lib.ConfigError as e:
    raise app.UsageError(str(e)) from e
  except run_lib.WorkerError as e:
    sys.exit(f'Error: --workers/--local_workers: {e}')
  except driver.RunError as e:
    sys.exit(f'Error: {e}')
  except driver.EvalPlateauError as e:
    flag = {v: k for k, v in _MONITORED.items()}
    names = ', '.join(f'--{flag[p.hparam]}_monitor={p.metric}'
                      for p in config.eval_plateaus)
    raise app.UsageError(f'{names}: {e}') from e
  if config.mixing_probe:
    return result
  final = ', '.join(  # Counts as integers, metrics to 4 decimals.
      f'{k}={v:.0f}' if k.rsplit('/', 1)[-1].startswith('num_')
      else f'{k}={v:.4f}'
      for k, v in result.final_eval.items())
  plot = os.path.join(config.output_dir, outputs.TRAINING_PLOT)
  outputs.plot_history(result.history, plot,
                       f'{task.name}: {config.algorithm}, {config.rounds} '
                       f'rounds of {config.clients_per_round} clients')
  print(f'{task.name}: {config.rounds} rounds done in '
        f'{result.wall_time_seconds:.1f}s; final eval: {final or "n/a"}; '
        f'plot: {plot}')
  return result


def config_from_values(
    values: Optional[Mapping[str, Any]] = None, *,
    ignore_unknown: bool = False, **overrides,
) -> registry.ExperimentConfig:
  """The config a training binary reads from these flag values.

  `values` and `overrides` map training-flag names to values (`overrides`
  win); they go through `config_from_flags` on a fresh set of the training
  flags, so a comparison, the demo or a notebook trains exactly what the
  binary would, checked the same way, and records the same `config.json`
  keys. `ignore_unknown` skips names that are not training flags (a task
  preset's `model` or `batch_size`); otherwise they are an error.

  Raises:
    app.UsageError, flags.Error: One line naming the flag that is wrong.
  """
  flag_values = flags.FlagValues()
  define_training_flags(flag_values=flag_values)
  given = {**(values or {}), **overrides}
  unknown = [name for name in given if name not in flag_values]
  if unknown and not ignore_unknown:
    raise app.UsageError(f'not a training flag: {", ".join(unknown)}.')
  argv = []
  for name, value in given.items():
    if name in unknown or value is None:
      continue
    if isinstance(value, (list, tuple)):
      value = ','.join(str(v) for v in value)
    argv.append(f'--{name}={value}')
  if 'output_dir' not in given:
    argv.append(f'--output_dir={os.devnull}')  # Not recorded; never written.
  flag_values(['prog', *argv])
  return config_from_flags(flag_values=flag_values)


def central_data_from_flags(
    examples_fn: Callable[[], tf.data.Dataset]
) -> Callable[[], tf.data.Dataset]:
  """`examples_fn`'s examples shuffled with `--central_shuffle_buffer` and
  `--seed`, batched by `--central_batch_size` (flags the binary defines)."""
  batch, buffer, seed = (FLAGS.central_batch_size,
                         FLAGS.central_shuffle_buffer, FLAGS.seed)
  return lambda: examples_fn().shuffle(buffer, seed=seed).batch(batch)


def check_no_arguments(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {" ".join(argv[1:])}')
