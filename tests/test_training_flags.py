"""Every training flag reaches the experiment config, in the field it names.

`config_from_values` reads keyword values through the binaries' own flags
(`config_from_flags`), so what holds here holds for every training binary.
For each flag, `EFFECTS` gives a base setting (what the flag needs to be
read), a second value and the config fields that value must change — all
of them and only them, so a flag wired to the wrong field, or to none,
fails. `test_registry` then checks the config builds what each algorithm's
builder builds, and `test_an_optimizer_spec_reaches_the_tff_optimizer` that
every optimizer knob reaches `tff.learning.optimizers`.
"""

import dataclasses

from absl import app
from absl import flags
import numpy as np
import pytest
import tensorflow as tf

from tasks.common import registry
from tasks.common import run_config
from tasks.common import training_flags
from tff_mixed import schedules
from tff_mixed.templates import client_groups

_PT = {'algorithm': 'parallel_training'}
_ADAPTIVE = {'algorithm': 'adaptive_fed_opt'}
_DP = {'client_groups': 0, 'aggregator': 'dp', 'clip': 0.1, 'noise_multiplier': 0.0}
_COMPRESSION = {'client_groups': 0, 'aggregator': 'compression'}
_OUT = {'output_dir': None, 'root_output_dir': '/tmp/runs',
        'experiment_name': 'a'}

# flag -> (base values, the flag's value, config fields it changes).
EFFECTS = {
    # Robust aggregation acts on each client's update: not in fast mode.
    'aggregator': ({'client_groups': 0}, 'robust', {'aggregator'}),
    'algorithm': ({}, 'fedadam', {'algorithm'}),
    'beta': ({**_ADAPTIVE, 'optimizer': 'sgdm'}, 0.5, {'adaptive'}),
    'beta_1': ({**_ADAPTIVE, 'optimizer': 'adam'}, 0.5, {'adaptive'}),
    'beta_2': ({**_ADAPTIVE, 'optimizer': 'adam'}, 0.5, {'adaptive'}),
    'epsilon': ({**_ADAPTIVE, 'optimizer': 'rmsprop'}, 0.5, {'adaptive'}),
    'optimizer': (_ADAPTIVE, 'adam', {'adaptive'}),
    'central_weight': (_PT, 0.25, {'central_weight'}),
    'federated_weight': (_PT, 0.25, {'federated_weight'}),
    'num_central_steps': ({**_PT, 'num_central_steps': 2}, 3,
                          {'num_central_steps'}),
    'gradient_dissimilarity': (_PT, True, {'gradient_dissimilarity'}),
    # Not the run's: `task_runs.read` gives them as the probe to run instead
    # (tests/test_binaries.py runs one).
    'mixing_probe': (_PT, 3, set()),
    'mixing_probe_first_round': ({**_PT, 'mixing_probe': 3}, 20, set()),
    'checkpoint_every': ({}, 5, {'checkpoint_every'}),
    # Fast mode is one value, `Execution.client_groups`, read from both.
    'client_groups': ({}, 3, {'client_groups'}),
    'group_mode': ({}, 'sequential', {'client_groups'}),
    'client_shuffle': ({}, 'none', {'client_shuffle'}),
    'client_weighting': ({}, 'uniform', {'client_weighting'}),
    'clients_per_round': ({}, 5, {'clients_per_round'}),
    'clip': (_DP, 0.2, {'clip'}),
    'noise_multiplier': (_DP, 1.0, {'noise_multiplier'}),
    'dp_delta': (_DP, 1e-4, {'dp_delta'}),
    'compression_threshold': (_COMPRESSION, 100, {'compression_threshold'}),
    'compression_bits': (_COMPRESSION, 4, {'compression_bits'}),
    'download_mbps': ({}, 10.0, {'runtime_model'}),
    'upload_mbps': ({}, 10.0, {'runtime_model'}),
    'minibatch_seconds': ({}, 0.5, {'runtime_model'}),
    'eval_every': ({}, 5, {'eval_every'}),
    'train_eval_clients': ({}, 5, {'train_eval_clients'}),
    'rounds_per_eval': ({}, 5, {'eval_every'}),  # google-research's name.
    'rounds': ({}, 50, {'rounds'}),
    'total_rounds': ({}, 50, {'rounds'}),  # google-research's name.
    'output_dir': ({}, '/tmp/runs/b', {'output_dir'}),
    'experiment_name': (_OUT, 'b', {'output_dir'}),
    'root_output_dir': (_OUT, '/tmp/other', {'output_dir'}),
    'runtime': ({}, 'tff', {'runtime'}),
    'local_workers': ({}, 2, {'local_workers'}),
    'workers': ({}, 'localhost:8000', {'workers'}),
    'concurrency': ({}, 3, {'concurrency'}),
    'ray_workers': ({}, 2, {'ray_workers'}),
    'ray_address': ({}, 'localhost:6379', {'ray_address'}),
    'ray_gpus_per_worker': ({}, 0.5, {'ray_gpus_per_worker'}),
    'num_local_steps': ({}, 3, {'num_local_steps'}),
    'on_non_finite': ({}, 'skip', {'on_non_finite'}),
    'progress': ({}, False, {'progress'}),
    # Read by the binary's main instead of the others (tasks.common.binary).
    'spec_json': ({}, '/tmp/spec.json', set()),
    'proximal_strength': ({'algorithm': 'fedprox', 'proximal_strength': 0.01},
                          0.1, {'proximal_strength'}),
    'seed': ({}, 1, {'seed'}),
    'server_adam': ({'algorithm': 'fedadam'}, 'seed000',
                    {'server_adam', 'server'}),
}
# The optimizer groups: each knob with the optimizer that reads it.
for _side, _base in (('client', {}), ('server', {}), ('central', _PT),
                     ('merge', _PT)):
  EFFECTS.update({
      f'{_side}_optimizer': (_base, 'adam', {_side}),
      f'{_side}_learning_rate': (_base, 0.05, {_side}),
      f'{_side}_momentum': ({**_base, f'{_side}_optimizer': 'sgdm'}, 0.5,
                            {_side}),
      **{f'{_side}_{knob}': ({**_base, f'{_side}_optimizer': 'adam'}, 0.5,
                             {_side})
         for knob in ('beta_1', 'beta_2', 'epsilon')},
  })
# The schedule groups: each knob with the schedule that reads it. K and the
# client rate also take the on-plateau ones and their monitors.
_STARTS = {'k': 'num_local_steps', 'client_lr': 'client_learning_rate',
           'server_lr': 'server_learning_rate'}
for _prefix, _field in _STARTS.items():
  EFFECTS.update({
      f'{_prefix}_schedule': ({}, 'exponential', {_field}),
      f'{_prefix}_decay_rate': ({f'{_prefix}_schedule': 'exponential'}, 0.9,
                                {_field}),
      f'{_prefix}_offset': ({f'{_prefix}_schedule': 'inverse_time'}, 3.0,
                            {_field}),
      f'{_prefix}_exponent': ({f'{_prefix}_schedule': 'power'}, 0.5,
                              {_field}),
  })
for _prefix, _field in list(_STARTS.items())[:2]:
  _plateau = {f'{_prefix}_schedule': 'on_plateau'}
  _monitored = {**_plateau, f'{_prefix}_monitor': 'eval/accuracy',
                'eval_every': 1}
  EFFECTS.update({
      f'{_prefix}_window': ({f'{_prefix}_schedule': 'loss_ratio'}, 3,
                            {_field}),
      f'{_prefix}_factor': (_plateau, 0.25, {_field}),
      f'{_prefix}_patience': (_plateau, 3, {_field}),
      # Watching an evaluation column moves the schedule from the clients'
      # loss (in the process) to the driver's plateau.
      f'{_prefix}_monitor': ({**_plateau, 'eval_every': 1}, 'eval/loss',
                             {_field, 'eval_plateaus'}),
      f'{_prefix}_monitor_mode': (_monitored, 'max', {'eval_plateaus'}),
  })


def _config(values):
  """The algorithm's, the run's and its execution's fields the flags
  `values` give, by name."""
  return {f.name: getattr(part, f.name)
          for part in training_flags.config_from_values(values)
          for f in dataclasses.fields(part)}


def _changed(a, b):
  return {name for name in a if a[name] != b[name]}


def test_every_training_flag_is_in_the_table():
  flag_values = flags.FlagValues()
  training_flags.define_training_flags(flag_values=flag_values)
  assert set(flag_values) == set(EFFECTS)


@pytest.mark.parametrize('name', sorted(EFFECTS))
def test_a_flag_changes_the_field_it_names(name):
  base, value, fields = EFFECTS[name]
  before = _config(base)
  after = _config({**base, name: value})
  assert _changed(before, after) == fields


@pytest.mark.parametrize('prefix', sorted(_STARTS))
def test_the_schedule_knobs_give_the_values_they_say(prefix):
  """From 10, with the knob values of EFFECTS (d = 0.9, b = 3, p = 0.5), the
  first three rounds by hand."""
  expected = {'exponential': [10, 9, 8.1],
              'inverse_time': [10 / 3, 10 / 4, 10 / 5],
              'power': [10, 10 / np.sqrt(2), 10 / np.sqrt(3)]}
  knobs = {'exponential': 'decay_rate', 'inverse_time': 'offset',
           'power': 'exponent'}
  field = _STARTS[prefix]
  for name, values in expected.items():
    knob = f'{prefix}_{knobs[name]}'
    config = _config({f'{prefix}_schedule': name, knob: EFFECTS[knob][1],
                      field: 10})
    schedule = config[field]
    assert schedules.parameter_names(name) == (knobs[name],)
    np.testing.assert_allclose(schedule.values(3), values, rtol=1e-12)


@pytest.mark.parametrize('name', registry.OPTIMIZERS)
def test_an_optimizer_spec_reaches_the_tff_optimizer(name):
  """Each knob the spec reads (OPTIMIZER_HPARAMS) is the built optimizer's
  hyper-parameter of the same meaning, and the learning rate too."""
  tff_names = {'momentum': 'momentum', 'beta_1': 'beta_1',
               'beta_2': 'decay' if name == 'rmsprop' else 'beta_2',
               'epsilon': 'epsilon'}
  values = {'momentum': 0.3, 'beta_1': 0.4, 'beta_2': 0.6, 'epsilon': 0.07}
  spec = registry.OptimizerSpec(name=name, learning_rate=0.25, **values)
  state = spec.build().initialize(tf.TensorSpec([2], tf.float32))
  hparams = {k: float(v) for k, v in state.items() if np.ndim(v) == 0}
  assert hparams['learning_rate'] == pytest.approx(0.25)
  for knob in registry.OPTIMIZER_HPARAMS[name]:
    assert hparams[tff_names[knob]] == pytest.approx(values[knob]), knob
  # sgd has momentum 0 (TFF's sgdm without momentum).
  if name == 'sgd':
    assert hparams.get('momentum', 0.0) == 0.0


def test_removed_server_schedule_knobs_keep_old_runs_readable():
  """Run directories made while --server_lr_window/factor/patience existed
  recorded their only values; such a config.json still reads as its run."""
  spec = training_flags.spec_from_flag_record({
      'task': 'digits', 'server_lr_window': None, 'server_lr_factor': 0.5,
      'server_lr_patience': 10, 'num_local_steps': 3})
  assert spec.algorithm.num_local_steps == 3
  assert spec.algorithm == training_flags.config_from_values(
      {'num_local_steps': 3})[0]


def test_fast_mode_is_one_value_with_one_default():
  """The flags read fast mode into `Execution.client_groups`, a
  `ClientGroups` (None with --client_groups=0), whose default is the run's
  default, `client_groups.DEFAULT`."""
  assert run_config.Execution().client_groups == client_groups.DEFAULT
  assert _config({})['client_groups'] == client_groups.DEFAULT
  assert _config({'client_groups': 3, 'group_mode': 'sequential'}
                 )['client_groups'] == client_groups.ClientGroups(
                     3, client_groups.SEQUENTIAL)
  assert _config({'client_groups': 0})['client_groups'] is None
  with pytest.raises(app.UsageError, match=(
      r'^--group_mode=sequential is how fast mode trains a group; this run '
      r'is in faithful mode')):
    _config({'client_groups': 0, 'group_mode': 'sequential'})
