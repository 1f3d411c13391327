"""The record of which flags are training flags, in the order defined."""

import functools

from absl import flags

FLAGS = flags.FLAGS
DEFINED: dict[str, None] = {}  # Names of the training flags, in order.
# Recorded in config.json only when set to other than their default, so that
# run directories made before the flag existed still resume with the same
# command.
RECORDED_WHEN_SET = frozenset({'use_synthetic_data', 'proximal_strength',
                               'aggregator', 'clip', 'noise_multiplier',
                               'flops_convention'})
# Flags removed because nothing read them (the server's rate has no
# on-plateau or loss-ratio schedule), still recorded at the one value they
# could take, so that run directories made with them resume unchanged.
RETIRED = {'server_lr_window': None, 'server_lr_factor': 0.5,
           'server_lr_patience': 10}
# Flags that do not change the trained model: a restart may change them.
NOT_IN_CONFIG = frozenset(
    {'rounds', 'output_dir', 'eval_every', 'checkpoint_every', 'progress',
     'on_non_finite',
     'download_mbps', 'upload_mbps', 'minibatch_seconds', 'local_workers',
     'workers', 'group_mode', 'runtime'}
)


def _define_in(define_fn, name, *args, flag_values=FLAGS, **kwargs):
  define_fn(name, *args, flag_values=flag_values, **kwargs)
  DEFINED[name] = None


def definer(flag_values: flags.FlagValues):
  """`define(flags.DEFINE_x, name, ...)` into `flag_values`, recording the
  name as a training flag."""
  return functools.partial(_define_in, flag_values=flag_values)


def recorded(fv, task_flag_names, eval_plateaus) -> dict:
  """What defines the run, for config.json: every training flag that changes
  the trained model (and `--eval_every` when an evaluation drives a
  schedule), and the binary's own flags."""
  names = [n for n in (*DEFINED, *task_flag_names)
           if (n not in NOT_IN_CONFIG or (n == 'eval_every' and eval_plateaus))
           and not (n in RECORDED_WHEN_SET and fv[n].value == fv[n].default)]
  return {**{name: fv[name].value for name in names}, **RETIRED}
