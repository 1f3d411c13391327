"""One contract every learning-process builder keeps (linear model).

* `set_model_weights` then `get_model_weights` gives the weights back;
* a client without data, or whose update is not finite, changes nothing:
  a round with it equals the round without it, and a round of only
  clients without data leaves a federated-only model where it was;
* a round's metrics are finite and report bytes per client.
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import linear
from tff_mixed import algorithms
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
        linear.model_fn, optimizer='adam', learning_rate=0.1,
        num_local_steps=2),
    'mimelite': lambda: algorithms.build_mimelite(
        linear.model_fn, optimizer='rmsprop', learning_rate=0.1,
        num_local_steps=2),
    'mfl': lambda: algorithms.build_mfl(
        linear.model_fn, optimizer='sgdm', learning_rate=0.1,
        num_local_steps=2),
    **{mixing: (lambda mixing=mixing: algorithms.build_mixed_fl_process(
        linear.model_fn, _central_data, mixing=mixing,
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
  for state in (with_empty.state, with_bad.state):
    for a, b in zip(_weights(process, plain.state), _weights(process, state)):
      np.testing.assert_allclose(a, b, rtol=1e-6)
  if name in ('fed_gbo', 'mimelite', 'mfl'):  # Seed 003's s too.
    for a, b in zip(tf.nest.flatten(plain.state['client_work']),
                    tf.nest.flatten(with_bad.state['client_work'])):
      np.testing.assert_allclose(a, b, rtol=1e-6)
  assert _finite(plain.metrics)
  work = plain.metrics['client_work']
  assert work['bytes_downloaded_per_client'] > 0
  assert work['bytes_uploaded_per_client'] > 0
  assert any(not np.array_equal(a, b) for a, b in zip(
      _weights(process, plain.state), _weights(process, start)))

  if name in FEDERATED_ONLY:
    nobody = process.next(start, [_empty(), _empty()])
    for a, b in zip(_weights(process, nobody.state), _weights(process, start)):
      np.testing.assert_array_equal(a, b)
    assert _finite(nobody.metrics['client_work']['train']['loss'])
