"""Sparse communication of one embedding table's rows (seed 004 §1, App. C.3).

The building blocks of `tff_mixed.algorithms.build_selected_rows_mixed_fl`:
`RowDownload` moves each client only the rows its round's batches read
(`tff.federated_select`), `build_row_aggregation` scatters the clients' row
updates into table-sized sums at the aggregator (`tff.federated_aggregate`),
and `client_costs` measures what moved (seed 004 Table 5).
"""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed import keys
from tff_mixed.templates import step_loop

_FLOAT_BYTES = 4
_KEY_BYTES = 4


class RowDownload:
  """The sparse download: each client's row ids, then only those rows.

  `keys, counts, rows = download(table@SERVER, data@CLIENTS, K@CLIENTS)`
  inside a federated computation: `keys` (int32[max_rows]) are the sorted
  ids of the rows the client's next K batches read, padded by repeating the
  first; `counts` how many are real; `rows` the selected rows (a sequence of
  `max_rows` rows) moved by `tff.federated_select`.
  `download.select(keys, other_table)` selects the same rows of another
  table-shaped server value (Gradient Transfer's g~_c).
  """

  def __init__(self, data_type, row_ids_fn, *, table_type: tff.TensorType,
               max_rows_per_client: int):
    num_rows = int(table_type.shape[0])
    max_rows = max_rows_per_client

    def used_ids(ids):
      """(indices, updates) marking the non-negative ids as used."""
      ids = tf.reshape(tf.cast(ids, tf.int64), [-1])
      ids = tf.boolean_mask(ids, ids >= 0)
      return ids[:, tf.newaxis], tf.ones_like(ids, tf.bool)

    @tf.function(autograph=False)
    def rows_read(batches):
      return step_loop.fold(
          lambda used, batch: tf.tensor_scatter_nd_update(
              used, *used_ids(row_ids_fn(batch))),
          tf.zeros([num_rows], tf.bool), batches)

    @tff.tensorflow.computation(data_type, np.int32)
    def client_keys(data, num_local_steps):
      used = rows_read(data.repeat().take(tf.cast(num_local_steps, tf.int64)))
      ids = tf.cast(tf.reshape(tf.where(used), [-1]), tf.int32)
      count = tf.size(ids)
      with tf.control_dependencies([tf.debugging.assert_less_equal(
          count, max_rows,
          message=f'A client reads more table rows than max_rows_per_client='
          f'{max_rows}; raise it.')]):
        pad = tf.fill([max_rows - count], tf.concat([ids, [0]], 0)[0])
      return tf.reshape(tf.concat([ids, pad], 0), [max_rows]), count

    @tff.tensorflow.computation(table_type, np.int32)
    def select_row(table, key):
      return tf.gather(table, key)

    self._client_keys, self._select_row = client_keys, select_row
    self._max_key = np.int32(num_rows - 1)

  def select(self, keys, server_table):
    """`tff.federated_select` of `server_table`'s rows at each client's
    `keys` (inside a federated computation)."""
    max_key = tff.federated_value(self._max_key, tff.SERVER)
    return tff.federated_select(keys, max_key, server_table, self._select_row)

  def __call__(self, server_table, client_data, num_local_steps):
    keys, counts = tff.federated_map(
        self._client_keys, (client_data, num_local_steps))
    return keys, counts, self.select(keys, server_table)


def client_costs(out, count, *, dim, other_floats, gradient_transfer,
           flops_per_step):
  """A client's rows, bytes (seed 004 Table 5) and FLOPs."""
  n = tf.cast(count, tf.float32)
  row_bytes = n * dim * _FLOAT_BYTES
  rest_bytes = float(other_floats * _FLOAT_BYTES)
  copies = 2.0 if gradient_transfer else 1.0
  steps = tf.cast(out.sgd_steps, tf.float32)
  flops = tf.constant(0.0)
  if flops_per_step is not None:  # At the client's mean batch size.
    batch = tf.math.divide_no_nan(out.result.update_weight, steps)
    flops = steps * tf.cast(flops_per_step(batch), tf.float32)
  return collections.OrderedDict(
      **{keys.ROWS_PER_CLIENT: n,
         keys.EMBEDDING_BYTES: (copies + 1.0) * row_bytes,
         keys.BYTES_DOWNLOADED: copies * (row_bytes + rest_bytes),
         keys.BYTES_UPLOADED: row_bytes + rest_bytes + n * _KEY_BYTES,
         keys.CLIENT_FLOPS: flops},
  )


def build_row_aggregation(upload_type, *, num_rows, dim, other_shapes,
                           max_rows, two_way):
  """`upload@CLIENTS -> sums@SERVER`, scattering rows at the aggregator."""

  @tff.tensorflow.computation
  def zero_sum():
    total = collections.OrderedDict(
        rows=tf.zeros([num_rows, dim]),
        rest=[tf.zeros(s) for s in other_shapes],
        weight=tf.constant(0.0))
    if two_way:
      total['unweighted_rows'] = tf.zeros([num_rows, dim])
      total['unweighted_rest'] = [tf.zeros(s) for s in other_shapes]
      total['row_steps'] = tf.zeros([num_rows, 1])
      total['steps'] = tf.constant(0.0)
    return total

  sum_type = zero_sum.type_signature.result

  @tff.tensorflow.computation(sum_type, upload_type)
  def accumulate(total, upload):
    keys = upload['keys'][:, tf.newaxis]  # Padding rows carry zeros.
    new = collections.OrderedDict(
        rows=tf.tensor_scatter_nd_add(total['rows'], keys,
                                      upload['weighted_rows']),
        rest=[t + u for t, u in zip(total['rest'], upload['weighted_rest'])],
        weight=total['weight'] + upload['weight'])
    if two_way:
      new['unweighted_rows'] = tf.tensor_scatter_nd_add(
          total['unweighted_rows'], keys, upload['rows'])
      new['unweighted_rest'] = [
          t + u for t, u in zip(total['unweighted_rest'], upload['rest'])]
      # Steps of the clients holding each row (padding keys count nothing).
      held = tf.cast(tf.range(max_rows) < upload['count'], tf.float32)
      new['row_steps'] = tf.tensor_scatter_nd_add(
          total['row_steps'], keys, (upload['steps'] * held)[:, tf.newaxis])
      new['steps'] = total['steps'] + upload['steps']
    return new

  @tff.tensorflow.computation(sum_type, sum_type)
  def merge(a, b):
    return tf.nest.map_structure(tf.add, a, b)

  @tff.tensorflow.computation(sum_type)
  def report(total):
    return total

  def aggregate(upload):
    return tff.federated_aggregate(upload, zero_sum(), accumulate, merge,
                                   report)

  return aggregate
