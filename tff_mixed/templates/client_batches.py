"""A client's batches as tensors, for the step loop.

`cycle(data, K)` is what a client's K steps walk: the first K batches of
its data, cycled when it holds fewer, none if it is empty. A dataset's
batches are read into tensors by one op where their shapes allow
(`BufferedBatches`; else the dataset stays a dataset, read by an iterator),
and a client group's buffer is viewed per client (`BufferedBatches.view`,
`tff_mixed.templates.client_groups`). `step_loop.fold` walks either.
"""

import tensorflow as tf

from tensorflow.python.data.ops import map_op


class BufferedBatches:
  """Batches held as tensors (a client's read, or client groups' buffer),
  not a dataset.

  `examples` is every example of a sequence of batches (the model's input
  structure, each `[N, ...]`), `batch_sizes` each batch's size, in order;
  `view(start, count)` is one client's `count` batches from batch `start`;
  a view yields `length` batches (`count` unless `cycled`), cycling. Batches
  keep their sizes, so the model sees exactly the client's batches.
  """

  def __init__(self, examples, batch_sizes, input_spec, start=0, count=0,
               length=None, starts=None):
    self._examples, self._spec = examples, input_spec
    self._sizes = tf.cast(batch_sizes, tf.int64)
    self._starts = (tf.cumsum(self._sizes, exclusive=True) if starts is None
                    else starts)
    self._start = tf.cast(start, tf.int64)
    self.count = tf.cast(count, tf.int64)
    self.length = self.count if length is None else tf.cast(length, tf.int64)

  def view(self, start, count) -> 'BufferedBatches':
    """One client's `count` batches from batch `start`."""
    return BufferedBatches(self._examples, self._sizes, self._spec, start,
                           count, starts=self._starts)

  def cycled(self, num_steps) -> 'BufferedBatches':
    """The first `num_steps` batches, cycling (none if there is no batch)."""
    length = tf.where(self.count > 0, tf.cast(num_steps, tf.int64),
                      tf.constant(0, tf.int64))
    return BufferedBatches(self._examples, self._sizes, self._spec,
                           self._start, self.count, length, self._starts)

  def batch(self, i):
    """The `i`-th batch of the view."""
    j = self._start + tf.math.floormod(tf.cast(i, tf.int64), self.count)
    first, size = self._starts[j], self._sizes[j]
    specs = tf.nest.flatten(self._spec)
    return tf.nest.pack_sequence_as(self._spec, [
        tf.ensure_shape(e[first:first + size], s.shape)
        for e, s in zip(tf.nest.flatten(self._examples), specs)])


def cycle(data, num_steps):
  """The first `num_steps` batches of `data` (a dataset or
  `BufferedBatches`), cycling when it holds fewer; none if it is empty."""
  if isinstance(data, BufferedBatches):
    return data.cycled(num_steps)
  # repeat() of an empty dataset is empty, so an empty client ends at once.
  batches = data.repeat().take(tf.cast(num_steps, tf.int64))
  read = _read(batches, num_steps)
  return batches if read is None else read


def _read(batches, count):
  """`batches` (at most `count`) read into `BufferedBatches` by one op, or
  None if they do not stack (a dimension after the first unknown).

  Creating an iterator costs ~0.3 ms a client (in process, CPU), a fifth of
  a faithful client at bench/peers.py's size; reading the same batches in
  one `get_single_element` costs less, and the steps then index tensors.
  The batches are padded to the largest (`padded_batch`, no function call)
  and each batch's size is read beside it by a map run in the calling
  thread: 0.16 ms a client (K = 5, B = 8) against 0.35 ms for the same read
  through `ragged_batch`, whose per-batch functions run on the inter-op
  pool. Padding rows are never read: a batch is its first `size` rows."""
  spec = batches.element_spec
  specs = tf.nest.flatten(spec)
  if not all(isinstance(s, tf.TensorSpec) and s.shape.rank
             and s.shape[1:].is_fully_defined() for s in specs):
    return None
  sized = lambda *b: (tuple(tf.nest.flatten(b)), tf.shape(
      tf.nest.flatten(b)[0], out_type=tf.int64)[0])
  # `Dataset.map` runs its function on the inter-op pool; this private
  # constructor of the same dataset (pinned TF 2.14) runs it inline.
  sized_batches = map_op._MapDataset(  # pylint: disable=protected-access
      batches, sized, use_inter_op_parallelism=False,
      preserve_cardinality=True)
  last = tf.data.Dataset.from_tensors((  # An empty batch: never no element.
      tuple(tf.zeros([0, *s.shape[1:]], s.dtype) for s in specs),
      tf.constant(0, tf.int64)))
  padded, sizes = sized_batches.concatenate(last).padded_batch(
      tf.cast(count, tf.int64) + 1).get_single_element()
  rows = tf.shape(padded[0], out_type=tf.int64)[1]  # The largest batch.
  flat = [tf.reshape(p, tf.concat([[-1], tf.shape(p)[2:]], 0))
          for p in padded]
  return BufferedBatches(
      tf.nest.pack_sequence_as(spec, flat), sizes, spec,
      count=tf.size(sizes, out_type=tf.int64) - 1,
      starts=tf.range(tf.size(sizes, out_type=tf.int64)) * rows)
