"""The TFF simulation runtime, set up so its C++ worker never outlives Python.

TFF's default local context starts `worker_binary` on first use, hands it the
parent's stdout/stderr and relies on `ServiceManager.__del__` to stop it. That
finaliser often fails during interpreter shutdown, so the worker lives on and
keeps the parent's pipes open: `python -m tasks.x.train | tee log` never
returns and workers pile up.

`set_local_execution_context` installs an equivalent context (same compiler,
same C++ runtime) whose worker

* writes to its own log file (or nowhere), never to the parent's streams;
* runs under a tiny `sh` watchdog that holds the read end of a pipe whose
  write end only this Python process has: when the process exits for any
  reason, SIGKILL included, the kernel closes the pipe and the watchdog stops
  the worker;
* is also stopped explicitly by an `atexit` hook and by `shutdown()`.

Binaries, tests, benchmarks and the demo all call this one function.
"""

import atexit
import contextlib
from collections.abc import Sequence
from typing import Optional

import tensorflow_federated as tff

from tff_mixed import runtimes
from tff_mixed.runtimes import client_loop
from tff_mixed.runtimes import worker_compiler
from tff_mixed.runtimes import workers

# The workers (`tff_mixed.runtimes.workers`), here too: this module owns
# them, and users start remote ones with `worker_binary_path()`.
LocalWorker = workers.LocalWorker
RemoteWorker = workers.RemoteWorker
loopback_shim_path = workers.loopback_shim_path
worker_binary_path = workers.worker_binary_path
worker_environment = workers.worker_environment
WORKER_MALLOC_ARENAS = workers.WORKER_MALLOC_ARENAS

_worker: Optional[LocalWorker] = None  # The default context's worker.
# `running_on(TFF)`'s context on `_worker`, as (worker, context).
_worker_context = None
_program_workers: list[LocalWorker] = []  # From create_program_context().


def _context_parts(worker: LocalWorker, default_num_clients: int):
  """The executor factory and compiler of TFF's native local context."""

  def executor_stack(cardinalities):
    cardinalities.setdefault(tff.CLIENTS, default_num_clients)
    executor = tff.framework.RemoteExecutor(worker.stub())
    executor.set_cardinalities(cardinalities)
    return executor

  return dict(
      executor_fn=tff.framework.ResourceManagingExecutorFactory(
          executor_stack_fn=executor_stack
      ),
      compiler_fn=worker_compiler.compile_for_worker,
      transform_args=tff.tensorflow.transform_args,
      transform_result=tff.tensorflow.transform_result,
  )


def set_local_execution_context(
    *,
    default_num_clients: int = 0,
    max_concurrent_computation_calls: int = -1,
    worker_log: Optional[str] = None,
) -> LocalWorker:
  """Sets TFF's default context to the local C++ runtime with a safe worker.

  Equivalent to `tff.backends.native.set_sync_local_cpp_execution_context`,
  plus secure-aggregation intrinsics lowered to plain sums (as TFF's test
  backend does) so that secure aggregators run in simulation. Calling it again
  replaces the previous context and stops its worker. Called before
  TensorFlow starts, it also sets TensorFlow's intra-op threads for the
  in-process runtime (`runtimes.client_loop.share_cores`).

  Args:
    default_num_clients: Cardinality of CLIENTS when it cannot be inferred.
    max_concurrent_computation_calls: Passed to the worker; <= 0: no limit.
    worker_log: File the worker appends its output to; `None` drops it.

  Returns:
    The `LocalWorker`, whose `stop()` ends the worker early.
  """
  global _worker
  shutdown()
  # Before TensorFlow starts: the in-process runtime's calls at once each
  # on their share of the cores (`client_loop.share_cores`).
  client_loop.share_cores()
  worker = LocalWorker(
      max_concurrent_computation_calls=max_concurrent_computation_calls,
      log_path=worker_log,
  )
  context = tff.framework.SyncExecutionContext(
      **_context_parts(worker, default_num_clients)
  )
  tff.framework.set_default_context(context)
  _worker = worker
  return worker


def create_program_context(
    *, default_num_clients: int = 0
) -> tff.program.NativeFederatedContext:
  """A `tff.program` context on the same kind of worker, for program logic.

  TFF's program logic (`tff.learning.programs.train_model`, ...) needs a
  `tff.program.FederatedContext`. Install it with
  `tff.framework.get_context_stack().install(context)`; its worker is stopped
  by `shutdown()` and at exit like the default one.
  """
  worker = LocalWorker()
  _program_workers.append(worker)
  return tff.program.NativeFederatedContext(
      tff.framework.AsyncExecutionContext(
          **_context_parts(worker, default_num_clients)
      )
  )


def set_multi_worker_context(
    *,
    local_workers: int = 0,
    addresses: Sequence[str] = (),
    default_num_clients: int = 0,
    ready_timeout_seconds: float = workers.REMOTE_READY_TIMEOUT_SECONDS,
) -> list:
  """Sets TFF's default context to several workers, merged per round.

  `local_workers` workers are started here (on loopback, ended with this
  process as in `set_local_execution_context`), plus one connection per
  `host:port` of `addresses`. TFF's mergeable execution context
  (`tff.backends.native.create_mergeable_comp_execution_context`) splits
  each computation's CLIENTS values across them, runs each part up to its
  aggregations on one worker, merges the partial aggregates and runs the
  rest once. With client groups, give at least one group per worker. A
  remote worker must answer within `ready_timeout_seconds`.

  Raises:
    ValueError: For no worker at all.
    RuntimeError: (on first use) naming an address that does not answer.
  """
  global _worker
  if local_workers < 0:
    raise ValueError(f'local_workers must be >= 0, got {local_workers}.')
  if not local_workers and not addresses:
    raise ValueError('Give local_workers >= 1 or at least one address.')
  shutdown()
  workers = [LocalWorker() for _ in range(local_workers)]
  workers += [RemoteWorker(a, ready_timeout_seconds=ready_timeout_seconds)
              for a in addresses]
  _program_workers.extend(workers)
  for worker in workers:  # Fail now, naming the address, not mid-round.
    worker.stub()
  contexts = [
      tff.framework.AsyncExecutionContext(
          **_context_parts(worker, default_num_clients))
      for worker in workers
  ]
  tff.framework.set_default_context(
      tff.backends.native.create_mergeable_comp_execution_context(contexts))
  _worker = None
  return workers


# What runs the computations (`set_runtime`, `running_on`; docs/execution.md,
# "Runtimes"): TFF's C++ worker, TensorFlow in this process, or Ray actors
# for each round's clients (`tff_mixed.runtimes`). One value, one default.
TFF, IN_PROCESS, RAY = 'tff', 'in_process', 'ray'
RUNTIMES = (TFF, IN_PROCESS, RAY)
# In process by default: faster on every workload measured (BENCHMARKS.md,
# "Runtimes"); TFF's for several workers and secure aggregation.
DEFAULT_RUNTIME = IN_PROCESS
# The in-process contexts by concurrency (each keeps what it compiled).
_in_process_contexts: dict[int, runtimes.InProcessContext] = {}
_ray = None  # The Ray context (`ray_context`).
# What each runtime takes besides its name.
_OPTIONS = {IN_PROCESS: ('concurrency',),
            RAY: ('workers', 'address', 'gpus_per_worker',
                  'threads_per_worker')}


def _check_runtime(runtime: str, options: dict) -> None:
  if runtime not in RUNTIMES:
    raise ValueError(f'runtime must be one of {RUNTIMES}, got {runtime!r}.')
  foreign = sorted(set(options) - set(_OPTIONS.get(runtime, ())))
  if foreign:
    raise ValueError(f'{", ".join(foreign)}: not an option of runtime '
                     f'{runtime!r} (its options: '
                     f'{", ".join(_OPTIONS.get(runtime, ())) or "none"}).')


def in_process_context(concurrency: Optional[int] = None
                       ) -> runtimes.InProcessContext:
  """This process's in-process context training `concurrency` clients (or
  groups) at once (None: `runtimes.in_process.default_concurrency()`, one
  per GPU TensorFlow sees, else one per core); one a concurrency, kept
  with what it compiled.

  Raises:
    ValueError: For a `concurrency` that is not an int >= 1.
  """
  # A new context checks `concurrency` and resolves None; it compiles
  # nothing until used.
  context = runtimes.InProcessContext(concurrency)
  return _in_process_contexts.setdefault(context.concurrency, context)


def ray_context(**options) -> 'runtimes.ray_runtime.RayContext':
  """This process's Ray context (`tff_mixed.runtimes.ray_runtime`), started
  on first use, then kept: options, when given, are the ones in force (the
  others at their defaults); Ray restarts only for another address, or for
  more actors than a local Ray has CPUs.

  Options (`RayContext.start`'s):
    workers: Ray actors each round's clients are split over (default: the
      cluster's CPUs; a local Ray gets that many CPUs).
    address: `host:port` (or 'auto') of a running Ray cluster to join;
      None starts a local Ray on 127.0.0.1, ended with `shutdown()`.
    gpus_per_worker: GPUs each actor asks Ray for (fractions share one).
    threads_per_worker: TensorFlow's threads in each actor (default 1;
      None: TensorFlow's default, every core of the node).
  """
  global _ray
  from tff_mixed.runtimes import ray_runtime  # pylint: disable=g-import-not-at-top
  address = options.get('address')
  if _ray is not None and options and (
      address != _ray.address or
      (_ray.session_dir and not _ray.can_hold(options.get('workers')))):
    _ray.shutdown()  # Another cluster, or a local Ray too small.
    _ray = None
  if _ray is None:
    _ray = ray_runtime.RayContext.start(local=in_process_context(), **options)
  elif options:
    _ray.configure(**{k: v for k, v in options.items() if k != 'address'})
  return _ray


def current_runtime() -> str:
  """The runtime computations run on now: `IN_PROCESS`, `RAY` or `TFF`."""
  current = tff.framework.get_context_stack().current
  if isinstance(current, runtimes.InProcessContext):
    return IN_PROCESS
  if _ray is not None and current is _ray:
    return RAY
  return TFF


def set_runtime(runtime: str = DEFAULT_RUNTIME, **options) -> None:
  """Makes `runtime` TFF's default context (default: in process): `'tff'` is
  `set_local_execution_context()` (one local worker), `'in_process'` runs
  every computation in this process's TensorFlow (`tff_mixed.runtimes`;
  option `concurrency`: `in_process_context`'s) and stops this module's
  workers, `'ray'` trains each round's clients on Ray actors (options:
  `ray_context`'s).

  Raises:
    ValueError: For an unknown runtime, or an option it does not take.
  """
  _check_runtime(runtime, options)
  if runtime == TFF:
    set_local_execution_context()
  elif runtime == RAY:
    _stop_workers()
    tff.framework.set_default_context(ray_context(**options))
  else:
    shutdown()
    tff.framework.set_default_context(in_process_context(**options))


@contextlib.contextmanager
def running_on(runtime: str, **options):
  """Runs the block's computations on `runtime`, then restores the context
  that was current (`'tff'` keeps a TFF context that is current, else uses
  this module's local worker; `'in_process'` uses
  `in_process_context(**options)`, `'ray'` `ray_context(**options)`)."""
  _check_runtime(runtime, options)
  if runtime == current_runtime() and not options:
    yield
    return
  if runtime == IN_PROCESS:
    context = in_process_context(**options)
  elif runtime == RAY:
    context = ray_context(**options)
  else:
    global _worker, _worker_context
    if _worker is None:
      _worker = LocalWorker()
    if _worker_context is None or _worker_context[0] is not _worker:
      # One context per worker, kept: each would open its own channel.
      _worker_context = (_worker, tff.framework.SyncExecutionContext(
          **_context_parts(_worker, 0)))
    context = _worker_context[1]
  with tff.framework.get_context_stack().install(context):
    yield


def _stop_workers() -> None:
  for worker in [_worker, *_program_workers]:
    if worker is not None:
      worker.stop()


def shutdown() -> None:
  """Stops every worker this module started (they restart on next use) and
  its Ray context's actors, with the local Ray it started."""
  global _ray
  _stop_workers()
  if _ray is not None:
    _ray.shutdown()
    _ray = None


def _at_exit() -> None:
  """Stops the workers, and drops TFF's own default context while Python's
  modules still work: it is the one set at `import tensorflow_federated`
  unless `set_local_execution_context` replaced it, and its
  `ServiceManager.__del__` fails during interpreter teardown, printing a
  traceback ("'NoneType' object has no attribute 'Popen'") after a program's
  last line. Its replacement starts no worker unless used."""
  shutdown()
  if _worker is None:
    tff.framework.set_default_context(tff.framework.SyncExecutionContext(
        **_context_parts(LocalWorker(), 0)))


atexit.register(_at_exit)
