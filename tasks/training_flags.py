"""Flags shared by every training binary, and the glue from flags to driver.

A binary defines its task flags, calls `define_training_flags()` and, in
`main`, `run_task(task)`. Optimizer flags come in prefixed groups
(`--client_optimizer`, `--client_learning_rate`, ... and `--server_...`), as
do the schedules of K (`--k_schedule`, `--k_decay_rate`, ...) and of the
client learning rate (`--client_lr_schedule`, ...); `--download_mbps`,
`--upload_mbps` and `--minibatch_seconds` set the simulated-time model.
"""

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Optional

from absl import app
from absl import flags
from absl import logging
import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed import algorithms
from tff_mixed.algorithms import mixed_fl
from tff_mixed import driver
from tff_mixed import execution
from tff_mixed import optimizers
from tff_mixed import schedules
from tff_mixed.metrics import runtime
from tff_mixed.task import Task

FLAGS = flags.FLAGS

# Seed 003's adaptive-FL algorithms, whose optimizer is --optimizer.
ADAPTIVE_ALGORITHMS = ('adaptive_fed_opt', 'fed_gbo', 'mimelite', 'mfl')
ALGORITHMS = ('fedavg', 'fedadam', *mixed_fl.MIXINGS, *ADAPTIVE_ALGORITHMS)
_ADAPTIVE_FLAGS = ('optimizer', 'beta', 'beta_1', 'beta_2', 'epsilon')
OPTIMIZERS = ('sgd', 'sgdm', 'adam', 'yogi', 'adagrad', 'rmsprop')
# Flags that do not change the trained model: a restart may change them.
_NOT_IN_CONFIG = frozenset(
    {'rounds', 'output_dir', 'eval_every', 'checkpoint_every', 'progress',
     'download_mbps', 'upload_mbps', 'minibatch_seconds'}
)
_DEFINED: list[str] = []


def _define(define_fn, name, *args, **kwargs):
  define_fn(name, *args, **kwargs)
  _DEFINED.append(name)


def define_training_flags(
    *,
    rounds: int = 100,
    clients_per_round: int = 10,
    num_local_steps: int = 10,
    client_learning_rate: float = 0.1,
    client_learning_rate_help: str = '',
    federated_weight: float = 0.5,
    central_weight: float = 0.5,
) -> None:
  """Defines the algorithm, optimizer and driver flags with these defaults.

  `client_learning_rate_help` is appended to the flag's help (e.g. a
  per-algorithm default the binary applies).
  """
  _define(flags.DEFINE_enum, 'algorithm', 'fedavg', ALGORITHMS,
          'fedavg: server optimizer from --server_optimizer (SGD lr 1 is '
          'FedAvg); fedadam: Adam on the server; parallel_training, '
          'one_way_gradient_transfer, two_way_gradient_transfer: mixed FL '
          '(seed 004) with the task\'s central data; adaptive_fed_opt '
          '(--optimizer on the server), fed_gbo, mimelite, mfl (--optimizer '
          'on clients at --client_learning_rate): seed 003.')
  _define(flags.DEFINE_enum, 'optimizer', 'sgdm', optimizers.NAMES,
          'Seed 003 algorithms: the adaptive optimizer (tff_mixed.optimizers;'
          ' m starts at 0, v at 1, no bias correction).')
  _define(flags.DEFINE_float, 'beta', None,
          'Decay of --optimizer=sgdm/rmsprop (default 0.9).', lower_bound=0.0,
          upper_bound=1.0)
  _define(flags.DEFINE_float, 'beta_1', None,
          'First-moment decay of --optimizer=adam (default 0.9).',
          lower_bound=0.0, upper_bound=1.0)
  _define(flags.DEFINE_float, 'beta_2', None,
          'Second-moment decay of --optimizer=adam (default 0.99).',
          lower_bound=0.0, upper_bound=1.0)
  _define(flags.DEFINE_float, 'epsilon', None,
          'Epsilon of --optimizer=rmsprop/adam (default 1e-3).',
          lower_bound=0.0)
  _define(flags.DEFINE_integer, 'num_local_steps', num_local_steps,
          'K (K_0 with --k_schedule): SGD steps every client takes per round.',
          lower_bound=1)
  for prefix, what, start in (('k', 'K', '--num_local_steps'),
                              ('client_lr', 'the client learning rate',
                               '--client_learning_rate')):
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
            f'Rounds without improvement before --{prefix}_schedule='
            'on_plateau decays.', lower_bound=1)
  default_lr_help = {
      'client': client_learning_rate_help and f' ({client_learning_rate_help})',
      'server': ' (default: 1.0; 0.3 for fedadam).',
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
    _define(flags.DEFINE_float, f'{side}_momentum', 0.9,
            f'Momentum of --{side}_optimizer=sgdm.', lower_bound=0.0)
    _define(flags.DEFINE_float, f'{side}_beta_1', 0.9,
            f'beta_1 of adam/yogi for the {side}.', lower_bound=0.0)
    _define(flags.DEFINE_float, f'{side}_beta_2', 0.99,
            f'beta_2 of adam/yogi/rmsprop for the {side}.', lower_bound=0.0)
    _define(flags.DEFINE_float, f'{side}_epsilon', 1e-3,
            f'epsilon of the {side} adaptive optimizer.', lower_bound=0.0)
  _define(flags.DEFINE_float, 'federated_weight', federated_weight,
          'Mixed FL: w_f, the weight of the federated loss.', lower_bound=0.0)
  _define(flags.DEFINE_float, 'central_weight', central_weight,
          'Mixed FL: w_c, the weight of the central loss.', lower_bound=0.0)
  _define(flags.DEFINE_integer, 'num_central_steps', None,
          'Mixed FL: J, central steps per round (default K).', lower_bound=1)
  _define(flags.DEFINE_bool, 'gradient_dissimilarity', False,
          'Mixed FL: log seed 004 Eq. 7 G~^2 and B~^2 each round (one more '
          'model-sized upload per client).')
  _define(flags.DEFINE_integer, 'rounds', rounds, 'Number of rounds.',
          lower_bound=1)
  _define(flags.DEFINE_integer, 'clients_per_round', clients_per_round,
          'Clients sampled per round.', lower_bound=1)
  _define(flags.DEFINE_integer, 'seed', 0,
          'Seeds initialisation, data split and client sampling.')
  _define(flags.DEFINE_string, 'output_dir', None,
          'Directory for config.json, metrics.csv, checkpoints/, tensorboard/.'
          ' Restarting with the same flags resumes the run.')
  _define(flags.DEFINE_integer, 'eval_every', 10,
          'Evaluate every this many rounds (0: only at the end).',
          lower_bound=0)
  _define(flags.DEFINE_integer, 'checkpoint_every', 10,
          'Checkpoint every this many rounds.', lower_bound=1)
  _define(flags.DEFINE_bool, 'progress', True, 'Show a progress bar.')
  _define(flags.DEFINE_float, 'download_mbps', runtime.RuntimeModel.download_mbps,
          'Simulated client download bandwidth (Mbit/s; seed 001 runtime '
          'model).', lower_bound=0.0)
  _define(flags.DEFINE_float, 'upload_mbps', runtime.RuntimeModel.upload_mbps,
          'Simulated client upload bandwidth (Mbit/s).', lower_bound=0.0)
  _define(flags.DEFINE_float, 'minibatch_seconds',
          runtime.RuntimeModel.minibatch_seconds,
          'Simulated time of one client minibatch step (seconds).',
          lower_bound=0.0)
  flags.mark_flag_as_required('output_dir')

  def algorithm_matches_server(values):
    return not (
        values['algorithm'] == 'fedadam'
        and values['server_optimizer'] not in ('sgd', 'adam')
    )

  flags.register_multi_flags_validator(
      ['algorithm', 'server_optimizer'], algorithm_matches_server,
      message='--algorithm=fedadam uses Adam; drop --server_optimizer.')


def build_optimizer(side: str) -> Optional[tff.learning.optimizers.Optimizer]:
  """The `--{side}_optimizer` group as a `tff.learning.optimizers` optimizer.

  None for an SGD central optimizer without a learning rate: the mixed FL
  builder's default (client lr x server lr) applies.
  """
  name = FLAGS[f'{side}_optimizer'].value
  lr = FLAGS[f'{side}_learning_rate'].value
  if lr is None:
    if side == 'central' and name == 'sgd':
      return None
    lr = 1.0
  beta_1 = FLAGS[f'{side}_beta_1'].value
  beta_2 = FLAGS[f'{side}_beta_2'].value
  epsilon = FLAGS[f'{side}_epsilon'].value
  opt = tff.learning.optimizers
  if name == 'sgd':
    return opt.build_sgdm(learning_rate=lr)
  if name == 'sgdm':
    return opt.build_sgdm(learning_rate=lr, momentum=FLAGS[f'{side}_momentum'].value)
  if name == 'adam':
    return opt.build_adam(lr, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon)
  if name == 'yogi':
    return opt.build_yogi(lr, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon)
  if name == 'adagrad':
    return opt.build_adagrad(lr, epsilon=epsilon)
  return opt.build_rmsprop(lr, decay=beta_2, epsilon=epsilon)


def build_schedule(prefix: str, initial_value: float) -> schedules.Schedule:
  """The `--{prefix}_schedule` group as a schedule starting at `initial_value`."""
  name = FLAGS[f'{prefix}_schedule'].value
  knobs = ('decay_rate', 'offset', 'exponent', 'window', 'factor', 'patience')
  try:
    return schedules.from_name(
        name, initial_value,
        **{knob: FLAGS[f'{prefix}_{knob}'].value for knob in knobs})
  except (TypeError, ValueError) as e:
    message = str(e)
    start = {'k': 'num_local_steps', 'client_lr': 'client_learning_rate'}
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


def build_schedules():
  """(K, client learning rate): ints / None when constant, else schedules."""
  k = FLAGS.num_local_steps
  if FLAGS.k_schedule != 'constant':
    k = build_schedule('k', k)
  lr = None
  if FLAGS.client_lr_schedule != 'constant':
    lr = build_schedule('client_lr', FLAGS.client_learning_rate)
  return k, lr


def _adaptive_optimizer() -> optimizers.AdaptiveOptimizer:
  """`--optimizer` with the decay flags given; one-line errors name flags."""
  name = FLAGS.optimizer
  accepted = optimizers.hparam_names(name)
  foreign = [f'--{n}' for n in _ADAPTIVE_FLAGS[1:]
             if FLAGS[n].present and n not in accepted]
  if foreign:
    raise app.UsageError(
        f'--optimizer={name} takes {", ".join("--" + n for n in accepted)}, '
        f'not {", ".join(foreign)}.')
  try:
    return optimizers.get(name, **{n: FLAGS[n].value for n in accepted})
  except ValueError as e:
    raise app.UsageError(f'--{e}') from e


def _check_adaptive_flags() -> None:
  """Flags of seed 003's algorithms only with them, and vice versa."""
  adaptive = FLAGS.algorithm in ADAPTIVE_ALGORITHMS
  if not adaptive:
    given = [f'--{n}' for n in _ADAPTIVE_FLAGS if FLAGS[n].present]
    if given:
      raise app.UsageError(
          f'{", ".join(given)} only apply to --algorithm='
          f'{"/".join(ADAPTIVE_ALGORITHMS)}.')
    return
  if FLAGS.algorithm != 'adaptive_fed_opt':
    if FLAGS.client_optimizer != 'sgd':
      raise app.UsageError(
          f'--algorithm={FLAGS.algorithm} runs --optimizer on the clients; '
          'drop --client_optimizer.')
    if FLAGS['server_learning_rate'].present:
      raise app.UsageError(
          f'--algorithm={FLAGS.algorithm} has no server learning rate; drop '
          '--server_learning_rate.')
  if FLAGS['server_optimizer'].present:
    raise app.UsageError(
        f'--algorithm={FLAGS.algorithm} uses --optimizer; drop '
        '--server_optimizer.')


def build_process(
    model_fn, central_data_fn=None, flops_per_example=None,
) -> tff.learning.templates.LearningProcess:
  """The process named by `--algorithm` and the optimizer flags.

  With the task's `flops_per_example`, seed 003's algorithms and SGD
  clients of fedavg/fedadam also measure client FLOPs per round.
  """
  _check_adaptive_flags()
  client_optimizer = build_optimizer('client')
  num_local_steps, client_learning_rate = build_schedules()
  if FLAGS.algorithm in ('fed_gbo', 'mimelite', 'mfl'):
    builder = {'fed_gbo': algorithms.build_fed_gbo,
               'mimelite': algorithms.build_mimelite,
               'mfl': algorithms.build_mfl}[FLAGS.algorithm]
    return builder(
        model_fn,
        optimizers.build_tff_optimizer(
            _adaptive_optimizer(), FLAGS.client_learning_rate,
            frozen_statistics=False),
        num_local_steps=num_local_steps,
        client_learning_rate=client_learning_rate,
        flops_per_example=flops_per_example,
    )
  if FLAGS.client_optimizer != 'sgd':
    flops_per_example = None  # Eq. 22 counts SGD clients here.
  if FLAGS.algorithm == 'adaptive_fed_opt':
    lr = FLAGS.server_learning_rate
    return algorithms.build_adaptive_fed_opt(
        model_fn,
        client_optimizer,
        optimizer=_adaptive_optimizer(),
        server_learning_rate=1.0 if lr is None else lr,
        num_local_steps=num_local_steps,
        client_learning_rate=client_learning_rate,
        flops_per_example=flops_per_example,
    )
  if FLAGS.algorithm in mixed_fl.MIXINGS:
    if central_data_fn is None:
      raise app.UsageError(
          f'--algorithm={FLAGS.algorithm} needs central data, which this task '
          'does not have with these flags.')
    return algorithms.build_mixed_fl(
        model_fn,
        central_data_fn=central_data_fn,
        mixing=FLAGS.algorithm,
        client_optimizer_fn=client_optimizer,
        server_optimizer_fn=build_optimizer('server'),
        central_optimizer_fn=build_optimizer('central'),
        merge_optimizer_fn=build_optimizer('merge'),
        federated_weight=FLAGS.federated_weight,
        central_weight=FLAGS.central_weight,
        num_local_steps=num_local_steps,
        num_central_steps=FLAGS.num_central_steps,
        client_learning_rate=client_learning_rate,
        central_seed=FLAGS.seed,
        gradient_dissimilarity=FLAGS.gradient_dissimilarity,
    )
  if FLAGS.algorithm == 'fedadam':
    lr = FLAGS.server_learning_rate
    return algorithms.build_fed_adam(
        model_fn,
        client_optimizer,
        num_local_steps=num_local_steps,
        client_learning_rate=client_learning_rate,
        server_learning_rate=0.3 if lr is None else lr,
        beta_1=FLAGS.server_beta_1,
        beta_2=FLAGS.server_beta_2,
        epsilon=FLAGS.server_epsilon,
        flops_per_example=flops_per_example,
    )
  return algorithms.build_fed_avg(
      model_fn,
      client_optimizer,
      build_optimizer('server'),
      num_local_steps=num_local_steps,
      client_learning_rate=client_learning_rate,
      flops_per_example=flops_per_example,
  )


def run_config(extra_flag_names: Sequence[str] = ()) -> dict:
  """The flag values that define a run (used to guard `--output_dir`)."""
  names = [n for n in (*_DEFINED, *extra_flag_names) if n not in _NOT_IN_CONFIG]
  return {name: FLAGS[name].value for name in names}


def run_task(
    task: Task,
    task_flag_names: Sequence[str],
    central_data_fn: Optional[Callable[[], tf.data.Dataset]] = None,
    process_fn: Optional[
        Callable[[], tff.learning.templates.LearningProcess]] = None,
) -> driver.ExperimentResult:
  """Builds the process from flags and runs the driver; one-line errors.

  `process_fn` replaces `build_process` for a task with its own process
  (the flags are still checked and recorded).
  """
  config = run_config(task_flag_names)
  # Bad schedule and optimizer flags fail here, before anything is written.
  build_schedules()
  _check_adaptive_flags()
  if FLAGS.algorithm in ADAPTIVE_ALGORITHMS:
    _adaptive_optimizer()
  try:
    runtime_model = runtime.RuntimeModel(
        download_mbps=FLAGS.download_mbps, upload_mbps=FLAGS.upload_mbps,
        minibatch_seconds=FLAGS.minibatch_seconds)
  except ValueError as e:
    raise app.UsageError(str(e)) from e
  try:
    # Checked before the (slow) process build, so a clash fails at once.
    driver.prepare_output_dir(
        FLAGS.output_dir,
        driver.full_config(task.name, FLAGS.seed, FLAGS.clients_per_round, config),
    )
  except driver.OutputDirError as e:
    sys.exit(f'Error: {e}')
  tf.get_logger().setLevel('ERROR')
  logging.set_verbosity(logging.WARNING)  # TFF logs every checkpoint at INFO.
  execution.set_local_execution_context()
  result = driver.run_experiment(
      task,
      (process_fn or (lambda: build_process(
          task.model_fn, central_data_fn, task.flops_per_example)))(),
      rounds=FLAGS.rounds,
      clients_per_round=FLAGS.clients_per_round,
      output_dir=FLAGS.output_dir,
      seed=FLAGS.seed,
      eval_every=FLAGS.eval_every,
      checkpoint_every=FLAGS.checkpoint_every,
      config=config,
      progress=FLAGS.progress,
      runtime_model=runtime_model,
  )
  final = ', '.join(f'{k}={v:.4f}' for k, v in result.final_eval.items())
  print(f'{task.name}: {FLAGS.rounds} rounds done in '
        f'{result.wall_time_seconds:.1f}s; final eval: {final or "n/a"}')
  return result


def central_data_from_flags(
    examples_fn: Callable[[], tf.data.Dataset]
) -> Callable[[], tf.data.Dataset]:
  """`examples_fn`'s examples shuffled with `--central_shuffle_buffer` and
  `--seed`, batched by `--central_batch_size` (flags the binary defines)."""
  batch, buffer, seed = (FLAGS.central_batch_size,
                         FLAGS.central_shuffle_buffer, FLAGS.seed)
  return lambda: examples_fn().shuffle(buffer, seed=seed).batch(batch)


def set_unless_given(values: Mapping[str, object]) -> None:
  """Sets each flag in `values` the user did not give (a binary's preset)."""
  for name, value in values.items():
    if not FLAGS[name].present:
      FLAGS[name].value = value


def check_no_arguments(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {" ".join(argv[1:])}')
