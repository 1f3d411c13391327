"""Keras models as TFF models that a client group can also train at once.

`tff.learning.models.from_keras_model` gives a `VariableModel`: weights and
metrics live in `tf.Variable`s, one client at a time. Vectorised client
groups (`tff_mixed.templates.vectorised`) train a group's clients together
on weights stacked along a client axis, so they need the model as a function
of its weights (TFF's `FunctionalModel`, from `functional_model_from_keras`)
and the loss and metrics of a batch in which a per-example mask hides the
padding of a client's short batch. `keras_model_fn` keeps the four things
`from_keras_model` takes, so its result is an ordinary `model_fn` everywhere
(faithful mode, evaluation, TFF's own builders) and gives the functional form
where a builder asks for it.

What cannot be vectorised is named by `not_vectorisable`, and client groups
then train one client after another as before (`client_groups.py`).
"""

import inspect
from collections.abc import Callable, Sequence
from typing import Any, Optional

import tensorflow as tf
import tensorflow_federated as tff

MetricConstructor = Callable[[], tf.keras.metrics.Metric]
# The metrics `from_keras_model` adds after the model's own, in its order.
LOSS, NUM_EXAMPLES, NUM_BATCHES = 'loss', 'num_examples', 'num_batches'
ADDED_METRICS = (LOSS, NUM_EXAMPLES, NUM_BATCHES)
_MEAN_REDUCTIONS = (tf.keras.losses.Reduction.AUTO,
                    tf.keras.losses.Reduction.SUM_OVER_BATCH_SIZE)


class KerasModelFn:
  """A no-arg `model_fn` for a Keras model, with its functional form.

  Calling it returns `tff.learning.models.from_keras_model(keras_model_fn(),
  loss, input_spec, metrics)`, a fresh `VariableModel` each call, so it goes
  wherever a `model_fn` does. `functional()` is the same network as TFF's
  `FunctionalModel` (only inside a graph, as TFF requires), and
  `masked_loss` its loss over a batch's unmasked examples.

  Attributes:
    keras_model_fn: No-arg callable building the (uncompiled) Keras model.
    loss: A `tf.keras.losses.Loss`.
    input_spec: The batches' spec, `(x, y)` or `OrderedDict(x=..., y=...)`.
    metrics: No-arg callables each building a fresh Keras metric.
  """

  def __init__(self, keras_model_fn: Callable[[], tf.keras.Model], *,
               loss: tf.keras.losses.Loss, input_spec: Any,
               metrics: Sequence[MetricConstructor] = ()):
    if not callable(keras_model_fn) or isinstance(keras_model_fn,
                                                  tf.keras.Model):
      raise TypeError('keras_model_fn must be a no-arg callable building a '
                      f'Keras model, got {type(keras_model_fn).__name__}.')
    for metric in metrics:
      if not callable(metric) or isinstance(metric, tf.keras.metrics.Metric):
        raise TypeError('metrics must be no-arg callables building Keras '
                        f'metrics (a fresh one each call), got {metric!r}.')
    self.keras_model_fn = keras_model_fn
    self.loss = loss
    self.input_spec = input_spec
    self.metrics = tuple(metrics)
    self._functional = None

  def __call__(self) -> tff.learning.models.VariableModel:
    return tff.learning.models.from_keras_model(
        self.keras_model_fn(), loss=self.loss, input_spec=self.input_spec,
        metrics=[m() for m in self.metrics])

  def functional(self) -> tff.learning.models.FunctionalModel:
    """TFF's `functional_model_from_keras` of the same network.

    Made once, eagerly (TFF's conversion reads the Keras model's initial
    values eagerly; its `predict_on_batch` then runs only in graphs), the
    first time this is called outside a graph: `not_vectorisable` does, when
    a builder checks the model.
    """
    if self._functional is None:
      if not tf.executing_eagerly():
        raise RuntimeError(
            'KerasModelFn.functional() is first called inside a graph; call '
            'tff_mixed.models.not_vectorisable(model_fn) eagerly first.')
      self._functional = tff.learning.models.functional_model_from_keras(
          self.keras_model_fn, self.loss, self.input_spec)
    return self._functional

  def masked_loss(self, labels, output, mask) -> tf.Tensor:
    """The loss of the examples where `mask` ([B], 0 or 1) is 1.

    A mean-reduced Keras loss with `sample_weight=mask` sums the kept
    examples' losses over all B (times any inner axes); rescaled by
    B / sum(mask) it is the loss of the kept examples alone, as the model's
    loss on the unpadded batch (0 when nothing is kept).
    """
    mask = tf.cast(mask, tf.float32)
    loss = tf.cast(self.loss(labels, output, sample_weight=mask), tf.float32)
    size = tf.cast(tf.shape(mask)[0], tf.float32)
    return tf.math.divide_no_nan(loss * size, tf.reduce_sum(mask))


def metric_finalizers(
    model: tff.learning.models.VariableModel) -> dict[str, Callable[..., Any]]:
  """`model.metric_finalizers()`, those that are `tf.function`s traced
  without AutoGraph.

  What this adds: TFF makes a Keras metric's finalizer a `tf.function` with
  AutoGraph on, and converting the eight of a model with a few metrics took
  ~0.5 s of every process's build; their bodies branch only on Python
  values, so the conversion bought nothing.
  """
  return {
      name: (tf.function(finalizer.python_function, autograph=False)
             if isinstance(finalizer, tf.types.experimental.GenericFunction)
             else finalizer)
      for name, finalizer in model.metric_finalizers().items()}


def split_batch(batch):
  """`(x, y)` of a batch, as `from_keras_model` reads it."""
  if isinstance(batch, dict):
    return batch['x'], batch['y']
  return batch[0], batch[1]


def not_vectorisable(model_fn) -> Optional[str]:
  """Why a client group of `model_fn`'s model cannot train at once, or None.

  A model can when it is a `KerasModelFn` whose loss is a mean-reduced Keras
  loss (the padding mask goes in as `sample_weight`), whose metrics take
  `sample_weight`, whose batches have fixed shapes but for the batch
  dimension, and whose Keras model has no batch normalisation (statistics
  shared across a batch), no regularisation losses (`from_keras_model` adds
  them, TFF's functional model does not) and converts with
  `functional_model_from_keras`.
  """
  if not isinstance(model_fn, KerasModelFn):
    return ('model_fn is not a tff_mixed.models.KerasModelFn (a plain '
            'model_fn hides the functional form a vectorised group needs)')
  loss = model_fn.loss
  if (not isinstance(loss, tf.keras.losses.Loss)
      or type(loss).__call__ is not tf.keras.losses.Loss.__call__
      or loss.reduction not in _MEAN_REDUCTIONS):
    return (f'its loss {type(loss).__name__} is not a mean-reduced Keras '
            'loss that takes sample_weight (the padding of a short batch is '
            'masked through it)')
  try:
    model_fn.functional()
  except Exception as e:  # pylint: disable=broad-except
    # TFF raises its own KerasFunctionalModelError (not exported), or
    # whatever Keras raises cloning the model: either way, not vectorised.
    return f'functional_model_from_keras cannot convert it ({e})'
  for spec in tf.nest.flatten(model_fn.input_spec):
    if not spec.shape[1:].is_fully_defined():
      return (f'a batch tensor has shape {spec.shape}: only the batch '
              'dimension may vary')
  with tf.Graph().as_default():
    keras_model = model_fn.keras_model_fn()
    for layer in _layers(keras_model):
      if isinstance(layer, tf.keras.layers.BatchNormalization):
        return ('it has batch normalisation, whose statistics a padded '
                'batch would change')
    if keras_model.losses:
      return 'its Keras model adds regularisation losses'
    for constructor in model_fn.metrics:
      metric = constructor()
      # Keras wraps an instance's update_state; the class's is the method.
      if 'sample_weight' not in inspect.signature(
          type(metric).update_state).parameters:
        return (f'its metric {metric.name!r} takes no sample_weight (the '
                'padding of a short batch is masked through it)')
      if metric.name in ADDED_METRICS:
        return f'its metric is named {metric.name!r}, as one TFF adds'
  return None


def _layers(model):
  for layer in model.layers:
    yield layer
    if isinstance(layer, tf.keras.Model):
      yield from _layers(layer)
