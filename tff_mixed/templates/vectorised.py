"""Vectorised client groups: a group's clients trained at once.

Sequential client groups (`client_groups.sum_over_clients`) run the faithful
mode's client function on each client in turn, so a round pays TensorFlow's
cost of a small step S·K times one after another. Every client of a round
starts from the same model and takes K steps on its own data, so the K steps
of a group's clients are one program over stacked tensors instead:

* the group arrives as tensors (`client_groups`): one per input holding
  every batch's examples, one after another, and the batches' sizes; no
  padding is stored;
* weights and optimizer states are stacked on a leading client axis, each
  client starting from the round's model and the same optimizer state;
* step k gathers each client's batch k (cycled over its own batches) into a
  `[clients, B, ...]` tensor with a mask hiding what a short batch lacks,
  and one `tf.vectorized_map` takes every client's gradient of its masked
  loss and its optimizer step at once (the model as TFF's
  `FunctionalModel`, the optimizer's `next` per client);
* the model's metrics are the group's sums (`from_keras_model`'s
  unfinalized metrics): each step's labels, predictions and masks are
  recorded, and after the K steps the metrics are updated once with the mask
  as sample weight, zero for a client whose update is not finite (dropped
  with its metrics, as in faithful mode).

Per-client semantics are those of `step_loop.build_k_step_update`: exactly K
steps, each client's batches cycled with its own short last batch, an empty
client takes no step (weight 0), a non-finite client is dropped, Mimelite's
full-batch gradient is the mean over the client's examples. The result is
the same `ClientOutput` per client, stacked; `k_step_client_work` applies
the extensions per client and sums, as for a sequential group.

Clients are trained `max_clients` at a time (a chunk), so that the stacked
weights, gradients and optimizer states fit in memory whatever the group's
size: `vectorisable.default_max_clients` gives as many as fit in
`vectorisable.MEMORY_BUDGET_BYTES`. Whether a model's groups vectorise at all
is `vectorisable.not_vectorisable`'s to say.
"""

import collections
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed import group_data
from tff_mixed import models
from tff_mixed.templates import group_metrics
from tff_mixed.templates import step_loop
from tff_mixed.templates import vectorisable


class _Layout(collections.namedtuple(
    '_Layout', ['examples', 'batch_sizes', 'batch_starts', 'counts'])):
  """A group's data: `examples` (flat list, each `[N + 1, ...]`, the last
  row zeros, where masked slots point), `batch_sizes` / `batch_starts`
  (`[NB + 1]`, the last a size-0 batch at N), `counts` (`[G]` batches per
  client)."""


def _layout(group) -> _Layout:
  group = group.get_single_element()  # `group_data.unpack`.
  examples = [tf.convert_to_tensor(e)
              for e in tf.nest.flatten(group[group_data.EXAMPLES])]
  sizes = tf.cast(group[group_data.BATCH_SIZES], tf.int64)
  total = tf.reduce_sum(sizes)
  examples = [tf.concat([e, tf.zeros(tf.concat([[1], tf.shape(e)[1:]], 0),
                                     e.dtype)], 0) for e in examples]
  starts = tf.concat([tf.cumsum(sizes, exclusive=True), [total]], 0)
  return _Layout(examples, tf.concat([sizes, [0]], 0), starts,
                 tf.cast(group[group_data.COUNTS], tf.int64))


def _stack(structure, clients):
  return tf.nest.map_structure(
      lambda t: tf.broadcast_to(t, tf.concat([[clients], tf.shape(t)], 0)),
      structure)


def build_group_update(
    model_fn: models.KerasModelFn, *, client_weighting, loss_weight: float,
    full_gradient: bool, first_gradient: bool, max_clients: int,
) -> Callable[..., Any]:
  """Returns `group_update(optimizer, hparams, K, weights, group, aug,
  state, client_fn, step_gradient=None)`, a `tf.function` (call inside a
  TFF computation).

  Trains every client of `group` (`group_data.group_type`) as
  `step_loop.build_k_step_update` trains one, `max_clients` at a time, and
  returns `(sum over clients of client_fn(output), model metrics,
  clients)`: `output` is a client's `step_loop.ClientOutput` (`metrics` and
  the fields the algorithm does not use None), `client_fn` is vectorised
  over each chunk's clients, and the model metrics are the unfinalized
  metrics of the clients kept, summed. `aug` and `state` are the same for
  every client (or None); `step_gradient(x, x_0)` (or None) gets one
  client's weights and the round's, inside the vectorised client step.
  """
  step_loop.check_weighting(client_weighting)
  variable_model = model_fn()
  functional = model_fn.functional()
  trainable_0, non_trainable_0 = functional.initial_weights
  expected = variable_model.report_local_unfinalized_metrics()
  weights_trainable = [v.shape for v in variable_model.trainable_variables]
  if [tuple(s) for s in weights_trainable] != [
      tuple(np.shape(w)) for w in trainable_0] or len(
          variable_model.non_trainable_variables) != len(non_trainable_0):
    raise ValueError('The functional form of the model orders its weights '
                     'unlike the Keras model; vectorised groups need both '
                     'in the same order.')
  metrics = group_metrics.GroupMetrics(model_fn, expected)
  x_spec, y_spec = models.split_batch(model_fn.input_spec)
  # What a step records: labels, predictions (specs from a trace of the
  # forward pass), the batch loss and mask of each client.
  output_spec = tf.function(
      lambda x: functional.predict_on_batch(
          (list(trainable_0), list(non_trainable_0)), x, training=True),
      autograph=False).get_concrete_function(x_spec).structured_outputs
  record_structure = (y_spec, output_spec, tf.TensorSpec([], tf.float32),
                      tf.TensorSpec([], tf.float32))
  record_specs = tf.nest.flatten(record_structure)
  weighting = client_weighting
  keep_first = first_gradient  # The name is a client's value below.

  @tf.function(autograph=False)
  def group_update(optimizer, hparams, num_local_steps, initial_weights,
                   group, augmenting_gradient, initial_optimizer_state,
                   client_fn, step_gradient=None):
    layout = _layout(group)
    non_trainable = list(initial_weights.non_trainable)
    gradient = vectorisable.gradient_fn(model_fn, functional, non_trainable)
    trainable = [tf.convert_to_tensor(t) for t in initial_weights.trainable]
    specs = [tf.TensorSpec(t.shape, t.dtype) for t in trainable]
    if initial_optimizer_state is None:
      initial_optimizer_state = optimizer.initialize(specs)
    start_state = optimizer.set_hparams(initial_optimizer_state, hparams)
    augment = (None if augmenting_gradient is None
               else list(tf.nest.flatten(augmenting_gradient)))
    num_local_steps = tf.cast(num_local_steps, tf.int64)
    counts = layout.counts
    batch_offsets = tf.cumsum(counts, exclusive=True)
    num_batches = tf.shape(layout.batch_sizes, out_type=tf.int64)[0] - 1
    max_batch = tf.maximum(tf.reduce_max(layout.batch_sizes), 1)
    slots = tf.range(max_batch)

    def gather(batch_index):
      """The batches `batch_index` ([C]) with their masks, `[C, B, ...]`."""
      sizes = tf.gather(layout.batch_sizes, batch_index)
      starts = tf.gather(layout.batch_starts, batch_index)
      valid = slots[None, :] < sizes[:, None]
      index = tf.where(valid, starts[:, None] + slots[None, :],
                       layout.batch_starts[-1])
      flat = [tf.gather(e, index) for e in layout.examples]
      x, y = tf.nest.pack_sequence_as((x_spec, y_spec), flat)
      return (x, y), tf.cast(valid, tf.float32)

    def train_chunk(first, last):
      """One chunk's stacked `ClientOutput`; metrics updated with its kept
      clients' steps."""
      chunk_counts = counts[first:last]
      offsets = batch_offsets[first:last]
      has_data = chunk_counts > 0
      size = last - first

      # A client without data reads the size-0 batch at `num_batches`.
      base = tf.where(has_data, offsets, num_batches)
      cycle = tf.maximum(chunk_counts, 1)

      def batch_of(k):
        return base + tf.math.floormod(k, cycle)

      full_sum = examples_read = None
      weights = _stack(trainable, size)
      if full_gradient:
        full_sum, examples_read = _full_gradient(
            gradient, gather, weights, chunk_counts, offsets, num_batches,
            loss_weight)

      # The model's metrics need each step's predictions, but whether a
      # client is kept is known only after its K steps: the steps are
      # recorded, and the metrics updated once at the end with the kept.
      steps = tf.maximum(num_local_steps, 1)  # K = 0: one step, all masked.
      takes_steps = tf.cast(num_local_steps > 0, tf.float32)

      def client_step(client):
        """One client's step: its gradient, loss and predictions, its
        optimizer step (one `vectorized_map` of both: a chunk's weights are
        gathered once a step, the applied gradients not at all)."""
        weights, batch, mask, state = client
        grads, loss, output = gradient(weights, batch, mask)
        if loss_weight != 1.0:
          grads = [loss_weight * g for g in grads]
        applied = step_loop.applied_gradient(grads, augment, step_gradient,
                                             weights, trainable)
        state, weights = optimizer.next(state, weights, applied)
        return grads if keep_first else [], loss, output, state, list(weights)

      def step(k, carry):
        # The step's loss and mask are recorded: the first loss and the
        # examples read are read from the record after the loop, not
        # carried (each value a loop carries is graph nodes every step).
        record, first_gradient, state, weights = carry
        batch, mask = gather(batch_of(k))
        mask *= takes_steps
        grads, loss, output, state, weights = tf.vectorized_map(
            client_step, (weights, batch, mask, state))
        record = [a.write(tf.cast(k, tf.int32), v) for a, v in zip(
            record, tf.nest.flatten((batch[1], output, loss, mask)))]
        # Step 0's gradient is the first-step gradient uploads use.
        if keep_first:
          first_gradient = tf.cond(tf.equal(k, 0), lambda: grads,
                                   lambda: first_gradient)
        return record, list(first_gradient), state, list(weights)

      record, first_gradient, state, weights = step_loop.loop(steps, step, (
          [tf.TensorArray(spec.dtype, size=tf.cast(steps, tf.int32))
           for spec in record_specs],
          [tf.zeros_like(w) for w in weights] if keep_first else [],
          _stack(start_state, size), weights))
      labels, predictions, losses, masks = tf.nest.pack_sequence_as(
          record_structure, [a.stack() for a in record])
      examples = tf.reduce_sum(
          tf.cast(tf.reduce_sum(masks, 2), tf.int64), 0)
      outputs = _client_outputs(
          trainable, weights, state, _stack(start_state, size), has_data,
          num_local_steps, examples, first_gradient if keep_first else None,
          losses[0], _dataset_sizes(layout, first, last), full_sum,
          examples_read, weighting)
      metrics.update(labels, predictions, losses, masks,
                     outputs.result.update_weight > 0)
      return outputs

    clients = tf.shape(counts, out_type=tf.int64)[0]
    chunk = tf.constant(max_clients, tf.int64)
    metrics.reset()

    def one(fields):
      # Identities: pfor cannot return a tensor made outside its loop.
      return tf.nest.map_structure(tf.identity, client_fn(
          step_loop.ClientOutput(**{**_NO_FIELDS, **fields})))

    # Zeros of the sums: the structure of `client_fn` of one client, traced
    # on specs, not vectorised (a second `tf.vectorized_map` would double
    # its trace, and one over zero clients divides by zero in some of its
    # converters: a SIGFPE, not an error).
    totals = tf.nest.map_structure(
        lambda t: tf.zeros(t.shape, t.dtype),
        tf.function(one, autograph=False).get_concrete_function(
            _client_specs(trainable, start_state, full_gradient,
                          keep_first)
        ).structured_outputs)

    def add_chunk(c, totals):
      first = c * chunk
      outputs = train_chunk(first, tf.minimum(first + chunk, clients))
      present = {k: v for k, v in outputs._asdict().items() if v is not None}
      per_client = tf.vectorized_map(one, present)
      return tf.nest.map_structure(lambda t, c: t + tf.reduce_sum(c, 0),
                                   totals, per_client)

    totals = step_loop.loop((clients + chunk - 1) // chunk, add_chunk, totals)
    return totals, metrics.report(), tf.cast(clients, tf.int32)

  group_update.zero_metrics = lambda: tf.nest.map_structure(
      lambda t: tf.zeros(t.shape, t.dtype), expected)
  return group_update


_NO_FIELDS = {name: None for name in step_loop.ClientOutput._fields}


def _client_specs(trainable, start_state, full_gradient, first_gradient):
  """The specs of one client's `step_loop.ClientOutput` fields that a
  chunk's output holds (those not None), by name."""
  def spec(t):
    t = tf.convert_to_tensor(t)
    return tf.TensorSpec(t.shape, t.dtype)

  scalar = tf.TensorSpec([], tf.float32)
  count = tf.TensorSpec([], tf.int64)
  specs = dict(
      result=tff.learning.templates.ClientResult(
          update=[spec(t) for t in trainable], update_weight=scalar),
      sgd_steps=tf.TensorSpec([], tf.int32),
      first_loss=scalar, num_examples=count,
      optimizer_state=tf.nest.map_structure(spec, start_state))
  if first_gradient:
    specs.update(first_gradient=[spec(t) for t in trainable])
  if full_gradient:
    specs.update(full_gradient=[spec(t) for t in trainable],
                 full_gradient_examples=count)
  return specs


def _dataset_sizes(layout, first, last):
  """|D_i| of clients `first..last`: the sizes of their batches, summed."""
  counts = layout.counts
  owner = tf.repeat(tf.range(tf.shape(counts, out_type=tf.int64)[0]), counts)
  sizes = tf.math.unsorted_segment_sum(
      layout.batch_sizes[:-1], owner, tf.shape(counts)[0])
  return sizes[first:last]


def _full_gradient(gradient, gather, weights, counts, offsets, num_batches,
                   loss_weight):
  """Each client's sum over its examples of `loss_weight * grad`, at its
  starting weights, and the examples read (one pass over its batches)."""
  size = tf.shape(counts, out_type=tf.int64)[0]

  def add_batch(j, carry):
    sums, examples = carry
    index = tf.where(j < counts, offsets + j, num_batches)
    batch, mask = gather(index)
    grads, _, _ = tf.vectorized_map(
        lambda a: gradient(a[0], a[1], a[2]), (weights, batch, mask))
    n = tf.reduce_sum(mask, 1)
    return ([s + loss_weight * _per_client(n, g) for s, g in zip(sums, grads)],
            examples + tf.cast(n, tf.int64))

  return step_loop.loop(
      tf.reduce_max(tf.concat([counts, [0]], 0)), add_batch,
      ([tf.zeros_like(w) for w in weights], tf.zeros([size], tf.int64)))


def _per_client(values, stacked):
  """`values[i] * stacked[i]` for a `[C]` vector and a `[C, ...]` tensor."""
  shape = tf.concat([tf.shape(values), tf.ones([tf.rank(stacked) - 1],
                                               tf.int32)], 0)
  return tf.reshape(tf.cast(values, stacked.dtype), shape) * stacked


def _client_outputs(initial, weights, state, start_state, has_data,
                    num_local_steps, examples, first_gradient, first_loss,
                    dataset_sizes, full_sum, examples_read, weighting):
  """`step_loop.ClientOutput` of a chunk, every field stacked by client."""
  update = [i[None] - w for i, w in zip(initial, weights)]
  finite = tf.reduce_all(tf.stack(
      [tf.reduce_all(tf.math.is_finite(tf.reshape(u, [tf.shape(u)[0], -1])),
                     1) for u in update]), 0)
  steps = tf.where(has_data, tf.cast(num_local_steps, tf.int32), 0)
  usable = tf.logical_and(finite, steps > 0)
  mean_full = None
  if full_sum is not None:
    full_finite = tf.reduce_all(tf.stack([
        tf.reduce_all(tf.math.is_finite(tf.reshape(g, [tf.shape(g)[0], -1])),
                      1) for g in full_sum]), 0)
    usable = tf.logical_and(usable, full_finite)
    mean_full = [_per_client(tf.math.divide_no_nan(
        1.0, tf.cast(examples_read, tf.float32)), g) for g in full_sum]

  def keep(new, old):
    mask = tf.reshape(usable, tf.concat(
        [tf.shape(usable), tf.ones([tf.rank(new) - 1], tf.int32)], 0))
    return tf.where(mask, new, old)

  zero = lambda t: keep(t, tf.zeros_like(t))
  if weighting == tff.learning.ClientWeighting.NUM_EXAMPLES:
    weight = tf.cast(examples, tf.float32)
  elif weighting == step_loop.DATASET_SIZE:
    weight = tf.cast(dataset_sizes, tf.float32)
  else:
    weight = tf.ones_like(first_loss)
  return step_loop.ClientOutput(
      tff.learning.templates.ClientResult(
          update=[zero(u) for u in update], update_weight=zero(weight)),
      None, steps,
      None if first_gradient is None else [zero(g) for g in first_gradient],
      zero(first_loss),
      examples, tf.nest.map_structure(keep, state, start_state),
      None if mean_full is None else [zero(g) for g in mean_full],
      examples_read)


# What moved to `tff_mixed.templates.vectorisable` (2026-11-27): whether and
# how many clients a group trains at once.
_MOVED = ('not_vectorisable', 'default_max_clients', 'MEMORY_BUDGET_BYTES')


def __getattr__(name):
  if name in _MOVED:
    raise AttributeError(
        f'tff_mixed.templates.vectorised.{name} moved to '
        f'tff_mixed.templates.vectorisable.{name} (CHANGELOG.md, 2026-11-27).')
  raise AttributeError(
      f'module {__name__!r} has no attribute {name!r}')
