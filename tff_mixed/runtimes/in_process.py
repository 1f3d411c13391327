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
  clients in one TensorFlow call (`concurrency` clients' `work` side by side,
  their results accumulated in client order; a remainder after it), then
  `report` and `update`;
* a computation with no parameter (a process's `initialize`) is compiled by
  `tff.backends.mapreduce.get_state_initialization_computation`;
* a TensorFlow computation (`get_model_weights`, `set_model_weights`,
  `get_hparams`, ...) is imported as it is.

Each phase is a `tf_phase.Phase`: imported once per computation and called
as a TensorFlow function, so client datasets are never serialised and the
work runs on the device TensorFlow chooses; with GPUs, each client in flight
on one of them in turn. Every computation is compiled once, on its first
call.

How many clients (or client groups) train at once is the context's one
execution value, `concurrency` (default `default_concurrency()`: one per GPU,
else one per core). It never changes a result: whatever it is, the clients'
results are accumulated in client order, so the total is the one-at-a-time
total bit for bit.

A computation the form cannot hold (secure aggregation, a federated
computation of another shape) is refused in one line that says to use TFF's
runtime (`--runtime=tff`), which runs everything.
"""

import contextlib
import functools
import itertools
import numbers
import os
from typing import Any, Optional

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


def default_concurrency() -> int:
  """How many clients (or client groups) a round trains at once by default:
  one per GPU TensorFlow lists (each client in flight on one of them), else
  one per core (`os.cpu_count()`); at least one."""
  gpus = len(tf.config.list_physical_devices('GPU'))
  return max(gpus or os.cpu_count() or 1, 1)


def _checked_concurrency(concurrency: Optional[int]) -> int:
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


# id -> (round, its form): each round compiled once a process, whichever
# runtime asks (the round is kept, so its id is not reused).
_forms: dict[int, tuple[Any, Any]] = {}


def map_reduce_form(computation, runtime: str = 'in-process'):
  """`computation` (a round) compiled to TFF's MapReduceForm for a runtime
  that runs its phases (this one, `ray_runtime`), once a process.

  Raises:
    UnsupportedComputationError: For a round the form cannot hold (the
      message names `runtime` and says to use TFF's).
  """
  entry = _forms.get(id(computation))
  if entry is None:
    try:
      form = tff.backends.mapreduce.get_map_reduce_form_for_computation(
          computation, _NO_GRAPPLER)
    except (TypeError, ValueError) as e:
      raise UnsupportedComputationError(
          f'The {runtime} runtime runs rounds TFF compiles to its '
          f'MapReduceForm, and TFF cannot compile this one ({_first_line(e)});'
          f' {USE_TFF}.') from None
    if form.securely_aggregates_tensors:
      raise UnsupportedComputationError(
          'This round aggregates securely (tff.federated_secure_sum*), which '
          f'the {runtime} runtime does not simulate; {USE_TFF}.')
    entry = _forms[id(computation)] = (computation, form)
  return entry[1]


class ClientLoop:
  """The client side of a round compiled to TFF's MapReduceForm: `work` on
  each client's data (or client group) and `accumulate` of each result,
  `concurrency` clients at a time (None: `default_concurrency()`; the
  total is the same whatever it is), in one TensorFlow call
  (`accumulated`). A round runs it here (`MapReduceRound`), a Ray actor on
  its share of the cohort (`ray_runtime`)."""

  def __init__(self, zero, work, accumulate, *,
               concurrency: Optional[int] = None):
    self.concurrency = _checked_concurrency(concurrency)
    self.work = tf_phase.Phase(work)
    self._work_computation = work
    self.zero = tf_phase.Phase(zero)
    self.accumulate = tf_phase.Phase(accumulate)
    self._data_type = work.type_signature.parameter[0]
    # How many tensors the clients' total has.
    self._accumulators = _tensor_count(
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


class MapReduceRound(ClientLoop):
  """A federated round compiled to TFF's MapReduceForm, run phase by phase,
  its clients `concurrency` at a time (`ClientLoop`)."""

  def __init__(self, computation, *, concurrency: Optional[int] = None):
    form = map_reduce_form(computation)
    super().__init__(form.zero, form.work, form.accumulate,
                     concurrency=concurrency)
    self.prepare = tf_phase.Phase(form.prepare)
    self.report = tf_phase.Phase(form.report)
    self.update = tf_phase.Phase(form.update)
    self._state_type = form.update.type_signature.parameter[0]
    # The round's server side in two calls (prepare and zero; report and
    # update), each phase a call of its own inside (`Phase.function`): two
    # calls' Python instead of four's (`_server_functions`).
    self._server = None
    # The result in the round's Python containers (what `invoke`'s
    # `type_to_py_container` gives: given them, it returns them as they
    # are), or None: packed into `Struct`s for it.
    result = computation.type_signature.result
    self._result = (tf_phase.python_packer(result) if _leaves(result) ==
                    _leaves(form.update.type_signature.result) else None)

  def __call__(self, arg):
    state, client_data = arg[0], arg[1]
    state = tf_phase.flatten(state, self._state_type, [])
    start, finish = self._server or self._server_functions()
    started = tf_phase.call(start, state)
    split = len(started) - self._accumulators
    broadcast, total = list(started[:split]), list(started[split:])
    datasets = {}
    clients = [tf_phase.flatten(data, self._data_type, [], datasets)
               for data in client_data]
    total = self.accumulated(total, clients, broadcast, datasets)
    result = tf_phase.call(finish, state + list(total))
    if self._result is None:
      return tf_phase.pack(result, self.update.type_signature.result)
    return self._result(result)

  def _server_functions(self):
    """`(start, finish)`: `start(*state) -> [*broadcast, *zero]` (prepare
    and zero) and `finish(*state, *total) -> update's result` (report,
    then update)."""
    prepare, zero = self.prepare.function, self.zero.function
    report, update = self.report.function, self.update.function
    start = tf.compat.v1.wrap_function(
        lambda *state: list(prepare(*state)) + list(zero()),
        self.prepare.specs)
    n = len(self.update.specs) - _tensor_count(
        self.report.type_signature.result)  # The state's.
    finish = tf.compat.v1.wrap_function(
        lambda *flat: list(update(*flat[:n], *report(*flat[n:]))),
        self.update.specs[:n] + self.report.specs)
    self._server = start, finish
    return self._server

def _leaves(type_spec) -> list:
  """The names' paths, dtypes and shapes of a type's tensors, in order
  (placements aside)."""
  if isinstance(type_spec, tff.FederatedType):
    return _leaves(type_spec.member)
  if isinstance(type_spec, tff.StructType):
    return [((name,) + path, leaf)
            for name, t in tff.structure.iter_elements(type_spec)
            for path, leaf in _leaves(t)]
  return [((), type_spec)]


def _tensor_count(type_spec) -> int:
  """How many tensors a value of `type_spec` (tensors in structs) has."""
  if isinstance(type_spec, tff.StructType):
    return sum(_tensor_count(t)
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


def compile_computation(computation, *, concurrency: Optional[int] = None):
  """`computation` as a callable of its packed argument, for this runtime
  (a round trains `concurrency` clients at a time; `MapReduceRound`).

  Raises:
    UnsupportedComputationError: For a computation this runtime cannot run
      (the message says which runtime to use).
    ValueError: For a `concurrency` that is not an int >= 1.
  """
  concurrency = _checked_concurrency(concurrency)
  if _is_tensorflow(computation):
    return tf_phase.Phase(computation)
  signature = computation.type_signature
  if signature.parameter is None:
    return _Initialize(computation)
  return MapReduceRound(computation, concurrency=concurrency)


class InProcessContext(tff.framework.SyncContext):
  """A TFF context that runs computations in this process's TensorFlow.

  Attributes:
    concurrency: How many clients (or client groups) each round it compiles
      trains at once (`MapReduceRound`); the results do not depend on it.
  """

  def __init__(self, concurrency: Optional[int] = None):
    """Initialises the context.

    Args:
      concurrency: How many clients (or client groups) a round trains at
        once: an int >= 1, or None for `default_concurrency()` (the number
        of GPUs TensorFlow lists, else of cores).

    Raises:
      ValueError: For a `concurrency` that is not an int >= 1.
    """
    self.concurrency = _checked_concurrency(concurrency)
    # id -> (computation, compiled): the computation is kept so its id is
    # never reused while the entry lives.
    self._compiled: dict[int, tuple[Any, Any]] = {}

  def compiled(self, computation):
    """`computation` compiled for this runtime (once)."""
    entry = self._compiled.get(id(computation))
    if entry is None:
      entry = (computation, compile_computation(
          computation, concurrency=self.concurrency))
      self._compiled[id(computation)] = entry
    return entry[1]

  def invoke(self, comp, arg):
    if not isinstance(comp, tff.framework.ConcreteComputation):
      raise UnsupportedComputationError(
          f'The in-process runtime runs TFF computations, got {type(comp)}.')
    result = self.compiled(comp)(arg)
    return tff.types.type_to_py_container(result, comp.type_signature.result)
