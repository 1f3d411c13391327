"""The algorithm and run read from flags once, and the algorithm registry."""

import dataclasses
import json

from absl import app
from absl import flags
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tasks.common import binary
from tasks.common import parts
from tasks.common import registry
from tasks.common import run as run_lib
from tasks.common import run_config
from tasks.common import run_spec
from tasks.common import training_flags
from tests import linear
from tff_mixed import aggregators as tff_mixed_aggregators
from tff_mixed import algorithms
from tff_mixed import driver
from tff_mixed import group_data
from tff_mixed import optimizers
from tff_mixed import schedules
from tff_mixed.algorithms import mixed_fl
from tff_mixed.templates import client_groups


def _config(*argv):
  """`config_from_flags` over a fresh set of the training flags: the
  algorithm, the run and its execution."""
  flag_values = flags.FlagValues()
  training_flags.define_training_flags(flag_values=flag_values)
  flag_values(['prog', '--output_dir=/nonexistent/never_written', *argv])
  return training_flags.config_from_flags(flag_values=flag_values)


def _algorithm(*argv):
  return _config(*argv)[0]


def _recorded(config):
  """What config.json records of a digits run of `config` (the algorithm,
  the run and its execution) as what it trains."""
  return run_spec.record(_spec(config))['spec']


def _spec(config):
  """A digits run of `config` (the algorithm, the run and its execution)."""
  algorithm, run, execution = config
  return run_spec.RunSpec('digits', algorithm=algorithm, run=run,
                          execution=execution)


def test_config_reads_every_group_once():
  config = _config(
      '--algorithm=two_way_gradient_transfer', '--num_local_steps=4',
      '--k_schedule=exponential', '--k_decay_rate=0.5',
      '--client_learning_rate=0.2', '--server_optimizer=sgdm',
      '--server_momentum=0.5', '--central_weight=0.3', '--seed=7')
  algorithm, run, _ = config
  assert algorithm.algorithm == 'two_way_gradient_transfer'
  assert algorithm.num_local_steps == schedules.exponential_decay(4, 0.5)
  assert algorithm.client_learning_rate is None  # A constant rate.
  assert algorithm.client == registry.OptimizerSpec('sgd', 0.2)
  assert (algorithm.server.name, algorithm.server.momentum) == ('sgdm', 0.5)
  assert (algorithm.central_weight, run.seed) == (0.3, 7)
  # What defines the run is recorded as the spec; how it executes beside
  # it (never compared on resume); where it is written, not at all.
  record = run_spec.record(_spec(config))
  assert record['spec']['run']['seed'] == 7
  assert not set(run_config.EXECUTION) & set(record['spec']['run'])
  assert 'execution' not in record['spec']
  assert record['execution']['rounds'] == 100
  assert set(record['execution']) == set(run_config.EXECUTION) - {
      'output_dir'}
  with pytest.raises(dataclasses.FrozenInstanceError):
    run.seed = 1


@pytest.mark.parametrize('argv, message', [
    (['--algorithm=fed_gbo', '--optimizer=adam', '--beta=0.5'],
     '--optimizer=adam takes --beta_1, --beta_2, --epsilon, not --beta.'),
    (['--algorithm=fedavg', '--optimizer=rmsprop'],
     '--optimizer only apply to --algorithm=adaptive_fed_opt/fed_gbo/mimelite'
     '/mfl.'),
    (['--algorithm=mfl', '--client_optimizer=adam'],
     '--algorithm=mfl runs --optimizer on the clients; drop '
     '--client_optimizer.'),
    (['--algorithm=mimelite', '--beta=1.0'],
     '--beta must be in [0, 1), got 1.0.'),
    (['--algorithm=fed_gbo', '--server_learning_rate=0.5'],
     '--algorithm=fed_gbo has no server learning rate; drop '
     '--server_learning_rate.'),
    (['--k_schedule=exponential', '--k_decay_rate=0'],
     '--k_decay_rate must be a finite number > 0, got 0.0.'),
    (['--client_lr_schedule=power', '--client_learning_rate=0'],
     '--client_learning_rate must be a finite number > 0, got 0.0.'),
    (['--algorithm=parallel_training', '--server_lr_schedule=exponential'],
     '--server_lr_schedule=exponential is for --algorithm=fedavg/fedadam/'
     'adaptive_fed_opt; parallel_training does not take a server '
     'learning-rate schedule.'),
    (['--server_lr_schedule=on_plateau'],
     '--server_lr_schedule=on_plateau reads the client loss, which the '
     'server step does not see; use exponential, inverse_time or power.'),
    (['--server_lr_schedule=exponential', '--server_lr_decay_rate=0'],
     '--server_lr_decay_rate must be a finite number > 0, got 0.0.'),
    (['--algorithm=oracle', '--server_learning_rate=0.5'],
     '--algorithm=oracle is centralised SGD at the client learning rate; drop '
     '--server_learning_rate.'),
    (['--algorithm=fedavg', '--server_adam=seed000'],
     '--server_adam=seed000 is for --algorithm=fedadam, not fedavg.'),
    (['--k_monitor=eval/loss'],
     '--k_monitor=eval/loss is for --k_schedule=on_plateau, not constant.'),
    (['--k_schedule=on_plateau', '--k_monitor=loss'],
     "--k_monitor must be train_loss or an evaluation column eval/<metric> "
     "or validation/<metric> (e.g. validation/loss), got 'loss'."),
    (['--client_lr_monitor_mode=max'],
     '--client_lr_monitor_mode is for --client_lr_monitor=eval/...; '
     '--client_lr_monitor=train_loss is a loss.'),
    (['--k_schedule=on_plateau', '--k_monitor=eval/loss', '--eval_every=0'],
     '--k_monitor=eval/loss needs --eval_every >= 1.'),
    (['--algorithm=parallel_training', '--mixing_probe=2',
      '--k_schedule=on_plateau', '--k_monitor=eval/loss'],
     '--mixing_probe runs at K = 1 without evaluation; drop --k_monitor.'),
    # A flag nothing reads is refused rather than ignored.
    (['--k_schedule=exponential', '--k_exponent=0.5'],
     '--k_exponent is not read by --k_schedule=exponential (it takes '
     '--k_decay_rate).'),
    (['--client_lr_decay_rate=0.5'],
     '--client_lr_decay_rate is not read by --client_lr_schedule=constant (it '
     'takes no parameter).'),
    (['--server_lr_schedule=power', '--server_lr_offset=3'],
     '--server_lr_offset is not read by --server_lr_schedule=power (it '
     'takes --server_lr_exponent).'),
    (['--algorithm=fedavg', '--central_learning_rate=0.5'],
     '--central_learning_rate is for the mixed FL algorithms, not '
     '--algorithm=fedavg.'),
    (['--algorithm=fedadam', '--central_weight=0.5'],
     '--central_weight is for the mixed FL algorithms, not --algorithm=fedadam.'),
    (['--client_momentum=0.5'],
     '--client_momentum is not read by --client_optimizer=sgd.'),
    (['--algorithm=fedadam', '--server_momentum=0.5'],
     '--server_momentum is not read by --server_optimizer=adam.'),
    (['--algorithm=fedprox'],
     '--algorithm=fedprox needs --proximal_strength (mu, e.g. 0.01).'),
    (['--proximal_strength=0.1'],
     '--proximal_strength is for --algorithm=fedprox, not --algorithm=fedavg.'),
    (['--clip=1'], '--clip only apply to --aggregator=dp.'),
    (['--compression_bits=4', '--compression_threshold=10'],
     '--compression_threshold, --compression_bits only apply to '
     '--aggregator=compression.'),
    (['--aggregator=dp', '--clip=1'],
     '--aggregator=dp needs --noise_multiplier.'),
    (['--aggregator=dp', '--clip=0', '--noise_multiplier=1'],
     '--clip must be > 0 with --aggregator=dp.'),
    (['--aggregator=dp', '--clip=1', '--noise_multiplier=1',
      '--client_weighting=examples'],
     '--client_weighting=examples cannot be used with --aggregator=dp, whose '
     'mean is unweighted (clipped updates summed, noised and divided by '
     '--clients_per_round).'),
    (['--aggregator=dp', '--clip=1', '--noise_multiplier=1',
      '--algorithm=mimelite'],
     '--aggregator=dp cannot make --algorithm=mimelite private: its clients '
     'upload more than the clipped update.'),
    (['--aggregator=robust'],
     "--aggregator=robust acts on each client's update: give "
     '--client_groups=0 (one TFF client per client; fast mode sends each '
     "group's mean)."),
    (['--aggregator=compression', '--client_groups=0',
      '--algorithm=two_way_gradient_transfer'],
     '--aggregator=compression cannot be used with '
     '--algorithm=two_way_gradient_transfer: its inferred federated gradient '
     'sums the raw client updates outside the aggregator.'),
])
def test_bad_flags_are_one_line_usage_errors(argv, message):
  with pytest.raises(app.UsageError) as error:
    _config(*argv)
  assert str(error.value) == message


@pytest.mark.parametrize('flag', [
    '--client_learning_rate=nan', '--server_learning_rate=inf',
    '--federated_weight=nan', '--k_decay_rate=nan', '--upload_mbps=inf'])
def test_non_finite_float_flags_are_refused(flag):
  """(absl's bounds let NaN through; every float flag also gets a finite
  check.)"""
  with pytest.raises(flags.IllegalFlagValueError,
                     match=f'flag {flag}: must be a finite number'):
    _config(flag)


def test_k_past_int32_state_is_refused_at_parsing():
  with pytest.raises(flags.IllegalFlagValueError,
                     match=r'^flag --num_local_steps=1073741825: must be an '
                     r'integer in \[1, 1073741824\]\.$'):
    _config('--num_local_steps=1073741825')


def test_missing_central_data_names_the_flag_that_gives_it():
  algorithm, run, _ = _config('--algorithm=parallel_training')
  spec = run_spec.RunSpec('quadratic', algorithm=algorithm, run=run)
  with pytest.raises(app.UsageError) as error:
    binary.run_task(spec, central_data_flags='--client_labels')
  assert str(error.value) == ('--algorithm=parallel_training needs central '
                              'data, which this task gets with '
                              '--client_labels.')


def test_a_flag_the_binary_reads_itself_is_not_unused():
  flag_values = flags.FlagValues()
  training_flags.define_training_flags(flag_values=flag_values)
  flag_values(['prog', '--output_dir=/nonexistent/never_written',
               '--algorithm=fedavg', '--central_weight=0.3'])
  algorithm, *_ = training_flags.config_from_flags(
      flag_values=flag_values, also_read=('central_weight',))
  assert algorithm.central_weight == 0.3


def test_a_flag_a_schedule_reads_is_accepted():
  config = _algorithm('--k_schedule=exponential', '--k_decay_rate=0.5',
                      '--client_optimizer=sgdm', '--client_momentum=0.5',
                      '--algorithm=fedadam', '--server_epsilon=1e-4')
  assert config.num_local_steps == schedules.exponential_decay(10, 0.5)
  assert config.client.momentum == 0.5 and config.server.epsilon == 1e-4


def test_server_schedule_and_seed000_adam_from_flags():
  config = _algorithm('--algorithm=fedadam', '--server_adam=seed000',
                      '--server_lr_schedule=exponential',
                      '--server_lr_decay_rate=0.9996')
  # Seed 000 App. B: eta_0 = 0.3 (fedadam's default), d = 0.9996; Adam's
  # b2 = 0.999 and eps = 1e-8 unless given.
  assert config.server_learning_rate == schedules.exponential_decay(0.3, 0.9996)
  assert (config.server_adam, config.server.beta_2, config.server.epsilon) == (
      'seed000', 0.999, 1e-8)
  assert _algorithm('--algorithm=fedadam', '--server_adam=seed000',
                    '--server_epsilon=1e-3').server.epsilon == 1e-3
  assert _algorithm('--server_learning_rate=0.5', '--server_lr_schedule=power'
                    ).server_learning_rate == schedules.power_decay(0.5, 0.25)


def test_plateau_on_the_evaluation_from_flags():
  """Seed 001 §3.5's K-step on the validation error: K stays a constant in
  the process and the driver decays it; eval_every now defines the run."""
  config = _config('--num_local_steps=8', '--k_schedule=on_plateau',
                   '--k_factor=0.5', '--k_patience=2', '--k_monitor=eval/loss',
                   '--client_lr_schedule=on_plateau', '--client_lr_patience=3',
                   '--client_lr_monitor=eval/sparse_categorical_accuracy',
                   '--client_lr_monitor_mode=max', '--eval_every=5')
  algorithm, run, execution = config
  assert algorithm.num_local_steps == 8
  assert algorithm.client_learning_rate is None
  assert run.eval_plateaus == (
      driver.EvalPlateau(schedules.on_plateau(8, 0.5, 2),
                         hparam='num_local_steps', metric='eval/loss'),
      driver.EvalPlateau(schedules.on_plateau(0.1, 0.5, 3),
                         hparam='learning_rate',
                         metric='eval/sparse_categorical_accuracy',
                         mode='max'))
  # With an evaluation monitor, when the model is evaluated changes
  # training, so a resume compares it; without one, it does not.
  spec = _spec(config)
  every_6 = dataclasses.replace(spec, execution=dataclasses.replace(
      execution, eval_every=6))
  assert execution.eval_every == 5
  assert run_spec.difference(spec, every_6) == (
      'spec.execution.eval_every', 5, 6)
  # Plateaus dropped: that is the difference, whatever the cadence.
  assert run_spec.difference(spec, dataclasses.replace(
      every_6, run=dataclasses.replace(run, eval_plateaus=())))[0] == (
          'spec.run.eval_plateaus')
  unmonitored = _spec(_config('--k_schedule=on_plateau', '--eval_every=5'))
  assert run_spec.difference(unmonitored, dataclasses.replace(
      unmonitored, execution=every_6.execution)) is None
  # The training-loss reading stays in the process.
  assert _algorithm('--k_schedule=on_plateau', '--k_patience=2'
                    ).num_local_steps == schedules.on_plateau(10, 0.5, 2)


def _central():
  return linear.dataset(*linear.CLIENT_B)


def _sgd(lr):
  return tff.learning.optimizers.build_sgdm(learning_rate=lr)


def _statistics(builder):
  return lambda: builder(
      linear.model_fn, optimizers.build_tff_optimizer(
          optimizers.get('adam'), 0.1, frozen_statistics=False),
      num_local_steps=2)


def _mixed(mixing):
  return lambda: algorithms.build_mixed_fl(
      linear.model_fn, _sgd(0.1), _sgd(1.0), central_data_fn=_central,
      mixing=mixing, num_local_steps=2, merge_optimizer_fn=_sgd(1.0),
      federated_weight=0.5, central_weight=0.5)


# Each registry entry as the builder it documents, called directly: client
# SGD at 0.1, K = 2, every other argument the builder's (or the config's
# documented) default.
DIRECT = {
    'fedavg': lambda: algorithms.build_fed_avg(
        linear.model_fn, _sgd(0.1), _sgd(1.0), num_local_steps=2),
    'fedprox': lambda: algorithms.build_fed_prox(
        linear.model_fn, _sgd(0.1), _sgd(1.0), proximal_strength=0.1,
        num_local_steps=2),
    'fedadam': lambda: algorithms.build_fed_adam(
        linear.model_fn, _sgd(0.1), num_local_steps=2, beta_1=0.9,
        beta_2=0.99, epsilon=1e-3),
    'adaptive_fed_opt': lambda: algorithms.build_adaptive_fed_opt(
        linear.model_fn, _sgd(0.1), optimizer=optimizers.get('adam'),
        num_local_steps=2),
    'fed_gbo': _statistics(algorithms.build_fed_gbo),
    'mimelite': _statistics(algorithms.build_mimelite),
    'mfl': _statistics(algorithms.build_mfl),
    'oracle': lambda: algorithms.build_fed_avg(
        linear.model_fn, _sgd(0.1), num_local_steps=2),
    **{mixing: _mixed(mixing) for mixing in mixed_fl.MIXINGS},
}


@pytest.mark.parametrize('name', registry.NAMES)
def test_every_algorithm_is_its_builder(name):
  """Each registry entry trains what its builder trains: one round from the
  same start, the same weights."""
  assert set(DIRECT) == set(registry.NAMES)
  entry = registry.ALGORITHMS[name]
  config = registry.AlgorithmConfig(
      algorithm=name, num_local_steps=2,
      client=registry.OptimizerSpec(learning_rate=0.1),
      adaptive=optimizers.get('adam') if entry.takes_seed003_optimizer else None,
      proximal_strength=0.1 if name == 'fedprox' else None)
  process = registry.build_process(config, linear.model_fn,
                                   central_data_fn=_central)
  assert isinstance(process, tff.learning.templates.LearningProcess)
  _assert_same_round(process, DIRECT[name]())


def test_a_mixing_without_central_data_is_an_error_naming_it():
  with pytest.raises(ValueError, match='parallel_training needs central data'):
    registry.build_process(
        registry.AlgorithmConfig(algorithm='parallel_training'),
        linear.model_fn)


def test_registry_fedavg_is_build_fed_avg():
  config = registry.AlgorithmConfig(
      algorithm='fedavg', num_local_steps=3,
      client=registry.OptimizerSpec(learning_rate=0.1),
      server=registry.OptimizerSpec(learning_rate=0.5))
  sgd = tff.learning.optimizers.build_sgdm
  _assert_same_round(registry.build_process(config, linear.model_fn),
                     algorithms.build_fed_avg(linear.model_fn, sgd(0.1),
                                              sgd(0.5), num_local_steps=3))


def _assert_same_round(process, direct):
  """One round of each from its initial state gives the same weights."""
  data = [linear.dataset(*linear.CLIENT_A), linear.dataset(*linear.CLIENT_B)]
  weights = []
  for p in (process, direct):
    state = p.next(p.initialize(), data).state
    weights.append(p.get_model_weights(state).trainable)
  for a, b in zip(*weights):
    np.testing.assert_array_equal(a, b)


def test_fedprox_from_flags_is_build_fed_prox():
  config = _config('--algorithm=fedprox', '--proximal_strength=0.5',
                   '--num_local_steps=3', '--client_learning_rate=0.1')
  assert config[0].proximal_strength == 0.5
  assert _recorded(config)['algorithm']['proximal_strength'] == 0.5
  sgd = tff.learning.optimizers.build_sgdm
  _assert_same_round(registry.build_process(config[0], linear.model_fn),
                     algorithms.build_fed_prox(
                         linear.model_fn, sgd(0.1), sgd(1.0),
                         proximal_strength=0.5, num_local_steps=3))


DP = ('--aggregator=dp', '--clip=0.05', '--noise_multiplier=0')


@pytest.mark.parametrize('algorithm', [
    'fedavg', 'fedadam', 'fedprox', 'adaptive_fed_opt', 'fed_gbo',
    'parallel_training', 'one_way_gradient_transfer', 'oracle'])
def test_every_algorithm_that_takes_dp_takes_it_from_flags(algorithm):
  """--aggregator=dp reaches the algorithm's aggregation: the model after
  a round moves with --noise_multiplier (the noise is drawn from the seed,
  so zero noise and a large one give different models; zero noise, where
  the FedAvg step is the mean of clipped updates, moves FedAvg by at most
  --clip)."""
  extra = {'fedprox': ['--proximal_strength=0.1'],
           'adaptive_fed_opt': ['--optimizer=sgdm'],
           'fed_gbo': ['--optimizer=sgdm']}.get(algorithm, [])
  data = [linear.dataset(*linear.CLIENT_A), linear.dataset(*linear.CLIENT_B)]
  moved = {}
  for noise in ('0', '1000'):
    config = _config(f'--algorithm={algorithm}', '--aggregator=dp',
                     '--clip=0.05', f'--noise_multiplier={noise}', *extra,
                     '--num_local_steps=3', '--client_learning_rate=0.5',
                     '--clients_per_round=2', '--client_groups=0')
    assert _recorded(config)['algorithm']['aggregator'] == 'dp'
    process = registry.build_process(
        config[0], linear.model_fn,
        central_data_fn=lambda: linear.dataset(*linear.CLIENT_B),
        client_groups=None, clients_per_round=2)
    start = process.initialize()
    state = process.next(start, data).state
    moved[noise] = np.concatenate([
        (np.asarray(a) - np.asarray(b)).ravel() for a, b in zip(
            process.get_model_weights(state).trainable,
            process.get_model_weights(start).trainable)])
  assert np.all(np.isfinite(moved['0']))
  assert np.linalg.norm(moved['1000'] - moved['0']) > 1e-2, algorithm
  if algorithm in ('fedavg', 'fedprox', 'oracle'):
    assert 0 < np.linalg.norm(moved['0']) <= 0.05 + 1e-6


def test_dp_from_flags_is_gaussian_fixed_and_says_its_epsilon():
  config = _config('--aggregator=dp', '--clip=0.05', '--noise_multiplier=1.5',
                   '--clients_per_round=2', '--rounds=20', '--seed=3')
  sgd = tff.learning.optimizers.build_sgdm
  direct = algorithms.build_fed_avg(
      linear.model_fn, sgd(0.1), sgd(1.0), num_local_steps=10,
      model_aggregator=tff_mixed_aggregators.gaussian_fixed(1.5, 2, 0.05,
                                                            seed=3))
  data = [linear.dataset(*linear.CLIENT_A), linear.dataset(*linear.CLIENT_B)]
  weights = []
  for process in (registry.build_process(
      config[0], linear.model_fn,
      client_groups=client_groups.ClientGroups(2), seed=3,
      clients_per_round=2), direct):
    data_in = (group_data.group_datasets(data, 2)
               if client_groups.takes_groups(process) else data)
    state = process.next(process.initialize(), data_in).state
    weights.append(process.get_model_weights(state).trainable)
  for a, b in zip(*weights):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
  line = run_lib.dp_summary(config[0], config[1].clients_per_round,
                            config[2].rounds, clients=10)
  epsilon = tff_mixed_aggregators.epsilon(1.5, 0.2, 20, 0.1)
  assert line == (f'DP-FedAvg: clip 0.05, noise multiplier 1.5, 2 of 10 '
                  f'clients a round: epsilon ~= {epsilon:.3g} at delta = 1/10 '
                  'after 20 rounds (client-level; RDP accountant, cohorts taken '
                  'as Poisson samples; metrics.csv has dp/epsilon for each '
                  'round).')
  assert 0.5 < epsilon < 2  # z = 1.5 over 20 rounds at q = 0.2.
  assert tff_mixed_aggregators.epsilon(0.0, 0.2, 20, 0.1) == float('inf')
  # Each round's running epsilon: the accountant composed that many rounds.
  columns = tff_mixed_aggregators.epsilon_columns(1.5, 0.2, 0.1)
  for rounds in (1, 7, 20):
    assert columns(rounds) == {
        'dp/epsilon': pytest.approx(tff_mixed_aggregators.epsilon(
            1.5, 0.2, rounds, 0.1), rel=1e-12), 'dp/delta': 0.1}
  assert columns(7)['dp/epsilon'] < columns(20)['dp/epsilon']
  assert tff_mixed_aggregators.epsilon_columns(0.0, 0.2, 0.1)(3) == {
      'dp/epsilon': float('inf'), 'dp/delta': 0.1}


def test_per_client_aggregators_from_flags_run_faithfully():
  for name in ('robust', 'compression'):
    config = _config(f'--aggregator={name}', '--client_groups=0')
    process = registry.build_process(config[0], linear.model_fn)
    data = [linear.dataset(*linear.CLIENT_A), linear.dataset(*linear.CLIENT_B)]
    state = process.next(process.initialize(), data).state
    assert np.all(np.isfinite(process.get_model_weights(state).trainable[0]))


def test_compression_that_compresses_nothing_says_so():
  """TFF quantises only tensors above 20,000 elements: the linear model's
  (2 and 1) and digits' MLP (64 x 32 = 2,048 the largest) are all below;
  --compression_threshold=1000 compresses the MLP's first layer."""
  assert run_lib.compression_note(linear.model_fn, 20_000) == (
      'Note: --aggregator=compression quantises only tensors of more than '
      "20,000 elements (--compression_threshold); this model's largest has "
      "2, so nothing is compressed: the run is --aggregator=robust's and its "
      'uploads are full size.')
  from tasks.digits import task as digits_task  # pylint: disable=g-import-not-at-top
  mlp = digits_task.model_fn_for(32)
  assert 'largest has 2,048,' in run_lib.compression_note(mlp, 20_000)
  assert run_lib.compression_note(mlp, 2_048) is not None
  assert run_lib.compression_note(mlp, 2_047) is None
  # A model with one tensor of 20,001 elements is compressed: no note.
  assert run_lib.compression_note(lambda: tff.learning.models.from_keras_model(
      tf.keras.Sequential([tf.keras.layers.InputLayer(input_shape=(20001,)),
                           tf.keras.layers.Dense(1, use_bias=False)]),
      loss=tf.keras.losses.MeanSquaredError(),
      input_spec=(tf.TensorSpec([None, 20001]), tf.TensorSpec([None, 1]))),
                                  20_000) is None


def test_compression_flags_reach_the_aggregator():
  """--compression_threshold / --compression_bits are the aggregator's (the
  defaults TFF's); without --aggregator=compression they are refused."""
  config = registry.AlgorithmConfig(aggregator='compression')
  assert parts.compression_settings(config) == (20_000, 8)
  config = dataclasses.replace(config, compression_threshold=100,
                               compression_bits=4)
  assert parts.compression_settings(config) == (100, 4)


def test_google_research_federated_flag_names_are_accepted():
  """Their trainers' --total_rounds, --rounds_per_eval and --root_output_dir
  with --experiment_name mean our --rounds, --eval_every and --output_dir,
  and count as given (a preset does not override them)."""
  flag_values = flags.FlagValues()
  training_flags.define_training_flags(flag_values=flag_values)
  flag_values(['prog', '--total_rounds=7', '--rounds_per_eval=3',
               '--root_output_dir=/nonexistent/root', '--experiment_name=e1'])
  *_, execution = training_flags.config_from_flags(flag_values=flag_values)
  assert (execution.rounds, execution.eval_every, execution.output_dir) == (
      7, 3, '/nonexistent/root/e1')
  assert flag_values['rounds'].present and flag_values['eval_every'].present


@pytest.mark.parametrize('argv', [
    [], ['--root_output_dir=/r'], ['--experiment_name=e'],
    ['--output_dir=/o', '--experiment_name=e']])
def test_output_dir_or_root_and_experiment_name(argv):
  flag_values = flags.FlagValues()
  training_flags.define_training_flags(flag_values=flag_values)
  flag_values(['prog', *argv])
  with pytest.raises(app.UsageError,
                     match='^give --output_dir, or --root_output_dir with '
                     '--experiment_name.$'):
    training_flags.config_from_flags(flag_values=flag_values)


def test_your_own_optimizers_and_aggregator_from_code():
  """`AlgorithmConfig` takes `tff.learning` optimizers and a
  `tff.aggregators` factory of your own: the same round as the names give,
  exactly; recorded as code-only; an algorithm that reads an optimizer's
  hyper-parameters refuses an object in one line."""
  named = dataclasses.replace(
      registry.AlgorithmConfig(), num_local_steps=2,
      client=registry.OptimizerSpec('sgd', 0.1),
      server=registry.OptimizerSpec('sgdm', 0.5, momentum=0.9))
  own = dataclasses.replace(
      named, client=tff.learning.optimizers.build_sgdm(0.1),
      server=tff.learning.optimizers.build_sgdm(0.5, momentum=0.9),
      aggregator=tff.aggregators.MeanFactory(no_nan_division=True))
  data = [linear.dataset(*linear.CLIENT_A), linear.dataset(*linear.CLIENT_B)]
  weights = []
  start = None
  for config in (named, own):
    process = registry.build_process(config, linear.model_fn)
    state = process.initialize()
    start = start or process.get_model_weights(state)
    state = process.next(process.set_model_weights(state, start), data).state
    weights.append(process.get_model_weights(state).trainable)
  for a, b in zip(*weights, strict=True):
    np.testing.assert_array_equal(a, b)
  spec = run_spec.RunSpec('digits', algorithm=own)
  recorded = run_spec.record(spec)['spec']['algorithm']
  assert list(recorded['client']) == ['__code_only__']
  assert recorded['aggregator'] == {'__code_only__': (
      'tensorflow_federated.python.aggregators.mean.MeanFactory')}
  assert run_spec.record(spec) == run_spec.record(dataclasses.replace(
      spec, algorithm=dataclasses.replace(
          own, client=tff.learning.optimizers.build_sgdm(0.1))))
  with pytest.raises(ValueError, match=(
      r'^run spec: spec\.algorithm\.aggregator is an object given in code '
      r'\(tensorflow_federated\.python\.aggregators\.mean\.MeanFactory\), '
      r'which a spec records by type only: build the run in code, passing '
      r'the same object again\.$')):
    run_spec.RunSpec.from_json(json.dumps(run_spec.record(
        dataclasses.replace(spec, algorithm=dataclasses.replace(
            own, client=named.client, server=named.server)))))
  with pytest.raises(ValueError, match=(
      r"^fedadam reads its server optimizer's hyper-parameters, so it must "
      r'be an OptimizerSpec, got an? \w+\.$')):
    registry.build_process(dataclasses.replace(own, algorithm='fedadam'),
                           linear.model_fn)


def test_run_config_moved_says_where():
  with pytest.raises(AttributeError, match=(
      r'^tasks\.common\.registry\.RunConfig moved to '
      r'tasks\.common\.run_config\.RunConfig, and how a run executes')):
    registry.RunConfig  # pylint: disable=pointless-statement
