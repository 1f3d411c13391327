"""The schedule flag groups (`--k_...`, `--client_lr_...`, `--server_lr_...`)
and what an on-plateau schedule watches (`--k_monitor`, ...)."""

from typing import Optional

from absl import app

from tasks.common import flag_table
from tff_mixed import checks
from tff_mixed import driver
from tff_mixed import keys
from tff_mixed import schedules
from tff_mixed.algorithms import fed_avg

TRAIN_LOSS = 'train_loss'
# --k_monitor / --client_lr_monitor -> the process hyper-parameter they move.
MONITORED = {'k': keys.NUM_LOCAL_STEPS, 'client_lr': keys.LEARNING_RATE}
SERVER_LR_SCHEDULE_ALGORITHMS = ('fedavg', 'fedadam', 'adaptive_fed_opt')
_KNOBS = ('decay_rate', 'offset', 'exponent', 'window', 'factor', 'patience')
# The server's rate follows the round only (the server step sees no client
# loss), so it has no knobs of loss_ratio or on_plateau.
_ROUND_KNOBS = ('decay_rate', 'offset', 'exponent')
# The flag each group's schedule starts from.
_START = {'k': 'num_local_steps', 'client_lr': 'client_learning_rate',
          'server_lr': 'server_learning_rate'}


def _knobs(prefix: str) -> tuple[str, ...]:
  return _ROUND_KNOBS if prefix == 'server_lr' else _KNOBS


def define_schedules(define) -> None:
  """Defines the three groups and the monitors through `define`
  (`flag_table.Table.define`)."""
  for prefix, what in (('k', 'K'),
                       ('client_lr', 'the client learning rate'),
                       ('server_lr', 'the server learning rate (fedavg, '
                        'fedadam, adaptive_fed_opt; a schedule of the '
                        'round)')):
    define(flag_table.ENUM, f'{prefix}_schedule', 'constant',
           schedules.NAMES,
           f'Schedule of {what} from --{_START[prefix]} '
           '(tff_mixed.schedules): exponential v0*d^t, inverse_time '
           'v0/(b+t), power v0*(t+1)^-p, loss_ratio v0*(F_t/F_0)^p, '
           'on_plateau.')
    define(flag_table.FLOAT, f'{prefix}_decay_rate', 0.995,
           f'd of --{prefix}_schedule=exponential.', lower_bound=0.0,
           upper_bound=1.0)
    define(flag_table.FLOAT, f'{prefix}_offset', 1.0,
           f'b of --{prefix}_schedule=inverse_time.', lower_bound=0.0)
    define(flag_table.FLOAT, f'{prefix}_exponent', None,
           f'p of --{prefix}_schedule=power (default 0.25) or loss_ratio '
           '(default 0.5).', lower_bound=0.0)
    if prefix == 'server_lr':
      continue
    define(flag_table.INTEGER, f'{prefix}_window', None,
           f'Rounds in the rolling loss mean of --{prefix}_schedule='
           'loss_ratio (default 10) or on_plateau (default 1).',
           lower_bound=1)
    define(flag_table.FLOAT, f'{prefix}_factor', 0.5,
           f'Multiplier of --{prefix}_schedule=on_plateau.', lower_bound=0.0,
           upper_bound=1.0)
    define(flag_table.INTEGER, f'{prefix}_patience', 10,
           f'Rounds (evaluations with --{prefix}_monitor=eval/...) without '
           f'improvement before --{prefix}_schedule=on_plateau decays.',
           lower_bound=1)
  for prefix in MONITORED:
    define(flag_table.STRING, f'{prefix}_monitor', TRAIN_LOSS,
           f'What --{prefix}_schedule=on_plateau watches: {TRAIN_LOSS} (the '
           'loss clients report after their first step, every round) or a '
           'column of metrics.csv the evaluation writes, e.g. validation/loss '
           "(seed 001 §3.5's validation error, every --eval_every rounds, on "
           'the task\'s validation split: --validation_fraction) or eval/loss '
           '(the test data).')
    define(flag_table.ENUM, f'{prefix}_monitor_mode', 'min',
           ('min', 'max'),
           f'Whether --{prefix}_monitor=eval/... improves by falling (a loss '
           'or an error) or rising (an accuracy).')


def schedule(fv, prefix: str, initial_value: float) -> schedules.Schedule:
  """The `--{prefix}_schedule` group as a schedule starting at
  `initial_value`; the library's argument errors name the flags."""
  name = fv[f'{prefix}_schedule'].value
  try:
    return schedules.from_name(
        name, initial_value,
        **{knob: fv[f'{prefix}_{knob}'].value for knob in _knobs(prefix)})
  except checks.ArgumentError as e:  # Named by its flag.
    flag = {'initial_value': _START[prefix],
            **{knob: f'{prefix}_{knob}' for knob in _knobs(prefix)}}.get(
                e.argument)
    message = (f'--{flag} {e.reason}' if flag
               else f'--{prefix}_schedule={name}: {e}')
    raise app.UsageError(message) from e
  except (TypeError, ValueError) as e:
    raise app.UsageError(f'--{prefix}_schedule={name}: {e}') from e


def check_unused_schedule_flags(fv) -> None:
  """A knob the chosen schedule does not read is a usage error."""
  for prefix in _START:
    name = fv[f'{prefix}_schedule'].value
    takes = schedules.parameter_names(name)
    for knob in _knobs(prefix):
      if fv[f'{prefix}_{knob}'].present and knob not in takes:
        takes_flags = ', '.join(f'--{prefix}_{k}' for k in takes
                                if k in _knobs(prefix)) or 'no parameter'
        raise app.UsageError(
            f'--{prefix}_{knob} is not read by --{prefix}_schedule={name} '
            f'(it takes {takes_flags}).')


def server_learning_rate(fv) -> Optional[schedules.Schedule]:
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
  return schedule(fv, 'server_lr', initial)


def eval_plateaus(fv) -> tuple[driver.EvalPlateau, ...]:
  """`--k_monitor` / `--client_lr_monitor` on an evaluation column."""
  plateaus = []
  for prefix, hparam in MONITORED.items():
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
    if not monitor.value.startswith((keys.eval_column(''),
                                     keys.validation_column(''))):
      raise app.UsageError(
          f'--{prefix}_monitor must be {TRAIN_LOSS} or an evaluation column '
          f'eval/<metric> or validation/<metric> (e.g. validation/loss), got '
          f'{monitor.value!r}.')
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
        schedule(fv, prefix, initial), hparam=hparam, metric=monitor.value,
        mode=mode.value))
  return tuple(plateaus)


def monitor_flags(plateaus) -> str:
  """The `--{prefix}_monitor=...` flags that made `plateaus`."""
  flag = {v: k for k, v in MONITORED.items()}
  return ', '.join(f'--{flag[p.hparam]}_monitor={p.metric}' for p in plateaus)
