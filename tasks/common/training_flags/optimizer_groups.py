"""The `--{side}_optimizer` flag groups: client, server, central, merge."""

import dataclasses

from absl import app

from tasks.common import flag_table
from tasks.common import registry
from tff_mixed import algorithms
from tff_mixed.algorithms import fed_avg

OPTIMIZERS = registry.OPTIMIZERS
# The prefixes of the `--{side}_optimizer` flag groups.
SIDES = ('client', 'server', 'central', 'merge')
_KNOBS = ('momentum', 'beta_1', 'beta_2', 'epsilon')


def define_optimizers(define, *, client_learning_rate: float,
                      client_learning_rate_help: str) -> None:
  """Defines the four groups through `define` (`flag_table.Table.define`)."""
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
    define(flag_table.ENUM, f'{side}_optimizer', default_opt, OPTIMIZERS,
           f'{side.capitalize()} optimizer (tff.learning.optimizers).')
    define(flag_table.FLOAT, f'{side}_learning_rate', default_lr,
           f'{side.capitalize()} learning rate' + default_lr_help[side],
           lower_bound=0.0)
    # The bounds of tff.learning's optimizers; `check_decays` refuses 1
    # where it breaks them.
    define(flag_table.FLOAT, f'{side}_momentum', 0.9,
           f'Momentum of --{side}_optimizer=sgdm, in [0, 1].',
           lower_bound=0.0, upper_bound=1.0)
    define(flag_table.FLOAT, f'{side}_beta_1', 0.9,
           f'beta_1 of adam/yogi for the {side}, in [0, 1).',
           lower_bound=0.0, upper_bound=1.0)
    define(flag_table.FLOAT, f'{side}_beta_2', 0.99,
           f'beta_2 of adam/yogi/rmsprop for the {side}, in [0, 1] '
           '([0, 1) with --server_adam=seed000).',
           lower_bound=0.0, upper_bound=1.0)
    define(flag_table.FLOAT, f'{side}_epsilon', 1e-3,
           f'epsilon of the {side} adaptive optimizer.', lower_bound=0.0)


def optimizer_spec(fv, side: str) -> registry.OptimizerSpec:
  """The `--{side}_optimizer` group."""
  return registry.OptimizerSpec(
      **{field.name: fv[f'{side}_{field.name}' if field.name != 'name'
                           else f'{side}_optimizer'].value
         for field in dataclasses.fields(registry.OptimizerSpec)})


def server_spec(fv) -> registry.OptimizerSpec:
  """The `--server_...` group; FedAdam's variant sets its own defaults."""
  server = optimizer_spec(fv, 'server')
  if fv.server_adam == algorithms.TFF_ADAM:
    return server
  if fv.algorithm != 'fedadam':
    raise app.UsageError(
        f'--server_adam={fv.server_adam} is for --algorithm=fedadam, not '
        f'{fv.algorithm}.')
  beta_2, epsilon = fed_avg.ADAM_DEFAULTS[fv.server_adam]
  return dataclasses.replace(
      server,
      beta_2=fv.server_beta_2 if fv['server_beta_2'].present else beta_2,
      epsilon=(fv.server_epsilon if fv['server_epsilon'].present
               else epsilon))


def side_optimizer(fv, side: str) -> str:
  """The `tff.learning` optimizer the `--{side}_...` flags feed."""
  if side == 'server' and fv.algorithm == 'fedadam':
    return 'adam'
  return fv[f'{side}_optimizer'].value


def check_unused_optimizer_flags(fv) -> None:
  """A knob the side's optimizer does not read, or a central/merge flag
  without mixed FL, is a usage error."""
  mixed = registry.ALGORITHMS[fv.algorithm].needs_central_data
  for side in SIDES:
    if side in ('central', 'merge') and not mixed:
      given = [f'--{side}_{n}' for n in ('optimizer', 'learning_rate', *_KNOBS)
               if fv[f'{side}_{n}'].present]
      if given:
        raise app.UsageError(
            f'{given[0]} is for the mixed FL algorithms, not --algorithm='
            f'{fv.algorithm}.')
      continue
    optimizer = side_optimizer(fv, side)
    takes = registry.OPTIMIZER_HPARAMS[optimizer]
    for knob in _KNOBS:
      if fv[f'{side}_{knob}'].present and knob not in takes:
        raise app.UsageError(
            f'--{side}_{knob} is not read by --{side}_optimizer={optimizer}.')


def check_decays(fv) -> None:
  """A decay of 1 where the optimizer it feeds cannot take it.

  The flags' bounds are `tff.learning`'s, [0, 1]. But TFF's Adam and Yogi
  divide their step by 1 - beta_1^t (NaN from the first step), and seed
  000's Adam (`--server_adam=seed000`) refuses beta_1 = 1 and beta_2 = 1.
  """
  for side in SIDES:
    optimizer = side_optimizer(fv, side)
    if optimizer in ('adam', 'yogi') and fv[f'{side}_beta_1'].value == 1:
      raise app.UsageError(
          f'--{side}_beta_1 must be in [0, 1) for {optimizer} (its bias '
          'correction divides by 1 - beta_1^t), got 1.0.')
  if (fv.algorithm == 'fedadam' and fv.server_adam == algorithms.SEED000_ADAM
      and fv.server_beta_2 == 1):
    raise app.UsageError('--server_beta_2 must be in [0, 1) with '
                         '--server_adam=seed000, got 1.0.')
