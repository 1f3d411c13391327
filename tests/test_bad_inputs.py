"""Bad inputs give one line naming the argument, at build time (issue 19).

Each error is raised before TFF traces anything (the model is never built),
with the exact message asserted here.
"""

import re

from absl import app
from absl import flags
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tasks.common import training_flags
from tests import linear
from tests import runs
from tests import table_model
from tff_mixed import algorithms
from tff_mixed import checks
from tff_mixed import optimizers
from tff_mixed.algorithms import mixed_fl
from tff_mixed.task import Task

sgd = tff.learning.optimizers.build_sgdm
CENTRAL = ([[0.5, 0.5], [1.0, -1.0]], [1.0, -0.5])


def exactly(message):
  """A `pytest.raises(match=...)` pattern matching all of `message`."""
  return f'^{re.escape(message)}$'


class CountingModelFn:
  """`linear.model_fn` that counts the models built (0: nothing traced)."""

  def __init__(self):
    self.calls = 0

  def __call__(self):
    self.calls += 1
    return linear.model_fn()


def central_data():
  return linear.dataset(*CENTRAL)


def build_mixed(model_fn=linear.model_fn, **kwargs):
  kwargs.setdefault('client_optimizer_fn', sgd(0.1))
  kwargs.setdefault('central_data_fn', central_data)
  kwargs.setdefault('mixing', mixed_fl.PARALLEL_TRAINING)
  kwargs.setdefault('num_local_steps', 1)
  return algorithms.build_mixed_fl(model_fn, **kwargs)


# ------------------------------------------ 1. a dataset, not a dataset function
EAGER_DATASET = linear.dataset(*CENTRAL)


def client_dataset(cid):
  del cid
  return central_data()


@pytest.mark.parametrize('central_data_fn, message', [
    (EAGER_DATASET,
     'central_data_fn must be a no-argument function returning a '
     'tf.data.Dataset, got a _BatchDataset; pass a function that builds the '
     'dataset when called, e.g. '
     '`lambda: tf.data.Dataset.from_tensor_slices(...)`.'),
    ([1.0, 2.0],
     'central_data_fn must be a no-argument function returning a '
     'tf.data.Dataset, got a list.'),
    (client_dataset,
     'central_data_fn must be a no-argument function returning a '
     'tf.data.Dataset, got client_dataset(cid), which needs arguments.'),
])
def test_central_data_fn_must_be_a_no_argument_function(central_data_fn,
                                                        message):
  model_fn = CountingModelFn()
  with pytest.raises(TypeError, match=exactly(message)):
    build_mixed(model_fn, central_data_fn=central_data_fn)
  assert model_fn.calls == 0


def test_task_dataset_functions_must_be_functions():
  kwargs = dict(name='linear', model_fn=linear.model_fn,
                train_client_ids=['a'])
  with pytest.raises(TypeError, match=exactly(
      'train_dataset_fn must be a function of a client id returning a '
      'tf.data.Dataset, got a _BatchDataset; pass a function that builds the '
      'dataset when called.')):
    Task(train_dataset_fn=EAGER_DATASET, **kwargs)
  with pytest.raises(TypeError, match=exactly(
      'eval_dataset_fn must be a no-argument function returning a '
      'tf.data.Dataset or a mapping of them, got a _BatchDataset; pass a '
      'function that builds the dataset when called, e.g. '
      '`lambda: tf.data.Dataset.from_tensor_slices(...)`.')):
    Task(train_dataset_fn=client_dataset, eval_dataset_fn=EAGER_DATASET,
         **kwargs)
  with pytest.raises(TypeError, match=exactly(
      'train_dataset_fn must return a tf.data.Dataset, got a list.')):
    Task(train_dataset_fn=lambda cid: [cid], **kwargs)


# ---------------------------- 2. a function returning what TFF cannot trace
EAGER_X = tf.constant(CENTRAL[0])


@pytest.mark.parametrize('central_data_fn, error, message', [
    (lambda: EAGER_DATASET, ValueError,
     'central_data_fn returned a dataset built outside the function (it '
     'captures an eager tensor, and TFF traces central_data_fn into its own '
     'graph); build the dataset inside central_data_fn.'),
    (lambda: tf.data.Dataset.from_tensor_slices(
        dict(x=EAGER_X, y=np.array(CENTRAL[1], np.float32)[:, None])).batch(2),
     ValueError,
     'central_data_fn builds its dataset from a tensor created outside the '
     'function (it captures an eager tensor, and TFF traces central_data_fn '
     'into its own graph); create the tensors inside central_data_fn, or pass '
     'NumPy arrays.'),
    (lambda: CENTRAL, TypeError,
     'central_data_fn must return a tf.data.Dataset, got a tuple.'),
])
def test_central_data_fn_must_build_its_dataset(central_data_fn, error,
                                                message):
  model_fn = CountingModelFn()
  with pytest.raises(error, match=exactly(message)) as raised:
    build_mixed(model_fn, central_data_fn=central_data_fn)
  error = raised.value  # No TF traceback chained below the line.
  assert error.__cause__ is None and (error.__context__ is None
                                      or error.__suppress_context__)
  assert model_fn.calls == 0


def test_dataset_fn_element_spec_of_a_good_function():
  spec = checks.dataset_fn_element_spec(central_data, 'central_data_fn')
  assert spec == EAGER_DATASET.element_spec


# ----------------------------- 3. 2-way Gradient Transfer needs plain SGD
TWO_WAY_NEEDS_SGD = (
    'client_optimizer_fn must be plain SGD (tff.learning.optimizers.'
    'build_sgdm without momentum): 2-way Gradient Transfer infers the '
    "federated gradient from the clients' updates as if every client step "
    'were an SGD step of the client learning rate (seed 004 Alg. 1, App. '
    'A.2).')
NOT_PLAIN_SGD = {
    'sgdm': sgd(0.1, momentum=0.9),
    'adam': tff.learning.optimizers.build_adam(0.1),
    'seed003_sgdm': optimizers.build_sgdm(0.1, beta=0.9),
}


@pytest.mark.parametrize('name', list(NOT_PLAIN_SGD))
def test_two_way_gradient_transfer_refuses_other_client_optimizers(name):
  model_fn = CountingModelFn()
  with pytest.raises(ValueError, match=exactly(TWO_WAY_NEEDS_SGD)):
    build_mixed(model_fn, client_optimizer_fn=NOT_PLAIN_SGD[name],
                mixing=mixed_fl.TWO_WAY_GRADIENT_TRANSFER)
  assert model_fn.calls == 0


def test_selected_rows_two_way_refuses_other_client_optimizers():
  with pytest.raises(ValueError, match=exactly(TWO_WAY_NEEDS_SGD)):
    algorithms.build_selected_rows_mixed_fl(
        table_model.TableModel, NOT_PLAIN_SGD['sgdm'],
        row_ids_fn=table_model.row_ids, central_loss_fn=lambda m, b: 0.0,
        mixing=mixed_fl.TWO_WAY_GRADIENT_TRANSFER, num_local_steps=1,
        max_rows_per_client=1)


def _two_rounds(process):
  clients = [linear.dataset(*linear.CLIENT_A), linear.dataset(*linear.CLIENT_B)]
  state = runs.rounds(process, clients, 2)[-1].state
  return [np.asarray(w) for w in process.get_model_weights(state).trainable]


def test_other_mixings_and_sgd_without_momentum_are_accepted():
  # One-way GT adds g_c to each step and infers nothing: any optimizer, and
  # the optimizer is used (Adam's steps are not SGD's).
  adam = _two_rounds(build_mixed(client_optimizer_fn=NOT_PLAIN_SGD['adam'],
                                 mixing=mixed_fl.ONE_WAY_GRADIENT_TRANSFER))
  plain = _two_rounds(build_mixed(mixing=mixed_fl.ONE_WAY_GRADIENT_TRANSFER))
  assert all(np.isfinite(w).all() for w in adam)
  assert not all(np.allclose(a, p) for a, p in zip(adam, plain))
  # tff.learning's build_sgdm with momentum 0 is plain SGD: 2-way GT takes
  # it and trains exactly what momentum=None trains.
  zero = _two_rounds(build_mixed(client_optimizer_fn=sgd(0.1, momentum=0.0),
                                 mixing=mixed_fl.TWO_WAY_GRADIENT_TRANSFER))
  none = _two_rounds(build_mixed(mixing=mixed_fl.TWO_WAY_GRADIENT_TRANSFER))
  for a, b in zip(zero, none):
    np.testing.assert_array_equal(a, b)


# ------------------------------------------------ 4. K is an int or a schedule
K_BUILDERS = {
    'fed_avg': lambda k: algorithms.build_fed_avg(
        linear.model_fn, sgd(0.1), num_local_steps=k),
    'fed_adam': lambda k: algorithms.build_fed_adam(
        linear.model_fn, sgd(0.1), num_local_steps=k),
    'adaptive_fed_opt': lambda k: algorithms.build_adaptive_fed_opt(
        linear.model_fn, sgd(0.1), optimizer='adam', server_learning_rate=0.1,
        num_local_steps=k),
    'fed_gbo': lambda k: algorithms.build_fed_gbo(
        linear.model_fn, optimizers.build_adam(0.1), num_local_steps=k),
    'mimelite': lambda k: algorithms.build_mimelite(
        linear.model_fn, optimizers.build_adam(0.1), num_local_steps=k),
    'mfl': lambda k: algorithms.build_mfl(
        linear.model_fn, optimizers.build_adam(0.1), num_local_steps=k),
    'mixed_fl': lambda k: build_mixed(num_local_steps=k),
    'selected_rows': lambda k: algorithms.build_selected_rows_mixed_fl(
        table_model.TableModel, sgd(0.1), row_ids_fn=table_model.row_ids,
        central_loss_fn=lambda m, b: 0.0,
        mixing=mixed_fl.PARALLEL_TRAINING, num_local_steps=k,
        max_rows_per_client=1),
}


@pytest.mark.parametrize('builder', list(K_BUILDERS))
def test_a_fractional_num_local_steps_is_refused(builder):
  with pytest.raises(TypeError, match=exactly(
      'num_local_steps must be an int or a schedule, got 2.5.')):
    K_BUILDERS[builder](2.5)


# ------------------------------------------------ 5. decay flags' bounds


def _config(*argv):
  flag_values = flags.FlagValues()
  training_flags.define_training_flags(flag_values=flag_values)
  flag_values(['prog', '--output_dir=/nonexistent/never_written', *argv])
  return training_flags.config_from_flags(flag_values=flag_values)[0]


@pytest.mark.parametrize('flag', [
    '--client_beta_1=1.5', '--server_beta_2=1.5', '--central_momentum=1.5',
    '--merge_beta_1=-0.1', '--beta_1=1.5'])
def test_decay_flags_outside_0_1_are_refused_at_parsing(flag):
  with pytest.raises(flags.IllegalFlagValueError, match=exactly(
      f'flag {flag}: must be a finite number in [0, 1].')):
    _config(flag)


@pytest.mark.parametrize('argv, message', [
    (['--client_optimizer=adam', '--client_beta_1=1'],
     '--client_beta_1 must be in [0, 1) for adam (its bias correction divides '
     'by 1 - beta_1^t), got 1.0.'),
    (['--algorithm=parallel_training', '--central_optimizer=yogi',
      '--central_beta_1=1'],
     '--central_beta_1 must be in [0, 1) for yogi (its bias correction '
     'divides by 1 - beta_1^t), got 1.0.'),
    (['--algorithm=fedadam', '--server_beta_1=1'],
     '--server_beta_1 must be in [0, 1) for adam (its bias correction divides '
     'by 1 - beta_1^t), got 1.0.'),
    (['--algorithm=fedadam', '--server_adam=seed000', '--server_beta_2=1'],
     '--server_beta_2 must be in [0, 1) with --server_adam=seed000, got 1.0.'),
    # Seed 003's optimizers (unchanged): sgdm's and adam's beta_1 exclude 1.
    (['--algorithm=fed_gbo', '--optimizer=adam', '--beta_1=1'],
     '--beta_1 must be in [0, 1), got 1.0.'),
])
def test_a_decay_of_one_the_optimizer_cannot_take_is_a_usage_error(argv,
                                                                   message):
  with pytest.raises(app.UsageError, match=exactly(message)):
    _config(*argv)


def test_decays_of_one_the_optimizers_take_are_accepted():
  config = _config('--client_optimizer=sgdm', '--client_momentum=1',
                   '--server_optimizer=adam', '--server_beta_2=1')
  assert (config.client.momentum, config.server.beta_2) == (1.0, 1.0)
  assert _config('--client_optimizer=rmsprop',
                 '--client_beta_2=1').client.beta_2 == 1.0


@pytest.mark.parametrize('argv, given', [
    (['--client_optimizer=adam'], 'adam'),
    (['--client_optimizer=sgdm'], 'sgdm with --client_momentum=0.9'),
])
def test_two_way_gradient_transfer_flags_refuse_other_client_optimizers(
    argv, given):
  with pytest.raises(app.UsageError, match=exactly(
      '--client_optimizer must be sgd with --algorithm='
      f'two_way_gradient_transfer, got {given}: 2-way Gradient Transfer '
      "infers the federated gradient from the clients' updates as if every "
      'client step were an SGD step of the client learning rate (seed 004 '
      'Alg. 1, App. A.2).')):
    _config('--algorithm=two_way_gradient_transfer', *argv)


def test_two_way_gradient_transfer_flags_accept_sgd():
  assert _config('--algorithm=two_way_gradient_transfer').client.name == 'sgd'
  config = _config('--algorithm=two_way_gradient_transfer',
                   '--client_optimizer=sgdm', '--client_momentum=0')
  assert (config.client.name, config.client.momentum) == ('sgdm', 0.0)
  # Parallel training has no inferred gradient: any client optimizer.
  assert _config('--algorithm=parallel_training',
                 '--client_optimizer=adam').client.name == 'adam'
