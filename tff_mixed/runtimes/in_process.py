"""The in-process runtime: TFF's compiled round run by TensorFlow here.

`InProcessContext` is a TFF synchronous context (`tff.framework.SyncContext`),
so `process.next(state, client_data)` is the same call on it as on TFF's
runtime: the process stays the `tff.Computation` its builder composed, and
anything that calls TFF computations (the driver, `tff.program`, a notebook)
runs on it unchanged. What it runs instead of TFF's C++ worker:

* a round (`(state@SERVER, data@CLIENTS) -> <state@SERVER, metrics@SERVER>`,
  a learning process's `next`) is compiled once by TFF's own
  `tff.backends.mapreduce.get_map_reduce_form_for_computation` into plain
  TensorFlow phases, the form TFF describes as its path to production
  systems; each round then runs them as a MapReduce system would: `prepare`
  on the server state, `work` on each client's data (or client group, in
  fast mode) and `accumulate` of each result from `zero`, all the cohort's
  clients in one TensorFlow call (two clients' `work` side by side, their
  results accumulated in client order), then `report` and `update`;
* a computation with no parameter (a process's `initialize`) is compiled by
  `tff.backends.mapreduce.get_state_initialization_computation`;
* a TensorFlow computation (`get_model_weights`, `set_model_weights`,
  `get_hparams`, ...) is imported as it is.

Each phase is a `tf_phase.Phase`: imported once per computation and called
as a TensorFlow function, so client datasets are never serialised and the
work runs on the device TensorFlow chooses (a GPU when it sees one).
Every computation is compiled once, on its first call.

A computation the form cannot hold (secure aggregation, a federated
computation of another shape) is refused in one line that says to use TFF's
runtime (`--runtime=tff`), which runs everything.
"""

import functools
from typing import Any

import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed.runtimes import tf_phase

USE_TFF = 'use TFF\'s runtime (--runtime=tff, execution.set_runtime(\'tff\'))'


def _no_grappler() -> tf.compat.v1.ConfigProto:
  config = tf.compat.v1.ConfigProto()
  config.graph_options.rewrite_options.disable_meta_optimizer = True
  return config


# TFF's compiler runs Grappler (aggressively) over each phase it emits, and
# lowers its control flow; TensorFlow's function runtime optimises each phase
# anyway when it first runs it. Without TFF's pass a round compiles 1.6-3.3x
# faster and its phases keep functional control flow (a client loop can call
# them; see `_clients`).
_NO_GRAPPLER = _no_grappler()


class UnsupportedComputationError(ValueError):
  """A computation the in-process runtime cannot run."""


def _is_tensorflow(computation) -> bool:
  proto = tff.framework.ConcreteComputation.get_proto(computation)
  return proto.WhichOneof('computation') == 'tensorflow'


class MapReduceRound:
  """A federated round compiled to TFF's MapReduceForm, run phase by phase."""

  def __init__(self, computation):
    try:
      form = tff.backends.mapreduce.get_map_reduce_form_for_computation(
          computation, _NO_GRAPPLER)
    except (TypeError, ValueError) as e:
      raise UnsupportedComputationError(
          'The in-process runtime runs rounds TFF compiles to its '
          f'MapReduceForm, and TFF cannot compile this one ({_first_line(e)});'
          f' {USE_TFF}.') from None
    if form.securely_aggregates_tensors:
      raise UnsupportedComputationError(
          'This round aggregates securely (tff.federated_secure_sum*), which '
          f'the in-process runtime does not simulate; {USE_TFF}.')
    self.prepare = tf_phase.Phase(form.prepare)
    self.work = tf_phase.Phase(form.work)
    self._work_computation = form.work
    self.zero = tf_phase.Phase(form.zero)
    self.accumulate = tf_phase.Phase(form.accumulate)
    self.report = tf_phase.Phase(form.report)
    self.update = tf_phase.Phase(form.update)
    self._state_type = form.update.type_signature.parameter[0]
    self._data_type = form.work.type_signature.parameter[0]
    self._client_loop = self._work_then_add = None
    self._pairs = True  # Whether `_client_loop` takes two clients at a time.

  def __call__(self, arg):
    state, client_data = arg[0], arg[1]
    state = tf_phase.flatten(state, self._state_type, [])
    broadcast = list(self.prepare.call_flat(state))
    datasets = {}
    clients = [tf_phase.flatten(data, self._data_type, [], datasets)
               for data in client_data]
    total = list(self.zero.call_flat([]))
    if clients:
      columns = [tf.stack(column) for column in zip(*clients)]
      total = self._clients(total, columns, broadcast, datasets)
    reported = self.report.call_flat(list(total))
    return tf_phase.pack(self.update.call_flat(state + list(reported)),
                         self.update.type_signature.result)

  def _clients(self, total, columns, broadcast, datasets):
    """`total` plus every client's `work` result (`columns`: each client
    input tensor stacked over clients; `datasets`: {the place of a dataset
    among them: its element spec}, whose variants `flatten` left as they
    are), accumulated in one TensorFlow call:
    a loop over clients, two at a time: their `work`s run side by side
    (each pair's first client on `work`, its second on a second import of
    the phase, with variables of its own), then both results are
    accumulated in client order, so the total is the one-at-a-time total
    bit for bit; a pair starts after the previous pair is accumulated. An
    odd count's last client is one more call, after the loop (in the loop,
    its single-client graph would make the loop's first call ~0.2 s slower
    to prepare for every round, odd or not)."""
    if self._client_loop is None:
      work, accumulate = self.work, self.accumulate
      # TFF's worker runs a round's clients concurrently too; here two at a
      # time, which occupies two cores where one client's ops cannot (a
      # recurrent model's steps: the LEAF GRU's round ~1.4x faster).
      second = tf_phase.Phase(self._work_computation)

      client = functools.partial(_client, datasets=datasets)

      # `work`'s result is <to accumulate, three secure sums>: the latter are
      # empty (refused above), so all its tensors accumulate.
      n, m = len(total), len(work.specs)
      add = lambda total, result: list(accumulate.import_into_graph(
          list(total) + list(result)))
      work_then_add = self._work_then_add = tf.compat.v1.wrap_function(
          lambda *flat: add(flat[:n], work.import_into_graph(flat[n:])),
          accumulate.specs[:n] + work.specs)
      pair_then_add = tf.compat.v1.wrap_function(
          lambda *flat: add(add(
              flat[:n], work.import_into_graph(flat[n:n + m])),
                            second.import_into_graph(flat[n + m:])),
          accumulate.specs[:n] + work.specs + second.specs)

      def loop(total, columns, broadcast):
        count = tf.shape(columns[0])[0]

        def add_pair(i, total):
          with tf.control_dependencies(total):
            return list(pair_then_add(
                *total, *client(columns, i), *broadcast,
                *client(columns, i + 1), *broadcast))

        _, total = tf.while_loop(
            lambda i, _: i + 1 < count,
            lambda i, total: (i + 2, add_pair(i, total)),
            (tf.constant(0), list(total)), parallel_iterations=1)
        return total

      spec = lambda t: tf.TensorSpec(t.shape, t.dtype)
      try:
        self._client_loop = tf.function(
            loop, autograph=False).get_concrete_function(
            [spec(t) for t in total],
            [tf.TensorSpec([None], c.dtype) for c in columns],
            [spec(t) for t in broadcast])
      except tf.errors.InternalError:
        # A `work` graph with v1 control flow cannot be called inside a TF
        # loop ("Missing src context"; TFF's Grappler pass left it in
        # vectorised groups' before `_NO_GRAPPLER`, and no registry
        # algorithm's does now): such a round loops in Python, the same
        # call a client (group).
        self._client_loop = _python_loop(work_then_add, client)
        self._pairs = False
    total = self._client_loop(total, columns, broadcast)
    count = int(columns[0].shape[0])
    if self._pairs and count % 2:  # An odd count's last client, alone.
      total = list(self._work_then_add(
          *total, *_client(columns, count - 1, datasets), *broadcast))
    return total


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


class _Initialize:
  """A no-parameter federated computation (a process's `initialize`)."""

  def __init__(self, computation):
    try:
      self._phase = tf_phase.Phase(
          tff.backends.mapreduce.get_state_initialization_computation(
              computation))
    except (TypeError, ValueError) as e:
      raise UnsupportedComputationError(
          'The in-process runtime cannot compile this parameterless '
          f'computation to TensorFlow ({_first_line(e)}); {USE_TFF}.'
      ) from None

  def __call__(self, arg):
    del arg  # None.
    return self._phase()


def _first_line(error: Exception) -> str:
  return (str(error).strip().splitlines() or [type(error).__name__])[0]


def compile_computation(computation):
  """`computation` as a callable of its packed argument, for this runtime.

  Raises:
    UnsupportedComputationError: For a computation this runtime cannot run
      (the message says which runtime to use).
  """
  if _is_tensorflow(computation):
    return tf_phase.Phase(computation)
  signature = computation.type_signature
  if signature.parameter is None:
    return _Initialize(computation)
  return MapReduceRound(computation)


class InProcessContext(tff.framework.SyncContext):
  """A TFF context that runs computations in this process's TensorFlow."""

  def __init__(self):
    # id -> (computation, compiled): the computation is kept so its id is
    # never reused while the entry lives.
    self._compiled: dict[int, tuple[Any, Any]] = {}

  def compiled(self, computation):
    """`computation` compiled for this runtime (once)."""
    entry = self._compiled.get(id(computation))
    if entry is None:
      entry = (computation, compile_computation(computation))
      self._compiled[id(computation)] = entry
    return entry[1]

  def invoke(self, comp, arg):
    if not isinstance(comp, tff.framework.ConcreteComputation):
      raise UnsupportedComputationError(
          f'The in-process runtime runs TFF computations, got {type(comp)}.')
    result = self.compiled(comp)(arg)
    return tff.types.type_to_py_container(result, comp.type_signature.result)
