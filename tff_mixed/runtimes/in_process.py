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

from collections.abc import Callable
from typing import Any, Optional
import weakref

import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed.runtimes import client_loop
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


# How many clients (or groups) a round trains at once by default.
default_concurrency = client_loop.default_concurrency


class ComputationCache:
  """What is made once per computation (its form, its compiled callable),
  by the computation's identity, each entry dropped once the computation
  is garbage-collected: a notebook or a test worker trains hundreds of
  processes, and an entry that kept its computation alive kept ~80 MB a
  digits run (RSS +590 MB over 8 runs, flat with the entries dropped)."""

  def __init__(self):
    self._entries: dict[int, Any] = {}

  def get(self, computation, make: Callable[[], Any]):
    """The entry of `computation`, made by `make()` the first time. `make`
    must not keep `computation` (it would never be collected)."""
    key = id(computation)
    try:
      return self._entries[key]
    except KeyError:
      pass
    entry = self._entries[key] = make()
    # Runs before the id can be reused: the entry goes with its computation.
    weakref.finalize(computation, self._entries.pop, key, None)
    return entry

  def __len__(self) -> int:
    return len(self._entries)


# Each round's MapReduceForm, made once a process whichever runtime asks.
_forms = ComputationCache()


def map_reduce_form(computation, runtime: str = 'in-process'):
  """`computation` (a round) compiled to TFF's MapReduceForm for a runtime
  that runs its phases (this one, `ray_runtime`), once a process.

  Raises:
    UnsupportedComputationError: For a round the form cannot hold (the
      message names `runtime` and says to use TFF's).
  """
  return _forms.get(computation, lambda: _form(computation, runtime))


def _form(computation, runtime: str):
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
  return form


class MapReduceRound(client_loop.ClientLoop):
  """A federated round compiled to TFF's MapReduceForm, run phase by phase,
  its clients `concurrency` at a time (`client_loop.ClientLoop`)."""

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
    n = len(self.update.specs) - client_loop.tensor_count(
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
  concurrency = client_loop.checked_concurrency(concurrency)
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
    self.concurrency = client_loop.checked_concurrency(concurrency)
    self._compiled = ComputationCache()

  def compiled(self, computation):
    """`computation` compiled for this runtime (once while it lives)."""
    return self._compiled.get(computation, lambda: compile_computation(
        computation, concurrency=self.concurrency))

  def invoke(self, comp, arg):
    if not isinstance(comp, tff.framework.ConcreteComputation):
      raise UnsupportedComputationError(
          f'The in-process runtime runs TFF computations, got {type(comp)}.')
    result = self.compiled(comp)(arg)
    return tff.types.type_to_py_container(result, comp.type_signature.result)
