"""The benchmark tasks' Keras classifiers as TFF models."""

from collections.abc import Callable, Mapping
import functools

import tensorflow as tf

from tff_mixed import models


def sparse_classifier(
    build: Callable[[], tf.keras.Model], input_spec: Mapping[str, tf.TensorSpec]
) -> models.KerasModelFn:
  """A no-arg TFF model builder: `build()`'s softmax outputs against integer
  labels `y`, cross-entropy loss, metric `accuracy` (a `KerasModelFn`, so
  client groups may train at once). Calls `build` once now, so that a bad
  model name fails here rather than inside a TFF trace."""
  build()
  return models.KerasModelFn(
      build, loss=tf.keras.losses.SparseCategoricalCrossentropy(),
      input_spec=input_spec,
      metrics=[functools.partial(tf.keras.metrics.SparseCategoricalAccuracy,
                                 name='accuracy')])
