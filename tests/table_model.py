"""A one-table model whose gradients are easy in NumPy: y_hat = T[id] + b.

loss = mean over the batch of 0.5 ||T[id] + b - y||^2, so the gradient of
row r is the batch mean of the residuals of the examples with id r (0 for a
row the batch does not read), and the bias's the mean of all residuals.
"""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

NUM_ROWS, DIM = 6, 2
TABLE0 = (np.arange(NUM_ROWS * DIM, dtype=np.float32).reshape(NUM_ROWS, DIM)
          / 10.0 - 0.5)
BIAS0 = np.array([0.1, -0.2], np.float32)


def input_spec():
  return collections.OrderedDict(
      ids=tf.TensorSpec([None], tf.int32),
      y=tf.TensorSpec([None, DIM], tf.float32))


class TableModel(tff.learning.models.VariableModel):
  """y_hat = T[id] + b with the half squared error."""

  def __init__(self):
    self._table = tf.Variable(TABLE0, name='table')
    self._bias = tf.Variable(BIAS0, name='bias')
    self._loss_sum = tf.Variable(0.0, trainable=False)
    self._count = tf.Variable(0, dtype=tf.int64, trainable=False)

  @property
  def trainable_variables(self):
    return [self._table, self._bias]

  @property
  def non_trainable_variables(self):
    return []

  @property
  def local_variables(self):
    return [self._loss_sum, self._count]

  @property
  def input_spec(self):
    return input_spec()

  @tf.function
  def predict_on_batch(self, x, training=True):
    del training
    return tf.gather(self._table, x['ids']) + self._bias

  @tf.function
  def forward_pass(self, batch_input, training=True):
    del training
    residual = tf.gather(self._table, batch_input['ids']) + self._bias - (
        batch_input['y'])
    loss = 0.5 * tf.reduce_mean(tf.reduce_sum(tf.square(residual), axis=1))
    n = tf.shape(residual, out_type=tf.int64)[0]
    self._loss_sum.assign_add(loss * tf.cast(n, tf.float32))
    self._count.assign_add(n)
    return tff.learning.models.BatchOutput(
        loss=loss, predictions=residual, num_examples=n)

  @tf.function
  def report_local_unfinalized_metrics(self):
    return collections.OrderedDict(
        loss=[self._loss_sum.read_value(), tf.cast(self._count, tf.float32)],
        num_examples=[self._count.read_value()])

  def metric_finalizers(self):
    return collections.OrderedDict(
        loss=tf.function(lambda v: tf.math.divide_no_nan(v[0], v[1])),
        num_examples=tf.function(lambda v: v[0]))

  @tf.function
  def reset_metrics(self):
    for v in self.local_variables:
      v.assign(tf.zeros_like(v))


def row_ids(batch):
  return batch['ids']


def l2_loss_fn(coefficient):
  """The data-free central loss 0.5 c ||T||^2 (gradient c T, none for b)."""
  def central_loss_fn(model, unused_batch):
    return 0.5 * coefficient * tf.reduce_sum(
        tf.square(model.trainable_variables[0]))
  return central_loss_fn


def dataset(batches):
  """[(ids, y), ...] -> a dataset of those batches."""
  elements = [tf.data.Dataset.from_tensors(collections.OrderedDict(
      ids=np.asarray(i, np.int32), y=np.asarray(y, np.float32)))
              for i, y in batches]
  data = elements[0]
  for element in elements[1:]:
    data = data.concatenate(element)
  return data


def grad(table, bias, ids, y):
  """NumPy gradients (row-sized table gradient, bias gradient) of a batch."""
  residual = table[ids] + bias - np.asarray(y)
  grad_table = np.zeros_like(table)
  np.add.at(grad_table, ids, residual / len(ids))
  return grad_table, residual.mean(axis=0)
