"""A vectorised group's model metrics (`vectorised.build_group_update`):
`from_keras_model`'s unfinalized metrics summed over a group's clients,
from the stacked predictions and masks of their K steps."""

import collections

import tensorflow as tf

from tff_mixed import models


class GroupMetrics:
  """A VariableModel's unfinalized metrics (`from_keras_model`'s: the
  model's metrics, then loss, num_examples, num_batches), summed over a
  group's clients, from stacked predictions and masks."""

  def __init__(self, model_fn: models.KerasModelFn, expected):
    self._metrics = [m() for m in model_fn.metrics]
    names = [m.name for m in self._metrics] + list(models.ADDED_METRICS)
    if list(expected) != names:
      raise ValueError(f'The model reports metrics {list(expected)}, not '
                       f'{names} as from_keras_model does.')
    self._expected = expected
    self._loss = [tf.Variable(0.0, trainable=False),
                  tf.Variable(0.0, trainable=False)]
    self._examples = tf.Variable(tf.constant(0, tf.int64), trainable=False)
    self._batches = tf.Variable(tf.constant(0, tf.int64), trainable=False)

  @property
  def _variables(self):  # pylint: disable=missing-function-docstring
    return ([v for m in self._metrics for v in m.variables] + self._loss
            + [self._examples, self._batches])

  def reset(self):
    """Zeroes every metric's, the loss's and the counts' variables."""
    for v in self._variables:
      v.assign(tf.zeros_like(v))

  def update(self, labels, predictions, loss, mask, kept):
    """A chunk's steps: `labels`/`predictions` `[K, C, B, ...]`, `loss`
    `[K, C]` (each client's batch mean), `mask` `[K, C, B]`; `kept` `[C]`
    (the clients whose update is kept: the others' metrics are dropped)."""
    weight = mask * tf.cast(kept, mask.dtype)[None, :, None]
    flat = lambda t: tf.reshape(t, tf.concat([[-1], tf.shape(t)[3:]], 0))
    # What is masked out may not be finite (a dropped client's): a weight of
    # 0 times NaN would still be NaN, so it is zeroed.
    shown = tf.where(tf.reshape(weight > 0, tf.concat(
        [tf.shape(weight), tf.ones([tf.rank(predictions) - 3], tf.int32)],
        0)), predictions, tf.zeros_like(predictions))
    for metric in self._metrics:
      metric.update_state(flat(labels), flat(shown),
                          sample_weight=tf.reshape(weight, [-1]))
    examples = tf.reduce_sum(weight, 2)
    self._loss[0].assign_add(tf.reduce_sum(
        tf.where(examples > 0, loss * examples, 0.0)))
    self._loss[1].assign_add(tf.reduce_sum(examples))
    self._examples.assign_add(tf.cast(tf.reduce_sum(examples), tf.int64))
    self._batches.assign_add(
        tf.cast(tf.reduce_sum(tf.cast(examples > 0, tf.float32)), tf.int64))

  def report(self):
    """The variables' values as a `tff.learning` model's unfinalized
    metrics: each metric's, the loss's (sum, weight) and the counts."""
    report = collections.OrderedDict()
    for metric in self._metrics:
      report[metric.name] = [v.read_value() for v in metric.variables]
    report[models.LOSS] = [v.read_value() for v in self._loss]
    report[models.NUM_EXAMPLES] = [self._examples.read_value()]
    report[models.NUM_BATCHES] = [self._batches.read_value()]
    return tf.nest.map_structure(
        lambda value, like: tf.cast(value, like.dtype), report,
        self._expected)
