"""The benchmark tasks' Keras classifiers as TFF models."""

from collections.abc import Callable, Mapping

import tensorflow as tf
import tensorflow_federated as tff


def sparse_classifier(
    build: Callable[[], tf.keras.Model], input_spec: Mapping[str, tf.TensorSpec]
) -> Callable[[], tff.learning.models.VariableModel]:
  """A no-arg TFF model builder: `build()`'s softmax outputs against integer
  labels `y`, cross-entropy loss, metric `accuracy`. Calls `build` once now,
  so that a bad model name fails here rather than inside a TFF trace."""
  build()

  def model_fn():
    return tff.learning.models.from_keras_model(
        build(), loss=tf.keras.losses.SparseCategoricalCrossentropy(),
        input_spec=input_spec,
        metrics=[tf.keras.metrics.SparseCategoricalAccuracy(name='accuracy')])

  return model_fn
