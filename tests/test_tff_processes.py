"""TFF's own learning processes run in process as they run on TFF's worker.

The in-process runtime is a TFF runtime for every computation of its shape,
not only for this library's: `tff.learning`'s algorithms (whose client loop
is a `tf.data.Dataset.reduce`), a process composed from
`tff.learning.templates` with a client work of the user's own, and TFF's
federated evaluation, three rounds from the same state on TFF's worker and in
process: the same states and metrics, bit for bit.
"""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import linear
from tests import runs
from tests.test_runtimes import _assert_same  # pylint: disable=g-importing-member
from tff_mixed import execution
from tff_mixed.runtimes import tf_phase

ROUNDS = 3
CLIENTS = [linear.CLIENT_A, linear.CLIENT_B,
           ([[0.5, -1.0], [1.5, 2.0], [0.0, 0.0], [1.0, -0.5]],
            [1.0, -1.0, 0.5, 2.0])]


def _data():
  return [linear.dataset(x, y, batch_size=2) for x, y in CLIENTS]


def _sgd(learning_rate):
  return tff.learning.optimizers.build_sgdm(learning_rate=learning_rate)


def _own_client_work():
  """A client work of the user's own: each client's update is minus the
  learning rate times the sum of its batches' gradients at the broadcast
  model (one `Dataset.reduce`), weighted by its example count."""
  model = linear.model_fn()
  weights_type = tff.learning.models.weights_type_from_model(model)
  data_type = tff.SequenceType(tff.types.tensorflow_to_type(model.input_spec))

  @tff.tensorflow.computation(weights_type, data_type)
  def client_update(weights, dataset):
    model = linear.model_fn()
    trainable = model.trainable_variables
    tf.nest.map_structure(lambda v, w: v.assign(w), trainable,
                          list(weights.trainable))

    def add_gradient(state, batch):
      total, count = state
      with tf.GradientTape() as tape:
        loss = model.forward_pass(batch).loss
      gradients = tuple(tape.gradient(loss, trainable))
      total = tf.nest.map_structure(tf.add, total, gradients)
      return total, count + tf.cast(tf.shape(batch['y'])[0], tf.float32)

    zeros = tuple(tf.zeros_like(v) for v in trainable)  # Not a list: one tensor.
    total, count = dataset.reduce((zeros, 0.0), add_gradient)
    update = [-0.1 * g for g in total]
    return tff.learning.templates.ClientResult(
        update=update, update_weight=count), collections.OrderedDict(
            examples=count)

  @tff.federated_computation
  def initialize():
    return tff.federated_value((), tff.SERVER)

  @tff.federated_computation(
      initialize.type_signature.result,
      tff.FederatedType(weights_type, tff.CLIENTS),
      tff.FederatedType(data_type, tff.CLIENTS))
  def next_fn(state, weights, data):
    result, examples = tff.federated_map(client_update, (weights, data))
    measurements = tff.federated_sum(examples)
    return tff.templates.MeasuredProcessOutput(state, result, measurements)

  return tff.learning.templates.ClientWorkProcess(initialize, next_fn)


def _composed():
  weights_type = tff.learning.models.weights_type_from_model(linear.model_fn)

  @tff.tensorflow.computation
  def initial_weights():
    return tff.learning.models.ModelWeights.from_model(linear.model_fn())

  return tff.learning.templates.compose_learning_process(
      initial_weights,
      tff.learning.templates.build_broadcast_process(weights_type),
      _own_client_work(),
      tff.aggregators.MeanFactory().create(
          weights_type.trainable, tff.TensorType(np.float32)),
      tff.learning.templates.build_apply_optimizer_finalizer(
          _sgd(1.0), weights_type))


BUILDERS = {
    'weighted_fed_avg': lambda: tff.learning.algorithms.build_weighted_fed_avg(
        linear.model_fn, _sgd(0.1), _sgd(1.0)),
    'unweighted_fed_avg':
        lambda: tff.learning.algorithms.build_unweighted_fed_avg(
            linear.model_fn, _sgd(0.1), _sgd(1.0)),
    'weighted_fed_prox':
        lambda: tff.learning.algorithms.build_weighted_fed_prox(
            linear.model_fn, 0.1, _sgd(0.1), _sgd(1.0)),
    'weighted_mime_lite':
        lambda: tff.learning.algorithms.build_weighted_mime_lite(
            linear.model_fn, _sgd(0.1), _sgd(1.0)),
    'fed_sgd': lambda: tff.learning.algorithms.build_fed_sgd(
        linear.model_fn, _sgd(0.5)),
    'composed_own_client_work': _composed,
    'fed_eval': lambda: tff.learning.algorithms.build_fed_eval(
        linear.model_fn),
}


@pytest.mark.parametrize('name', sorted(BUILDERS))
def test_three_rounds_in_process_equal_tffs_runtime(name):
  process = BUILDERS[name]()
  with execution.running_on('tff'):
    initial = start = process.initialize()
    if name == 'fed_eval':  # Evaluate a model that is not all zeros.
      start = process.set_model_weights(start, tff.learning.models.ModelWeights(
          trainable=[np.array([[0.5], [-1.0]], np.float32),
                     np.array([0.25], np.float32)], non_trainable=[]))
    on_tff = runs.rounds(process, _data(), ROUNDS, state=start)
  with execution.running_on('in_process'):
    _assert_same(process.initialize(), initial)
    in_process = runs.rounds(process, _data(), ROUNDS, state=start)
  _assert_same(in_process, on_tff)
  # The clients trained or evaluated: metrics are not all zero.
  assert any(np.any(np.asarray(m) != 0)
             for m in tf.nest.flatten(in_process[-1][1]))


def test_a_dataset_reduce_runs_as_a_loop_of_the_same_function():
  """The work phase of TFF's FedAvg holds no `ReduceDataset` once imported:
  its reduce function is called by a loop (tf_phase's docstring)."""
  process = BUILDERS['weighted_fed_avg']()
  form = tff.backends.mapreduce.get_map_reduce_form_for_computation(
      process.next)
  phase = tf_phase.Phase(form.work)
  graph = phase._run.graph.as_graph_def()  # pylint: disable=protected-access
  ops = [n.op for f in graph.library.function for n in f.node_def]
  ops += [n.op for n in graph.node]
  assert 'ReduceDataset' not in ops
  assert ops.count('While') >= 1
