"""The client side of a round compiled to TFF's MapReduceForm, as the
in-process runtime (`in_process.MapReduceRound`) and a Ray actor
(`ray_actor.ActorBody`) run it: `ClientLoop`, and how many clients it
trains at once by default (`default_concurrency`).
"""

import contextlib
import functools
import itertools
import numbers
import os
from typing import Optional

import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed.runtimes import tf_phase


def default_concurrency() -> int:
  """How many clients (or client groups) a round trains at once by default:
  one per GPU TensorFlow lists (each client in flight on one of them), else
  one per core (`os.cpu_count()`); at least one."""
  gpus = len(tf.config.list_physical_devices('GPU'))
  return max(gpus or os.cpu_count() or 1, 1)


def share_cores() -> Optional[int]:
  """Gives each TensorFlow call the in-process runtime makes at once its
  share of the machine: TensorFlow's intra-op threads (the pool that splits
  one op over cores, one pool a process) set to the cores over
  `default_concurrency()`, at least 1: on a CPU machine, one. Two calls at
  once that each split their ops over every core oversubscribe them: a
  fast-mode round of 50 clients in two groups took 7.1-9.4 ms against
  4-5.2 ms with one thread a call (BENCHMARKS.md); a single large call (an
  evaluation) then runs on its share only. Only while TensorFlow has not
  started (its context fixes the pool) and nobody chose a count
  (`TF_NUM_INTRAOP_THREADS`, `tf.config.threading`); returns the count
  set, or None if it left TensorFlow's as it was."""
  if (os.environ.get('TF_NUM_INTRAOP_THREADS')
      or tf.config.threading.get_intra_op_parallelism_threads()):
    return None
  threads = max(1, (os.cpu_count() or 1) // default_concurrency())
  try:
    tf.config.threading.set_intra_op_parallelism_threads(threads)
  except RuntimeError:  # TensorFlow has started: its pool is fixed.
    return None
  return threads


def checked_concurrency(concurrency: Optional[int]) -> int:
  """`concurrency` (None: `default_concurrency()`) if it is an int >= 1.

  Raises:
    ValueError: Otherwise (one line naming the value).
  """
  if concurrency is None:
    return default_concurrency()
  if (isinstance(concurrency, bool) or
      not isinstance(concurrency, numbers.Integral) or concurrency < 1):
    raise ValueError(
        f'concurrency must be an int >= 1, got {concurrency!r}.')
  return int(concurrency)


class ClientLoop:
  """The client side of a round compiled to TFF's MapReduceForm: `work` on
  each client's data (or client group) and `accumulate` of each result,
  `concurrency` clients at a time (None: `default_concurrency()`; the
  total is the same whatever it is), in one TensorFlow call
  (`accumulated`). A round runs it here (`MapReduceRound`), a Ray actor on
  its share of the cohort (`ray_runtime`)."""

  def __init__(self, zero, work, accumulate, *,
               concurrency: Optional[int] = None):
    self.concurrency = checked_concurrency(concurrency)
    self.work = tf_phase.Phase(work)
    self._work_computation = work
    self.zero = tf_phase.Phase(zero)
    self.accumulate = tf_phase.Phase(accumulate)
    self._data_type = work.type_signature.parameter[0]
    # How many tensors the clients' total has.
    self._accumulators = tensor_count(
        accumulate.type_signature.parameter[0])
    # Imports of `work`, one per client in flight (`_lane`); the functions
    # `(total, *client 1, *broadcast, ..., *client w, *broadcast) -> total`
    # of w clients (`_group`), each built once, on first need.
    self._lanes = [self.work]
    self._groups = {}
    self._client_loop = None
    self._in_tensorflow = True  # Whether `_client_loop` is a TF loop.

  def accumulated(self, total: list, clients: list, broadcast: list,
                  datasets: dict) -> list:
    """`total` plus the `work` result of each of `clients` (each client's
    flat `work` inputs: `tf_phase.flatten`'s, `datasets` the places of its
    datasets' variants), in client order."""
    if not clients:
      return list(total)
    columns = [tf.stack(column) for column in zip(*clients)]
    return self._clients(total, columns, broadcast, datasets)

  @property
  def _work_then_add(self):
    """`_group(1)`: one client's `work`, accumulated into the total."""
    return self._group(1)

  def _lane(self, j: int) -> tf_phase.Phase:
    """The `work` phase of the j-th client in flight: an import of its own
    (its variables are its own), so clients side by side share nothing."""
    while len(self._lanes) <= j:
      self._lanes.append(tf_phase.Phase(self._work_computation))
    return self._lanes[j]

  def _group(self, width: int):
    """The function `(total, *client 1's tensors, *broadcast, ..., *client
    width's, *broadcast) -> total`: the clients' `work`s side by side (with
    GPUs, the j-th on GPU j % their number), then their results accumulated
    in client order (each after the previous), so the total is the
    one-at-a-time total bit for bit."""
    group = self._groups.get(width)
    if group is not None:
      return group
    lanes = [self._lane(j) for j in range(width)]
    # Each accumulate a call of its own: inlined, Grappler would rewrite a
    # group's chain of them, summing in another order (`Phase.function`).
    add, n = self.accumulate.function, self._accumulators
    gpus = [gpu.name for gpu in tf.config.list_logical_devices('GPU')]

    def work_then_add(*flat):
      total, results, start = list(flat[:n]), [], n
      for j, lane in enumerate(lanes):
        arg = flat[start:start + len(lane.specs)]
        start += len(lane.specs)
        with (tf.device(gpus[j % len(gpus)]) if gpus
              else contextlib.nullcontext()):
          results.append(lane.import_into_graph(arg))
      # `work`'s result is <to accumulate, three secure sums>: the latter
      # are empty (refused above), so all its tensors accumulate.
      for result in results:
        total = list(add(*total, *result))
      return total

    group = self._groups[width] = tf.compat.v1.wrap_function(
        work_then_add, self.accumulate.specs[:n] +
        [spec for lane in lanes for spec in lane.specs])
    return group

  def _clients(self, total, columns, broadcast, datasets):
    """`total` plus every client's `work` result (`columns`: each client
    input tensor stacked over clients; `datasets`: {the place of a dataset
    among them: its element spec}, whose variants `flatten` left as they
    are), accumulated in client order in one TensorFlow call: a loop over
    the clients, `concurrency` at a time (`_group`); a group starts after
    the previous one is accumulated. The count's remainder (count %
    concurrency) follows the loop: a call of a group for each of its binary
    digits, the widest first (in the loop, a group of another width would
    make the loop's first call slower to prepare for every round, a
    remainder or not), so a run builds at most ceil(log2(concurrency)) more
    groups, each once, whatever its cohorts' sizes."""
    width = self.concurrency
    client = functools.partial(_client, datasets=datasets)
    if self._client_loop is None:
      self._client_loop = self._loop(width, client, total, columns, broadcast)
    if not self._in_tensorflow:
      return self._client_loop(total, columns, broadcast)
    count = int(columns[0].shape[0])
    start = count - count % width
    if start:
      total = tf_phase.call(self._client_loop, [
          *total, *columns, *broadcast, tf.constant(start)])
    for bit in reversed(range((count % width).bit_length())):
      if (count - start) & (1 << bit):
        total = tf_phase.call(self._group(1 << bit), list(total) + [
            t for i in range(start, start + (1 << bit))
            for t in client(columns, i) + broadcast])
        start += 1 << bit
    return list(total)

  def _loop(self, width, client, total, columns, broadcast):
    """The concrete function `(*total, *columns, *broadcast, stop) ->
    total` running `_group(width)` over the clients [0, stop) (stop a
    multiple of width); or, for a `work` graph a TF loop cannot call, a
    Python loop over every client, one at a time (`_python_loop`)."""
    group = self._group(width)
    sizes = list(itertools.accumulate([len(total), len(columns)]))

    def loop(*flat):
      total, columns, broadcast, stop = (
          flat[:sizes[0]], flat[sizes[0]:sizes[1]], list(flat[sizes[1]:-1]),
          flat[-1])

      def add_group(i, total):
        with tf.control_dependencies(total):
          return list(group(*total, *[
              t for j in range(width)
              for t in client(columns, i + j) + broadcast]))

      _, total = tf.while_loop(
          lambda i, _: i < stop,
          lambda i, total: (i + width, add_group(i, total)),
          (tf.constant(0), list(total)), parallel_iterations=1)
      return total

    spec = lambda t: tf.TensorSpec(t.shape, t.dtype)
    try:
      return tf.function(loop, autograph=False).get_concrete_function(
          *[spec(t) for t in total],
          *[tf.TensorSpec([None], c.dtype) for c in columns],
          *[spec(t) for t in broadcast], tf.TensorSpec([], tf.int32))
    except tf.errors.InternalError:
      # A `work` graph with v1 control flow cannot be called inside a TF
      # loop ("Missing src context"; TFF's Grappler pass left it in
      # vectorised groups' before `_NO_GRAPPLER`, and no registry
      # algorithm's does now): such a round loops in Python, the same
      # call a client (group).
      self._in_tensorflow = False
      return _python_loop(self._work_then_add, client)


def tensor_count(type_spec) -> int:
  """How many tensors a value of `type_spec` (tensors in structs) has."""
  if isinstance(type_spec, tff.StructType):
    return sum(tensor_count(t)
               for _, t in tff.structure.iter_elements(type_spec))
  return 1


def _client(columns, i, datasets):
  """Client `i`'s tensors (`columns`: each stacked over clients), its
  datasets (at the places of `datasets`) with tf.data's static
  optimisations off."""
  return [tf_phase.unoptimised(c[i], datasets[j]) if j in datasets else c[i]
          for j, c in enumerate(columns)]


def _python_loop(work_then_add, client):
  """`MapReduceRound._clients`' loop in Python: `work_then_add(*total,
  *client i's tensors, *broadcast)` is the new total."""

  def loop(total, columns, broadcast):
    for i in range(int(columns[0].shape[0])):
      total = list(work_then_add(*total, *client(columns, i), *broadcast))
    return total

  return loop
