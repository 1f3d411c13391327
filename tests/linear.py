"""A tiny linear-regression model and data, with NumPy gradients."""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed import models

DIM = 2


def input_spec():
  return collections.OrderedDict(
      x=tf.TensorSpec([None, DIM], tf.float32),
      y=tf.TensorSpec([None, 1], tf.float32),
  )


def _keras_model():
  return tf.keras.Sequential([
      tf.keras.layers.InputLayer(input_shape=(DIM,)),
      tf.keras.layers.Dense(1, kernel_initializer='zeros'),
  ])


def model_fn():
  """y = x w + b, loss = mean((y_hat - y)^2) (Keras MSE)."""
  return tff.learning.models.from_keras_model(
      _keras_model(),
      loss=tf.keras.losses.MeanSquaredError(),
      input_spec=input_spec(),
  )


# The same model as a `tff_mixed.models.KerasModelFn`: client groups of it
# train their clients at once (`tff_mixed.templates.vectorised`).
keras_model_fn = models.KerasModelFn(
    _keras_model, loss=tf.keras.losses.MeanSquaredError(),
    input_spec=input_spec())


def dataset(x, y, batch_size=None):
  x = np.asarray(x, np.float32)
  y = np.asarray(y, np.float32).reshape(-1, 1)
  ds = tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x, y=y))
  return ds.batch(batch_size or len(x))


def grad(w, b, x, y):
  """Gradient of mean((x w + b - y)^2) in (w, b)."""
  x = np.asarray(x, np.float64)
  y = np.asarray(y, np.float64).reshape(-1)
  residual = x @ w + b - y
  return 2.0 * x.T @ residual / len(x), 2.0 * residual.mean()


def sgd(w, b, batches, steps, lr):
  """`steps` SGD steps cycling through `batches` [(x, y), ...]."""
  for k in range(steps):
    x, y = batches[k % len(batches)]
    gw, gb = grad(w, b, x, y)
    w, b = w - lr * gw, b - lr * gb
  return w, b


def weights(w, b):
  return tff.learning.models.ModelWeights(
      trainable=[np.asarray(w, np.float32).reshape(DIM, 1),
                 np.asarray([b], np.float32)],
      non_trainable=[],
  )


def unpack(model_weights):
  w, b = model_weights.trainable
  return np.asarray(w, np.float64).reshape(-1), float(np.asarray(b)[0])


# Two clients with different data (rows: x1, x2 -> y).
CLIENT_A = ([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [1.0, 2.0, 2.5])
CLIENT_B = ([[2.0, 1.0], [-1.0, 0.5]], [0.0, 1.0])
