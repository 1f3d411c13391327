"""What runs in a Ray actor of the Ray runtime, and what travels to it.

`ActorBody` is the actor (`ray_runtime.RayContext` starts them): it keeps
the client loops of the last round computations it ran (`KEPT`; the
in-process runtime's `ClientLoop` over the `zero`, `work` and `accumulate`
phases, each imported once while kept) and trains the blocks of clients it
is sent. A block travels as a
`NamedBlock` (client ids: the actor builds their data with its own copy of
the task, `Task.rebuild`) or as `encode`d datasets (each as its `tf.data`
graph), which `decode` makes datasets again here.
"""

import collections
import gc
import os
import time
from typing import Any, Callable, Optional

import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed.runtimes import client_loop
from tff_mixed.runtimes import ray_session
from tff_mixed.runtimes import tf_phase
# The ops `Dataset` uses to serialise itself and back, without a Dataset.
from tensorflow.python.ops import gen_dataset_ops  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.ops import gen_experimental_dataset_ops  # pylint: disable=g-direct-tensorflow-import

_FAIL_ON_EXTERNAL_STATE = 2  # tf.data's ExternalStatePolicy.POLICY_FAIL.


def _computation(serialized: bytes):
  """A TFF computation back from `_proto_bytes`."""
  from tensorflow_federated.proto.v0 import computation_pb2  # pylint: disable=g-import-not-at-top
  return tff.framework.ConcreteComputation(
      computation_proto=computation_pb2.Computation.FromString(serialized),
      context_stack=tff.framework.get_context_stack())


def _client_loop(zero: bytes, work: bytes, accumulate: bytes,
                 concurrency: int) -> client_loop.ClientLoop:
  """An actor's part of a round computation: the in-process runtime's
  client loop (`zero`, then `work` and `accumulate` of each client of a
  block in order, in one TensorFlow call)."""
  return client_loop.ClientLoop(
      *(_computation(c) for c in (zero, work, accumulate)),
      concurrency=concurrency)


class NamedBlock:
  """A block of a `NamedCohort` as it travels: its items' client ids, the
  round, and the task's `rebuild` (in Ray's object store, fetched once by
  each actor), so the actor builds its clients' data itself."""

  def __init__(self, rebuild_ref, cohort, items: list):
    self.rebuild_key = rebuild_ref.hex()
    self.rebuild_box = [rebuild_ref]  # In a list: Ray passes the reference.
    self.seed, self.round_num = cohort.seed, cohort.round_num
    self.grouped = cohort.grouped
    self.members = [cohort.members[i] for i in items]

  def __len__(self) -> int:
    return sum(len(m) for m in self.members)


@tf.function(autograph=False)
def _graphs(variants: tf.Tensor) -> tf.Tensor:
  """Each dataset's graph (`DatasetToGraphV2`, refusing external state),
  for a vector of datasets' variants: one TensorFlow call a block."""
  return tf.map_fn(
      lambda v: gen_dataset_ops.dataset_to_graph_v2(
          v, external_state_policy=_FAIL_ON_EXTERNAL_STATE,
          strip_device_assignment=True),
      variants, fn_output_signature=tf.string)


def _places(clients: list) -> list:
  """(client, position) of each dataset among `clients` (each client's
  (flat inputs, {a dataset's place among them: its element spec}))."""
  return [(c, i) for c, (_, datasets) in enumerate(clients) for i in datasets]


def encode(clients: list) -> list:
  """The clients' flat `work` inputs as they travel: a tensor as a NumPy
  value, a dataset as its graph and its element's dtypes (shapes are the
  graph's own; pickling specs would cost more than the rest of a small
  client's message).

  Raises:
    RayRuntimeError: For a dataset that cannot leave this process.
  """
  places = _places(clients)
  graphs = []
  if places:
    try:
      graphs = _graphs(
          tf.stack([clients[c][0][i] for c, i in places])).numpy()
    except tf.errors.FailedPreconditionError as e:
      raise ray_session.RayRuntimeError(
          'a client dataset holds state that cannot leave this process '
          f'({ray_session.first_line(e)}); build it from files or tensors, or use '
          '--runtime=in_process.') from None
  encoded = [[None] * len(flat) for flat, _ in clients]
  for (c, i), graph in zip(places, graphs):
    encoded[c][i] = ('dataset', graph, tuple(
        spec.dtype.as_datatype_enum
        for spec in tf.nest.flatten(clients[c][1][i])))
  for c, (flat, datasets) in enumerate(clients):
    for i, value in enumerate(flat):
      if i not in datasets:
        encoded[c][i] = value.numpy()
  return encoded


def decode(client: list) -> list:
  """`encode`'s message of one client as its flat `work` inputs: each
  dataset made again from its graph, every other value a tensor."""
  flat = []
  for value in client:
    if isinstance(value, tuple):
      _, graph, dtypes = value
      flat.append(tf_phase.unoptimised(
          gen_experimental_dataset_ops.dataset_from_graph(graph),
          [tf.TensorSpec(None, tf.as_dtype(d)) for d in dtypes]))
    else:
      flat.append(tf.constant(value))
  return flat


class ActorDataError(RuntimeError):
  """An actor could not build its clients' data (one line)."""


# How many round computations (and tasks) an actor keeps made. An actor
# lives as long as its Ray session, across every process a notebook or test
# worker runs on it; keeping all of them grew each actor ~17.5 MB a process
# of the tests' linear model, and flat (~1 MB) keeping two. A run uses one
# round computation; one dropped and used again is imported again, with the
# same result (tests/test_ray_runtime.py).
KEPT = 2


class _Recent:
  """The `KEPT` entries used last, by key; older ones are dropped."""

  def __init__(self):
    self._entries = collections.OrderedDict()

  def get(self, key, make: Callable[[], Any]):
    """The entry of `key`, made by `make()` if it is not kept."""
    if key in self._entries:
      self._entries.move_to_end(key)
      return self._entries[key]
    entry = self._entries[key] = make()
    if len(self._entries) > KEPT:
      while len(self._entries) > KEPT:
        self._entries.popitem(last=False)
      # A client loop's functions are in reference cycles: without a
      # collection now, a dropped one stays until Python's next.
      gc.collect()
    return entry

  def __len__(self) -> int:
    return len(self._entries)


class ActorBody:
  """The Ray actor: keeps the last few round computations' client loops
  (`KEPT`), and the tasks their clients' data is built with."""

  def __init__(self, threads: Optional[int]):
    if threads:
      tf.config.threading.set_intra_op_parallelism_threads(threads)
      tf.config.threading.set_inter_op_parallelism_threads(threads)
    # Clients one at a time on one thread, else as many as in process.
    self._concurrency = 1 if threads == 1 else None
    self._loops = _Recent()  # Round computation's key -> `_client_loop`.
    self._tasks = _Recent()  # A `NamedBlock`'s task, built here once.

  def ready(self) -> int:
    """This actor's process id, once it is up (the runtime waits on it)."""
    return os.getpid()

  def kept(self) -> tuple[int, int]:
    """How many client loops and tasks this actor keeps."""
    return len(self._loops), len(self._tasks)

  def gpus(self) -> list:
    """The GPUs TensorFlow sees in this actor (Ray shows it its own)."""
    return [d.name for d in tf.config.list_physical_devices('GPU')]

  def train(self, key: int, phases: list, broadcast: list,
            clients) -> tuple[list, float]:
    """The accumulator of `clients` (encoded, or a `NamedBlock`), and the
    seconds it took here (building the named clients' data included)."""
    begin = time.perf_counter()
    # Made on first use here (or in a restarted actor).
    loop = self._loops.get(key, lambda: _client_loop(
        *ray_session.import_ray().get(phases[0]),
        concurrency=self._concurrency))
    datasets = {}
    if isinstance(clients, NamedBlock):
      flat = self._built(clients, loop._data_type, datasets)  # pylint: disable=protected-access
    else:
      flat = [decode(client) for client in clients]
    total = loop.accumulated(list(loop.zero.call_flat([])), flat,
                             [tf.constant(b) for b in broadcast], datasets)
    return [t.numpy() for t in total], time.perf_counter() - begin

  def _built(self, named: NamedBlock, data_type, datasets: dict) -> list:
    """Each named client's (or group's) flat `work` inputs, its data built
    here by this actor's copy of the task (`datasets`: `tf_phase.flatten`'s
    places of their datasets)."""
    task = self._tasks.get(named.rebuild_key,
                           lambda: _rebuilt(named.rebuild_box[0]))
    return [tf_phase.flatten(
        task.client_data(members, named.seed, named.round_num,
                         named.grouped), data_type, [], datasets)
            for members in named.members]


def _rebuilt(rebuild_ref):
  """The task `rebuild_ref`'s function builds (fetched from Ray).

  Raises:
    ActorDataError: One line, for a rebuild that fails here.
  """
  try:
    return ray_session.import_ray().get(rebuild_ref)()
  except Exception as e:  # pylint: disable=broad-except
    raise ActorDataError(
        f'rebuilding the task for its clients\' data: '
        f'{type(e).__name__}: {ray_session.first_line(e)}') from None
