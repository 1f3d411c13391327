"""How a run goes: `RunConfig`, what of it a resume compares, and
`Execution`, how it is executed, which a restart may change.

A `tasks.common.run_spec.RunSpec` holds both beside the algorithm: its
`run` (seed, cohort, shuffles, evaluation plateaus) is part of the
experiment, compared when a run resumes; its `execution` (rounds, fast
mode, cadences, runtime and workers, progress) is recorded as it was last
started and not compared (but the cadence of evaluation when plateaus drive
a schedule).
"""

import dataclasses
from typing import Any, Optional

from tff_mixed import driver
from tff_mixed import execution as execution_lib
from tff_mixed import task as task_lib
from tff_mixed.metrics import runtime
from tff_mixed.templates import client_groups as client_groups_lib


def _check(config, choices, least) -> None:
  """Refuses, in one line naming the field of `config`, a value outside its
  `choices` (name -> allowed) or below its `least` (name -> bound)."""
  kind = type(config).__name__
  for name, allowed in choices.items():
    if getattr(config, name) not in allowed:
      raise ValueError(f'{kind}.{name} must be one of {allowed}, got '
                       f'{getattr(config, name)!r}.')
  for name, low in least.items():
    value = getattr(config, name)
    if isinstance(value, (int, float)) and value < low:
      raise ValueError(f'{kind}.{name} must be >= {low}, got {value}.')


@dataclasses.dataclass(frozen=True)
class RunConfig:
  """What a run is besides its algorithm: compared when it resumes.

  Attributes:
    seed: Initialisation, data split, client sampling, the per-round
      client shuffles and the central shuffle.
    client_shuffle: None (the task's), or `Task.client_shuffle`'s
      'per_round' or 'none'.
    clients_per_round, eval_plateaus: The driver's
      (`tff_mixed.driver.run_experiment`). With plateaus, an evaluation
      drives a schedule, so `Execution.eval_every` is compared too.
    train_eval_clients: At each evaluation, the global model is also
      evaluated on this many training clients' data (all if the task has
      no more; else a sample drawn once from the seed): the `train_eval/`
      columns, the training error of the server's model beside
      `client_work/train/loss`, the clients' local models'. 0: none. The
      oracle's one pooled client holds every training example (and the
      central data): with it, any N > 0 evaluates on all of them.
  """
  seed: int = 0
  client_shuffle: Optional[str] = None
  clients_per_round: int = 10
  eval_plateaus: tuple[driver.EvalPlateau, ...] = ()
  train_eval_clients: int = 0

  def __post_init__(self):
    """Refuses, in one line naming the field, a value no run takes (the
    driver checks the rest when the run starts)."""
    _check(self, {'client_shuffle': (None, *task_lib.CLIENT_SHUFFLES)},
           {'clients_per_round': 1, 'train_eval_clients': 0})


@dataclasses.dataclass(frozen=True)
class Execution:
  """How a run is executed: recorded as it was last started, not compared
  when it resumes (a restart may give more rounds, another runtime, ...),
  but `eval_every` when evaluation plateaus drive a schedule.

  Attributes:
    rounds, output_dir, eval_every, checkpoint_every, progress,
    on_non_finite, runtime_model: The driver's
      (`tff_mixed.driver.run_experiment`).
    client_groups: Fast mode, one value: a
      `tff_mixed.templates.client_groups.ClientGroups` (how many groups each
      round's cohort is split into, each trained in one TF call, and how a
      group trains its clients), default `client_groups.DEFAULT`; None: one
      TFF client per simulated client (faithful mode). The one place the
      mode is said: the process is built to match. Either trains the same
      model to float rounding, from the same checkpoints: a run resumes in
      the other mode.
    runtime: What runs the computations (`tff_mixed.execution.RUNTIMES`):
      'in_process' (TFF's compiled round run by TensorFlow in this
      process, `tff_mixed.runtimes`), 'tff' (TFF's C++ worker) or 'ray'
      (the round's clients split over Ray actors).
    local_workers, workers: TFF workers started here, and `host:port`s of
      workers started elsewhere (`tff_mixed.execution`), with runtime 'tff'.
    concurrency: With runtime 'in_process': clients (or groups) trained at
      once (0: one per GPU TensorFlow sees, else one per core; the same
      sums bit for bit).
    ray_workers, ray_address, ray_gpus_per_worker: With runtime 'ray':
      the actors each round's clients are split over (0: the cluster's
      CPUs), the cluster to join (None: a local Ray on 127.0.0.1) and the
      GPUs each actor asks for (`tff_mixed.execution.ray_context`).
  """
  rounds: int = 100
  output_dir: Optional[str] = None
  client_groups: Optional[client_groups_lib.ClientGroups] = (
      client_groups_lib.DEFAULT)
  eval_every: int = 10
  checkpoint_every: int = 10
  progress: bool = True
  on_non_finite: str = 'stop'
  runtime_model: runtime.RuntimeModel = runtime.RuntimeModel()
  runtime: str = execution_lib.DEFAULT_RUNTIME
  local_workers: int = 1
  workers: tuple[str, ...] = ()
  concurrency: int = 0
  ray_workers: int = 0
  ray_address: Optional[str] = None
  ray_gpus_per_worker: float = 0.0

  def __post_init__(self):
    """Refuses, in one line naming the field, a choice outside its choices
    or a negative count (the runtimes check the rest when they start)."""
    _check(self, {'runtime': execution_lib.RUNTIMES,
                  'on_non_finite': driver.ON_NON_FINITE},
           dict(rounds=0, eval_every=0, checkpoint_every=0, local_workers=0,
                concurrency=0, ray_workers=0, ray_gpus_per_worker=0))


# `Execution`'s fields, by name.
EXECUTION = tuple(f.name for f in dataclasses.fields(Execution))


def driver_arguments(run: RunConfig, execution: Execution) -> dict[str, Any]:
  """The keyword arguments of `tff_mixed.driver.run_experiment` that `run`
  and `execution` give."""
  return dict(
      rounds=execution.rounds, clients_per_round=run.clients_per_round,
      output_dir=execution.output_dir, seed=run.seed,
      eval_every=execution.eval_every,
      checkpoint_every=execution.checkpoint_every,
      progress=execution.progress, runtime_model=execution.runtime_model,
      client_groups=execution.client_groups,
      eval_plateaus=run.eval_plateaus,
      on_non_finite=execution.on_non_finite,
      train_eval_clients=run.train_eval_clients)
