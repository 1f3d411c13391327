"""The Ray runtime: one federated round spread over Ray actors.

`RayContext` is a TFF synchronous context, like the in-process runtime's,
for a run bigger than one process: a round (`process.next`) is compiled once
to TFF's MapReduceForm, as in process, and then

* the driver (this process) runs `prepare` on the server state;
* the round's clients (or client groups) are cut into one block an actor,
  contiguous runs of the cohort of equal counts (`blocks`: a client's
  predicted cost is its K steps);
* each actor (a Ray actor: a Python process of its own, on this machine or
  any node of a cluster) imports `zero`, `work` and `accumulate` once per
  round computation and trains a block with the in-process runtime's
  client loop (`client_loop.ClientLoop`: the block's clients in order, in
  one TensorFlow call), returning its accumulator;
* the driver merges the accumulators in block order (`merge`), then runs
  `report` and `update`.

The blocks depend only on the cohort and the number of actors, so the same
run on the same number of actors gives the same model bit for bit; with one actor it is the
in-process runtime's model bit for bit, with more it differs from it only
by the order of the additions of `merge` (float rounding). An actor that
dies mid-round is replaced and its blocks re-run: the round's result is
unchanged (one warning line says so).

Client data, from the cheapest way to the dearest:

* a round given a `tff_mixed.task.NamedCohort` (what the driver gives on
  Ray) of a task with `Task.rebuild` (the task registry's tasks): each
  actor gets its blocks' client ids and builds their data itself with its
  own copy of the task (rebuilt once an actor), read where the data lives
  (the same path on every node for files);
* a process that takes client ids
  (`tff.simulation.compose_dataset_computation_with_learning_process`):
  each actor builds its clients' data inside `work`;
* datasets: each travels as its `tf.data` graph (`DatasetToGraphV2`), a
  dataset read from files as the files' names, an in-memory one with its
  tensors, every round. A dataset holding state that cannot leave this
  process (a Python function, a stateful iterator) is refused in one line.

Computations that are not rounds (`initialize`, the TensorFlow computations
of a process) run on the driver, in process.

Ray itself (`ray_session`): `RayContext.start` starts a local Ray bound to
127.0.0.1 (no usage statistics, its session files in a private directory)
and ends it at `shutdown`, or joins a running cluster by address (and leaves
it running). docs/execution.md, "Ray", says what a cluster exposes.
"""

import functools
import itertools
import os
from typing import Any, Optional

from absl import logging
import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed import group_data
from tff_mixed import task as task_lib
from tff_mixed.runtimes import in_process
from tff_mixed.runtimes import ray_actor
from tff_mixed.runtimes import ray_session
from tff_mixed.runtimes import tf_phase

RayRuntimeError = ray_session.RayRuntimeError  # Its errors, here too.
_round_keys = itertools.count()
# How often a block is re-run on a new actor in a round before the round
# fails (a block that kills every actor it meets, e.g. out of memory).
_ACTOR_RETRIES = 2


def _proto_bytes(computation) -> bytes:
  return tff.framework.ConcreteComputation.get_proto(
      computation).SerializeToString()


def blocks(count: int, workers: int) -> list:
  """A round's `count` clients (or groups) as the blocks actors train, one
  an actor: contiguous runs of the cohort whose counts differ by one at
  most. A client's predicted cost is its K steps (this library's clients
  take exactly K; a cohort comes in random order, so clients of other
  costs spread too). More blocks than actors, each taken by the first
  actor free, lost here: on two cores each block's call, return and merge
  cost more than the balance gained, even for TFF's epoch clients of
  1-60 batches (BENCHMARKS.md)."""
  return [range(c[0], c[-1] + 1) for c in group_data.chunks(count, workers)]


class RayRound:
  """A federated round compiled to TFF's MapReduceForm, its clients trained
  on Ray actors (module docstring)."""

  def __init__(self, computation, context: 'RayContext'):
    form = in_process.map_reduce_form(computation, 'ray')
    self._context = context
    self._key = next(_round_keys)
    self.prepare = tf_phase.Phase(form.prepare)
    self.zero = tf_phase.Phase(form.zero)
    self.merge = tf_phase.Phase(form.merge)
    self.report = tf_phase.Phase(form.report)
    self.update = tf_phase.Phase(form.update)
    self._state_type = form.update.type_signature.parameter[0]
    self._data_type = form.work.type_signature.parameter[0]
    ray = ray_session.import_ray()
    # Shipped once: each actor fetches it on its first block.
    self._phases = ray.put(tuple(_proto_bytes(c) for c in (
        form.zero, form.work, form.accumulate)))

  def __call__(self, arg):
    state, client_data = arg[0], arg[1]
    state = tf_phase.flatten(state, self._state_type, [])
    broadcast = [t.numpy() for t in self.prepare.call_flat(state)]
    rebuild_ref = (self._context.rebuild_ref(client_data.task)
                   if isinstance(client_data, task_lib.NamedCohort) else None)
    split = blocks(len(client_data), self._context.workers)
    if rebuild_ref is not None:  # Each actor builds its clients' data.
      messages = [ray_actor.NamedBlock(rebuild_ref, client_data, block)
                  for block in split]
    else:
      flat = []
      for data in client_data:
        datasets = {}
        flat.append((tf_phase.flatten(data, self._data_type, [], datasets),
                     datasets))
      # Each block serialised when it is sent: actors train the first
      # blocks while the driver serialises the next.
      messages = [functools.partial(ray_actor.encode, [flat[i] for i in block])
                  for block in split]
    accumulators = self._context.run_blocks(self._key, self._phases,
                                            broadcast, messages)
    if not accumulators:
      total = list(self.zero.call_flat([]))
    else:
      total = [tf.constant(t) for t in accumulators[0]]
      for other in accumulators[1:]:
        total = list(self.merge.call_flat(
            total + [tf.constant(t) for t in other]))
    reported = self.report.call_flat(total)
    return tf_phase.pack(self.update.call_flat(state + list(reported)),
                         self.update.type_signature.result)


def _check_options(*, workers: Optional[int] = None,
                   gpus_per_worker: float = 0.0,
                   threads_per_worker: Optional[int] = 1) -> None:
  if workers is not None and (
      not isinstance(workers, int) or isinstance(workers, bool) or
      workers < 1):
    raise ValueError(f'ray workers must be an int >= 1, got {workers!r}.')
  if not isinstance(gpus_per_worker, (int, float)) or gpus_per_worker < 0:
    raise ValueError('ray gpus_per_worker must be a number >= 0, got '
                     f'{gpus_per_worker!r}.')
  if threads_per_worker is not None and (
      not isinstance(threads_per_worker, int) or threads_per_worker < 1):
    raise ValueError('ray threads_per_worker must be an int >= 1 or None, '
                     f'got {threads_per_worker!r}.')


class RayContext(tff.framework.SyncContext):
  """A TFF context that trains each round's clients on Ray actors.

  Build it with `RayContext.start(...)`; `configure(...)` changes its actors
  without restarting Ray; `shutdown()` ends its actors and the local Ray it
  started (`tff_mixed.execution` does all three).
  """

  def __init__(self, session: ray_session.Session,
               local: Optional[in_process.InProcessContext] = None):
    self._session = session
    self.address = session.address
    # The local Ray's private directory (None on a cluster).
    self.session_dir = session.session_dir
    self.workers, self._gpus, self._threads = 1, 0.0, 1
    self._actors = []
    # Of the last round: each actor's seconds training its blocks.
    self.last_actor_seconds: list[float] = []
    # Where computations other than rounds run (given: the process's own
    # in-process context, so they compile once whichever runtime runs them).
    self._in_process = local or in_process.InProcessContext()
    self._compiled = in_process.ComputationCache()
    # Per task `rebuild`: its reference in Ray's object store (None: it
    # does not pickle).
    self._rebuilds: dict[Any, Any] = {}

  @classmethod
  def start(cls, *, address: Optional[str] = None,
            local: Optional[in_process.InProcessContext] = None,
            **actor_options) -> 'RayContext':
    """Starts a local Ray on loopback (no `address`; with as many CPUs as
    actors, at least the machine's cores) or joins the cluster at `address`
    (`host:port`, or 'auto'), then `configure(**actor_options)`.
    Computations other than rounds run on `local` (default: a context of
    its own).

    Raises:
      ValueError: For a bad option (one line naming it).
      RayRuntimeError: If Ray cannot be started or joined (one line).
    """
    _check_options(**actor_options)
    session = ray_session.Session.start(
        address, cpus=max(actor_options.get('workers') or 1,
                          os.cpu_count() or 1))
    context = cls(session, local)
    context.configure(**actor_options)
    return context

  def can_hold(self, workers: Optional[int]) -> bool:
    """Whether this Ray has a CPU for each of `workers` actors."""
    ray = ray_session.import_ray()
    return (workers or 1) <= int(ray.cluster_resources().get('CPU', 1))

  def configure(self, *, workers: Optional[int] = None,
                gpus_per_worker: float = 0.0,
                threads_per_worker: Optional[int] = 1) -> None:
    """Trains rounds on `workers` actors (default: the cluster's CPUs, at
    least 1), each asking Ray for `gpus_per_worker` GPUs and running
    TensorFlow on `threads_per_worker` threads (None: TensorFlow's default,
    every core of its node). Actors are kept where these allow.

    Raises:
      ValueError: For a bad option (one line naming it).
    """
    _check_options(workers=workers, gpus_per_worker=gpus_per_worker,
                   threads_per_worker=threads_per_worker)
    if workers is None:
      ray = ray_session.import_ray()
      workers = max(1, int(ray.cluster_resources().get('CPU', 1)))
    if (gpus_per_worker, threads_per_worker) != (self._gpus, self._threads):
      self._kill(range(len(self._actors)))
    # Fewer actors than before: the others stay, idle, for a later round.
    self._actors += [None] * (workers - len(self._actors))
    self.workers, self._gpus = workers, gpus_per_worker
    self._threads = threads_per_worker

  def _kill(self, indices) -> None:
    ray = ray_session.import_ray()
    for i in indices:
      if self._actors[i] is not None and ray.is_initialized():
        ray.kill(self._actors[i])
      self._actors[i] = None

  def _actor(self, index: int):
    if self._actors[index] is None:
      ray = ray_session.import_ray()
      actor_class = ray.remote(num_cpus=1, num_gpus=self._gpus)(ray_actor.ActorBody)
      self._actors[index] = actor_class.remote(self._threads)
    return self._actors[index]

  def rebuild_ref(self, task):
    """`task.rebuild` in Ray's object store (put once), or None: the task
    has none, or it does not pickle (then its clients' data is sent built,
    said once in a warning)."""
    if task.rebuild is None:
      return None
    if task.rebuild not in self._rebuilds:
      ray = ray_session.import_ray()
      try:
        self._rebuilds[task.rebuild] = ray.put(task.rebuild)
      except Exception as e:  # pylint: disable=broad-except
        logging.warning(
            "Task %r's rebuild does not pickle (%s): its clients' data is "
            'built here and sent to the Ray actors each round.', task.name,
            ray_session.first_line(e))
        self._rebuilds[task.rebuild] = None
    return self._rebuilds[task.rebuild]

  def run_blocks(self, key, phases, broadcast, messages) -> list:
    """Each block's accumulator, in block order: `ray_actor.ActorBody.train` of
    `messages[b]` (a block's message, or a function making it, called just
    before it is sent: the first actors train while the driver makes the
    next) on actor b. A block whose actor died is re-run on a new one."""
    ray = ray_session.import_ray()
    box = [phases]  # In a list: Ray passes the reference, not its value.
    results, busy = [None] * len(messages), [0.0] * len(messages)
    pending = []  # Each block's future.

    def send(block: int):
      if callable(messages[block]):
        messages[block] = messages[block]()
      return self._actor(block).train.remote(key, box, broadcast,
                                             messages[block])

    for block in range(len(messages)):
      pending.append(send(block))
    for block, future in enumerate(pending):
      for tries in itertools.count(1):
        try:
          results[block], busy[block] = ray.get(future)
          break
        except ray.exceptions.RayTaskError as e:
          if isinstance(e.cause, ray_actor.ActorDataError):
            raise ray_session.RayRuntimeError(
                f'actor {block}: {e.cause}') from None
          raise
        except ray.exceptions.RayActorError as e:
          clients = len(messages[block])
          if tries > _ACTOR_RETRIES:
            raise ray_session.RayRuntimeError(
                f'actor {block} died running the same block of {clients} '
                f'client{"s" if clients != 1 else ""}, tries: {tries} '
                f'({ray_session.first_line(e)}); see Ray\'s logs (memory, '
                'a node lost).') from None
          logging.warning(
              'Ray actor %d died mid-round (%s); its %d clients are re-run '
              "on a new actor, the round's result is unchanged.", block,
              ray_session.first_line(e), clients)
          self._actors[block] = None  # A new one for this block and later.
          future = send(block)
    self.last_actor_seconds = busy
    return results

  def actor_gpus(self) -> list:
    """The GPUs each actor in use sees (`ray_actor.ActorBody.gpus`), starting them."""
    ray = ray_session.import_ray()
    return ray.get([self._actor(i).gpus.remote() for i in range(self.workers)])

  def actor_pids(self) -> list:
    """The process ids of the actors started so far (they start on first
    use)."""
    ray = ray_session.import_ray()
    return ray.get([a.ready.remote() for a in self._actors if a is not None])

  def compiled(self, computation):
    """`computation` compiled for this runtime (once): a round for Ray
    (`RayRound`), anything else in process."""
    def compile_it():
      signature = computation.type_signature
      if (signature.parameter is not None and
          not in_process._is_tensorflow(computation)):  # pylint: disable=protected-access
        return RayRound(computation, self)
      return self._in_process.compiled(computation)

    return self._compiled.get(computation, compile_it)

  def invoke(self, comp, arg):
    if not isinstance(comp, tff.framework.ConcreteComputation):
      raise in_process.UnsupportedComputationError(
          f'The ray runtime runs TFF computations, got {type(comp)}.')
    result = self.compiled(comp)(arg)
    return tff.types.type_to_py_container(result, comp.type_signature.result)

  def shutdown(self) -> None:
    """Ends the actors, and the local Ray if this context started it."""
    self._kill(range(len(self._actors)))
    self._session.end()
