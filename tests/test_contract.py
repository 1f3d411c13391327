"""One contract every learning-process builder keeps (linear model).

* `set_model_weights` then `get_model_weights` gives the weights back;
* a client without data, or whose update is not finite, changes nothing:
  a round with it equals the round without it, and a round of only
  clients without data leaves a federated-only model where it was;
* a round's metrics are finite and report bytes per client;
* a round counts its clients: participating, empty, dropped as not finite.
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import linear
from tests import table_model
from tff_mixed import algorithms
from tff_mixed import optimizers
from tff_mixed.algorithms import mixed_fl

SGD = tff.learning.optimizers.build_sgdm


def _central_data():
  return linear.dataset(*linear.CLIENT_B)


BUILDERS = {
    'fed_avg': lambda: algorithms.build_fed_avg(
        linear.model_fn, SGD(0.1), SGD(0.5, momentum=0.9), num_local_steps=2),
    'fed_adam': lambda: algorithms.build_fed_adam(
        linear.model_fn, SGD(0.1), num_local_steps=2),
    'adaptive_fed_opt': lambda: algorithms.build_adaptive_fed_opt(
        linear.model_fn, SGD(0.1), optimizer='rmsprop',
        server_learning_rate=0.1, num_local_steps=2),
    'fed_gbo': lambda: algorithms.build_fed_gbo(
        linear.model_fn, optimizers.build_adam(0.1), num_local_steps=2),
    'mimelite': lambda: algorithms.build_mimelite(
        linear.model_fn, optimizers.build_rmsprop(0.1), num_local_steps=2),
    'mfl': lambda: algorithms.build_mfl(
        linear.model_fn, optimizers.build_sgdm(0.1), num_local_steps=2),
    **{mixing: (lambda mixing=mixing: algorithms.build_mixed_fl(
        linear.model_fn, central_data_fn=_central_data, mixing=mixing,
        client_optimizer_fn=SGD(0.1), num_local_steps=2))
       for mixing in mixed_fl.MIXINGS},
}
FEDERATED_ONLY = ('fed_avg', 'fed_adam', 'adaptive_fed_opt', 'fed_gbo',
                  'mimelite', 'mfl')


@pytest.fixture(scope='module')
def processes():
  return {}


def _process(processes, name):
  if name not in processes:
    processes[name] = BUILDERS[name]()
  return processes[name]


def _weights(process, state):
  return [np.asarray(t) for t in process.get_model_weights(state).trainable]


def _empty():
  return linear.dataset(np.zeros((0, linear.DIM)), np.zeros((0,)),
                        batch_size=2)


def _check_round(process, start, output):
  """Finite metrics, bytes per client, and a model that moved."""
  assert _finite(output.metrics)
  work = output.metrics['client_work']
  assert work['bytes_downloaded_per_client'] > 0
  assert work['bytes_uploaded_per_client'] > 0
  assert any(not np.array_equal(a, b) for a, b in zip(
      _weights(process, output.state), _weights(process, start)))


def _check_counts(output, participating, empty, dropped):
  """The round's `client_work/clients/...` counts."""
  counts = output.metrics['client_work']['clients']
  assert dict(counts) == {'participating': participating, 'empty': empty,
                          'dropped_non_finite': dropped}


def _finite(structure):
  return all(np.all(np.isfinite(np.asarray(v, np.float64)))
             for v in tf.nest.flatten(structure))


@pytest.mark.parametrize('name', BUILDERS)
def test_learning_process_contract(processes, name):
  process = _process(processes, name)
  assert isinstance(process, tff.learning.templates.LearningProcess)
  start = process.set_model_weights(
      process.initialize(), linear.weights([0.3, -0.2], 0.1))
  w, b = _weights(process, start)
  np.testing.assert_array_equal(w, np.array([[0.3], [-0.2]], np.float32))
  np.testing.assert_array_equal(b, np.array([0.1], np.float32))

  data = [linear.dataset(*linear.CLIENT_A, batch_size=2),
          linear.dataset(*linear.CLIENT_B)]
  plain = process.next(start, data)
  with_empty = process.next(start, [_empty()] + data)
  exploding = linear.dataset([[1e30, 1e30]], [1.0])  # Its loss overflows.
  with_bad = process.next(start, [exploding] + data)
  _check_counts(plain, 2, 0, 0)
  _check_counts(with_empty, 2, 1, 0)
  _check_counts(with_bad, 2, 0, 1)
  for state in (with_empty.state, with_bad.state):
    for a, b in zip(_weights(process, plain.state), _weights(process, state)):
      np.testing.assert_allclose(a, b, rtol=1e-6)
  if name in ('fed_gbo', 'mimelite', 'mfl'):  # Seed 003's s too.
    for a, b in zip(tf.nest.flatten(plain.state['client_work']),
                    tf.nest.flatten(with_bad.state['client_work'])):
      np.testing.assert_allclose(a, b, rtol=1e-6)
  # Its steps are dropped with its update, so what the server infers from
  # them (FedGBO's I, 2-way GT's g_f) is unchanged in the next round too.
  assert (with_bad.metrics['client_work']['sgd_steps']
          == plain.metrics['client_work']['sgd_steps'])
  for a, b in zip(_weights(process, process.next(plain.state, data).state),
                  _weights(process, process.next(with_bad.state, data).state)):
    np.testing.assert_allclose(a, b, rtol=1e-5)
  _check_round(process, start, plain)

  if name in FEDERATED_ONLY:
    nobody = process.next(start, [_empty(), _empty()])
    for a, b in zip(_weights(process, nobody.state), _weights(process, start)):
      np.testing.assert_array_equal(a, b)
    assert _finite(nobody.metrics['client_work']['train']['loss'])
    _check_counts(nobody, 0, 2, 0)


# ----------------------------------------------------- selected-rows process
_TABLE_DATA = [[([0, 1], [[1.0, 0.0], [0.5, 0.5]])],
               [([2, 0], [[0.0, 1.0], [1.0, 1.0]])]]


def _selected_rows(mixing):
  return algorithms.build_selected_rows_mixed_fl(
      table_model.TableModel, SGD(0.1), row_ids_fn=table_model.row_ids,
      central_loss_fn=table_model.l2_loss_fn(0.5), mixing=mixing,
      num_local_steps=2, max_rows_per_client=3)


@pytest.mark.parametrize('mixing', mixed_fl.MIXINGS)
def test_selected_rows_contract(processes, mixing):
  """The same contract for the table model (its central loss always moves
  the table, so there is no federated-only case)."""
  name = f'selected_rows_{mixing}'
  if name not in processes:
    processes[name] = _selected_rows(mixing)
  process = processes[name]
  assert isinstance(process, tff.learning.templates.LearningProcess)
  weights = tff.learning.models.ModelWeights(
      trainable=[table_model.TABLE0 + 1.0, table_model.BIAS0 - 1.0],
      non_trainable=[])
  start = process.set_model_weights(process.initialize(), weights)
  for got, expected in zip(_weights(process, start), weights.trainable):
    np.testing.assert_array_equal(got, expected)
  data = [table_model.dataset(b) for b in _TABLE_DATA]
  empty = table_model.dataset([([3], [[0.0, 0.0]])]).take(0)
  exploding = table_model.dataset([([1], [[np.inf, np.inf]])])  # Update inf.
  plain = process.next(start, data)
  _check_counts(plain, 2, 0, 0)
  for other, counts in (([empty] + data, (2, 1, 0)),
                        ([exploding] + data, (2, 0, 1))):
    output = process.next(start, other)
    _check_counts(output, *counts)
    state = output.state
    for a, b in zip(_weights(process, plain.state), _weights(process, state)):
      np.testing.assert_allclose(a, b, rtol=1e-6)
    # And the next round (2-way GT's g~_f counts only kept clients' steps).
    for a, b in zip(_weights(process, process.next(plain.state, data).state),
                    _weights(process, process.next(state, data).state)):
      np.testing.assert_allclose(a, b, rtol=1e-5)
  _check_round(process, start, plain)


# ------------------------------------------------------------ hyper-parameters
def _check_k_is_a_hyper_parameter(process, start, data):
  """TFF's `get_hparams`/`set_hparams` reach K: set to 1, a round of two
  clients with >= 2 batches each takes 2 steps (4 at the built K = 2)."""
  hparams = process.get_hparams(start)
  assert hparams['client_work']['num_local_steps'] == 2
  hparams['client_work']['num_local_steps'] = np.int32(1)
  one_step = process.set_hparams(start, hparams)
  assert process.get_hparams(one_step)['client_work']['num_local_steps'] == 1
  assert process.next(start, data).metrics['client_work']['sgd_steps'] == 4
  assert process.next(one_step, data).metrics['client_work']['sgd_steps'] == 2


@pytest.mark.parametrize('name', BUILDERS)
def test_k_is_a_hyper_parameter(processes, name):
  process = _process(processes, name)
  _check_k_is_a_hyper_parameter(
      process, process.initialize(),
      [linear.dataset(*linear.CLIENT_A, batch_size=1),
       linear.dataset(*linear.CLIENT_B, batch_size=1)])


@pytest.mark.parametrize('mixing', mixed_fl.MIXINGS)
def test_selected_rows_k_is_a_hyper_parameter(processes, mixing):
  name = f'selected_rows_{mixing}'
  if name not in processes:
    processes[name] = _selected_rows(mixing)
  _check_k_is_a_hyper_parameter(
      processes[name], processes[name].initialize(),
      [table_model.dataset(b) for b in _TABLE_DATA])


# ------------------------------------------------------------ type signatures
_COMPOSED = ['global_model_weights', 'distributor', 'client_work',
             'aggregator']
STATE_KEYS = {
    'fed_avg': _COMPOSED + ['finalizer'],
    'fed_adam': _COMPOSED + ['finalizer'],
    'adaptive_fed_opt': _COMPOSED + ['finalizer'],
    **{name: _COMPOSED + ['server'] for name in (
        'fed_gbo', 'mimelite', 'mfl', *mixed_fl.MIXINGS)},
}
_K_STEP = ['optimizer_hparams', 'num_local_steps']
_SCHEDULED = ['round_num', 'schedules']
CLIENT_WORK_KEYS = {
    'fed_avg': _K_STEP + _SCHEDULED,
    'fed_adam': _K_STEP + _SCHEDULED,
    'adaptive_fed_opt': _K_STEP + _SCHEDULED,
    'fed_gbo': _K_STEP + ['optimizer_state'] + _SCHEDULED,
    'mimelite': _K_STEP + ['optimizer_state'] + _SCHEDULED,
    'mfl': _K_STEP + ['optimizer_state'] + _SCHEDULED,
    'parallel_training': _K_STEP + _SCHEDULED,
    'one_way_gradient_transfer': _K_STEP + ['augmenting_gradient'] + _SCHEDULED,
    'two_way_gradient_transfer': _K_STEP + ['augmenting_gradient'] + _SCHEDULED,
}


def _names(struct_type):
  return [name for name, _ in tff.structure.iter_elements(struct_type)]


def _check_learning_process_types(process, model_fn, state_keys,
                                  client_work_keys):
  """TFF's `LearningProcess` shape, with the state layout pinned."""
  with tf.Graph().as_default():
    model = model_fn()
    weights_type = tff.learning.models.weights_type_from_model(model)
    data_type = tff.SequenceType(tff.types.tensorflow_to_type(
        model.input_spec))
  state_type = process.initialize.type_signature.result
  assert process.initialize.type_signature.parameter is None
  assert state_type.placement == tff.SERVER
  assert _names(state_type.member) == state_keys
  assert _names(state_type.member.client_work) == client_work_keys
  tff.test.assert_types_equivalent(
      state_type.member.global_model_weights, weights_type)
  next_type = process.next.type_signature
  tff.test.assert_types_equivalent(next_type.parameter[0], state_type)
  tff.test.assert_types_equivalent(
      next_type.parameter[1], tff.FederatedType(data_type, tff.CLIENTS))
  tff.test.assert_types_equivalent(next_type.result.state, state_type)
  assert next_type.result.metrics.placement == tff.SERVER
  assert 'client_work' in _names(next_type.result.metrics.member)
  tff.test.assert_types_equivalent(
      process.get_model_weights.type_signature.result, weights_type)


@pytest.mark.parametrize('name', BUILDERS)
def test_type_signature(processes, name):
  _check_learning_process_types(
      _process(processes, name), linear.model_fn, STATE_KEYS[name],
      CLIENT_WORK_KEYS[name])


@pytest.mark.parametrize('mixing', mixed_fl.MIXINGS)
def test_selected_rows_type_signature(processes, mixing):
  name = f'selected_rows_{mixing}'
  if name not in processes:
    processes[name] = _selected_rows(mixing)
  gradient = [] if mixing == 'parallel_training' else ['augmenting_gradient']
  _check_learning_process_types(
      processes[name], table_model.TableModel,
      ['global_model_weights', 'client_work', 'server'],
      _K_STEP + gradient + _SCHEDULED)
