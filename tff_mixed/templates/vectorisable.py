"""Whether, and how many at once, vectorised groups train a model's clients.

`tff_mixed.templates.vectorised` trains a group's clients as one program;
this module answers the questions a builder asks first: can the model's
gradient step be vectorised over clients at all (`not_vectorisable`, a
probe traced once per model function), and how many clients fit in one
chunk (`default_max_clients`). `gradient_fn` is one client's gradient step,
which the probe traces and the program vectorises.
"""

import contextlib
import logging
from typing import Optional

import numpy as np
import tensorflow as tf

from tff_mixed import models

# Stacked weights, gradients, first gradients and optimizer states of one
# chunk of clients are kept under this many bytes (`default_max_clients`).
# The in-process runtime trains `--concurrency` groups at a time (default one
# per core or GPU): up to that many times this. Left per chunk: a group does
# not know how many train beside it.
MEMORY_BUDGET_BYTES = 1 << 30


@contextlib.contextmanager
def _quiet_tensorflow_logger():
  """pfor logs every op it cannot convert at ERROR (1,300-1,600 lines for a
  CNN or GRU); `not_vectorisable`'s one reason says it instead."""
  logger, level = tf.get_logger(), tf.get_logger().level
  logger.setLevel(logging.CRITICAL + 1)
  try:
    yield
  finally:
    logger.setLevel(level)


def not_vectorisable(model_fn) -> Optional[str]:
  """Why `model_fn`'s clients cannot be trained at once (None if they can).

  `tff_mixed.models.not_vectorisable`'s reasons, and whether
  `tf.vectorized_map` converts every op of a client's gradient step (a
  convolution over per-client kernels, for instance, has no vectorised form
  in TensorFlow and would run client by client inside the vectorised loop,
  slower than a sequential group).
  """
  reason = models.not_vectorisable(model_fn)
  if reason is not None:
    return reason
  with tf.Graph().as_default() as graph:
    functional = model_fn.functional()
    trainable, non_trainable = functional.initial_weights
    # Only the shapes matter: zeros, not the weights as graph constants.
    stacked = [tf.zeros((2,) + np.shape(w), tf.as_dtype(w.dtype))
               for w in trainable]
    x_spec, y_spec = models.split_batch(model_fn.input_spec)

    def placeholder(spec):
      return tf.zeros([2, 2] + spec.shape[1:].as_list(), spec.dtype)

    batch = tf.nest.map_structure(placeholder, (x_spec, y_spec))
    gradient = gradient_fn(model_fn, functional, list(non_trainable))
    if _has_list_carrying_loop(graph, gradient, stacked, batch):
      return ('tf.vectorized_map cannot vectorise its gradient step over '
              'clients (a loop in it carries a TensorList, as Keras\'s '
              'recurrent layers\' loops do)')
    try:
      with _quiet_tensorflow_logger():
        _, _, output = tf.vectorized_map(
            lambda a: gradient(a[0], a[1], a[2]),
            (stacked, batch, tf.ones([2, 2])), fallback_to_while_loop=False)
      if len(tf.nest.flatten(output)) != 1:
        return ('its model has several outputs (the masked metrics take one '
                'prediction tensor)')
    except (ValueError, TypeError, NotImplementedError) as e:
      # The message's last line names the op ("Input "filter" of op
      # 'Conv2D' expected to be loop invariant.").
      lines = [l.strip() for l in str(e).splitlines() if l.strip()]
      return ('tf.vectorized_map cannot vectorise its gradient step over '
              f'clients ({lines[-1][:200] if lines else type(e).__name__})')
  return None


def _has_list_carrying_loop(graph, gradient, stacked, batch) -> bool:
  """Whether a loop of one client's gradient step carries a TensorList
  (a Keras layer's loop sits in a function of the graph's library).

  `tf.vectorized_map` cannot convert such a loop (a Keras GRU's), and finds
  out only after converting its body op by op: ~8 s for LEAF's GRU-128 on
  every build, against well under a second to trace one client's step."""
  gradient([w[0] for w in stacked],
           tf.nest.map_structure(lambda t: t[0], batch), tf.ones([2]))
  graph_def = graph.as_graph_def()
  return any(
      node.op in ('While', 'StatelessWhile')
      and tf.variant.as_datatype_enum in node.attr['T'].list.type
      for node in [*graph_def.node, *(n for f in graph_def.library.function
                                      for n in f.node_def)])


def default_max_clients(num_parameters: int, optimizer_state_size: int
                        ) -> int:
  """Clients a chunk trains at once under `MEMORY_BUDGET_BYTES`: each holds
  its weights, gradient, first gradient, a step's temporaries and optimizer
  state, float32 (`optimizer_state_size` floats)."""
  per_client = 4 * (4 * num_parameters + optimizer_state_size)
  return max(1, MEMORY_BUDGET_BYTES // max(per_client, 1))


def gradient_fn(model_fn, functional, non_trainable):
  """`(trainable, (x, y), mask) -> (gradient, loss, predictions)` of one
  client's masked loss (gradients dense, zeros where unconnected)."""

  def gradient(trainable, batch, mask):
    trainable = list(trainable)
    x, y = batch
    with tf.GradientTape() as tape:
      tape.watch(trainable)
      output = functional.predict_on_batch((trainable, non_trainable), x,
                                           training=True)
      loss = model_fn.masked_loss(y, output, mask)
    gradients = tape.gradient(
        loss, trainable, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    return [tf.convert_to_tensor(g) for g in gradients], loss, output

  return gradient
