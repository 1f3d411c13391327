"""The round loop, and `run_experiment`: a task and a process run to the end
in an output directory, resuming where an earlier run stopped."""

import dataclasses
import numbers
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Optional, Union

import tensorflow as tf
import tensorflow_federated as tff
import tqdm

from tff_mixed import execution
from tff_mixed.driver import checkpoints
from tff_mixed.driver import config_file
from tff_mixed.driver import guards
from tff_mixed.driver import history as history_lib
from tff_mixed.driver import layout
from tff_mixed.driver import lock
from tff_mixed.driver import recorder as recorder_lib
from tff_mixed.driver import resume
from tff_mixed.driver.errors import DataError
from tff_mixed.driver.errors import EvalPlateauError
from tff_mixed.driver.errors import RunError
from tff_mixed.driver.errors import RunInterrupted
from tff_mixed.driver.eval_plateau import EvalPlateau
from tff_mixed.metrics import runtime
from tff_mixed.task import Task
from tff_mixed.templates import client_groups as client_groups_lib

ON_NON_FINITE = ('stop', 'skip')


@dataclasses.dataclass
class ExperimentResult:
  """What `run_experiment` returns.

  Attributes:
    state: The process's state after the last round.
    history: metrics.csv's rows, one a round (a resumed run's earlier
      rounds included).
    final_eval: The evaluation after the last round, by metric name.
    wall_time_seconds: The time this call took.
    process: The process trained (built by the driver if given a builder).
    resumed_from: The round of the checkpoint the run resumed from (0 for a
      fresh run).
  """
  state: Any
  history: list[dict[str, float]]
  final_eval: dict[str, float]
  wall_time_seconds: float
  process: Any = None
  resumed_from: int = 0


RoundHook = Callable[[int, tff.learning.templates.LearningProcessOutput, float],
                     Optional[Any]]


def run_rounds(
    process: tff.learning.templates.LearningProcess,
    state: Any,
    client_data_fn: Callable[[int], Sequence[tf.data.Dataset]],
    round_nums: Iterable[int],
    on_round: Optional[RoundHook] = None,
) -> Any:
  """The one round loop every training run goes through.

  For each round r of `round_nums`: `output = process.next(state,
  client_data_fn(r))`, then `on_round(r, output, seconds)` (the round's
  wall time); the next round starts from what `on_round` returns, or from
  `output.state` if it returns None. Returns the last state.
  `run_experiment` drives it with the task's cohorts (`Task.cohort`),
  metrics, checkpoints and evaluation; experiment scripts with their own
  cohorts and measurements pass theirs.
  """
  for round_num in round_nums:
    started = time.perf_counter()
    output = process.next(state, client_data_fn(round_num))
    state = output.state
    if on_round is not None:
      replaced = on_round(round_num, output, time.perf_counter() - started)
      if replaced is not None:
        state = replaced
  return state


def run_experiment(
    task: Task,
    process: Union[tff.learning.templates.LearningProcess,
                   Callable[[], tff.learning.templates.LearningProcess]],
    *,
    rounds: int,
    clients_per_round: int,
    output_dir: str,
    seed: int = 0,
    eval_every: int = 10,
    checkpoint_every: int = 10,
    config: Optional[Mapping[str, Any]] = None,
    progress: bool = True,
    runtime_model: Optional[runtime.RuntimeModel] = None,
    client_groups: Optional[client_groups_lib.ClientGroups] = None,
    eval_plateaus: Sequence[EvalPlateau] = (),
    on_non_finite: str = 'stop',
    round_columns: Optional[Callable[[int], Mapping[str, float]]] = None,
    train_eval_clients: int = 0,
) -> ExperimentResult:
  """Trains `process` on `task` for `rounds` rounds, resuming if possible.

  Round r (1-based) trains on `task.cohort(seed, r, clients_per_round)`
  through `run_rounds`, so a resumed run sees the same clients as an
  uninterrupted one. The initial model is drawn from the model's
  initializers under `seed`.

  Args:
    task: The `Task`.
    process: A `LearningProcess` whose `next` takes client datasets, or a
      no-arg callable building one, called after `output_dir` is checked
      (so a clash with an earlier run fails before a slow build).
    rounds: Total number of rounds (a resumed run stops at the same total).
    clients_per_round: Cohort size.
    output_dir: Where `config.json`, `metrics.csv`, `checkpoints/` and
      `tensorboard/` go.
    seed: Seed of initialisation and client sampling.
    eval_every: Evaluate every this many rounds (and after the last); 0: only
      after the last.
    checkpoint_every: Save the state every this many rounds and after the last.
    config: Everything that defines the run (flags); a restart must match it.
    progress: Show a tqdm progress bar.
    client_groups: None (the default) for a process whose `next` takes one
      dataset per client; a `tff_mixed.templates.client_groups.ClientGroups`
      for one built with it (fast mode): each round's cohort is split into
      its `count` groups (`Task.cohort_groups`). The run says it; the
      process is checked against it before anything is written.
    runtime_model: Seed 001's model of a round's wall-clock time on real
      clients; default `runtime.RuntimeModel()`. Each row gets
      `simulated_seconds` and `simulated_seconds_cumulative` (on resume the
      earlier rows are re-timed with this model).
    eval_plateaus: `EvalPlateau`s: K or the client learning rate decayed
      when an evaluation metric plateaus (seed 001's K-step and lr-step on
      the validation error); they need `eval_every >= 1`.
    on_non_finite: What a round whose new state is not finite does:
      `'stop'` raises `NonFiniteStateError` (the last checkpoint stays as it
      was); `'skip'` undoes the round (the next one starts from the state
      before it), warns, and marks it in `skipped_non_finite` (0 or 1 per
      row). Not part of the configuration: a stopped run can be resumed
      with `'skip'`.
    round_columns: `round_columns(r)`: more columns of round r's row that
      the round number alone gives, such as a privacy accountant's epsilon
      after r rounds (`tff_mixed.aggregators.epsilon_columns`); the rows of
      a resumed run's earlier rounds get them too.
    train_eval_clients: At each evaluation, also evaluate the global model
      on the data of this many training clients (all of them if there are
      no more; else a sample drawn once from `seed`,
      `evaluation.training_sample`): the `train_eval/...` columns, the
      training error of the model the server holds, beside
      `client_work/train/loss` (the clients' local models during their
      steps). 0: none.

  Returns:
    An `ExperimentResult` with the final state, per-round history (including
    rounds of an earlier, resumed run) and the final evaluation. Besides the
    process's metrics each row has `sgd_steps_cumulative`, `round_seconds`
    (measured here) and the simulated times.

  Raises:
    ValueError: For non-positive `rounds`/`clients_per_round`/`checkpoint_every`.
    OutputDirError: If `output_dir` holds a run with another configuration,
      is in use by another run, holds a checkpoint past `rounds`, holds
      unreadable `config.json`/`metrics.csv`, or is not a writable
      directory (checked before anything is written).
    EvalPlateauError: For an `EvalPlateau` that does not fit the process or
      the evaluation (checked before the first round).
    CohortError: If the task cannot draw `clients_per_round` clients (checked
      before the first round, like the configuration).
    DataError: If round 1's client data or the evaluation data does not read
      or the evaluation data is empty (`guards.check_first_cohort`, before anything
      is written).
    NonFiniteStateError: With `on_non_finite='stop'`, for a round whose new
      state is not finite (`check_finite_state`).
    RunInterrupted: On Ctrl-C (a `KeyboardInterrupt`), naming the round.
  """
  if not isinstance(task, Task):
    raise TypeError(f'task must be a tff_mixed.task.Task, got '
                    f'{type(task).__name__}.')
  for name, value, least in (
      ('rounds', rounds, 1),
      ('clients_per_round', clients_per_round, 1),
      ('checkpoint_every', checkpoint_every, 1),
      ('eval_every', eval_every, 0),
      ('train_eval_clients', train_eval_clients, 0),
  ):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
      raise TypeError(f'{name} must be an int, got {value!r}.')
    if value < least:
      raise ValueError(f'{name} must be >= {least}, got {value}.')
  if eval_plateaus and not eval_every:
    raise EvalPlateauError('eval_plateaus need eval_every >= 1 (with 0 the '
                           'model is evaluated only after the last round).')
  if on_non_finite not in ON_NON_FINITE:
    raise ValueError(f'on_non_finite must be one of {ON_NON_FINITE}, got '
                     f'{on_non_finite!r}.')
  guards.check_first_cohort(task, seed, clients_per_round)
  run_config = config_file.full_config(task.name, seed, clients_per_round,
                                       config)
  existed = bool(output_dir) and os.path.exists(output_dir)
  release = lock.lock_output_dir(output_dir)
  try:
    try:
      created = config_file.prepare_output_dir(output_dir, run_config)
    except BaseException:
      if not os.path.exists(os.path.join(output_dir, layout.CONFIG_FILE)):
        # A new run whose config.json could not be written: none is left.
        config_file.remove_new_run(output_dir, existed, release)
      raise
    try:  # Until the first round, a failure leaves no new run behind.
      run = resume.ResumedRun(task, process, output_dir=output_dir, seed=seed,
                        rounds=rounds, client_groups=client_groups,
                        eval_plateaus=eval_plateaus, created=created,
                        train_eval_clients=train_eval_clients)
    except BaseException:
      if created:
        config_file.remove_new_run(output_dir, existed, release)
      raise
    recorder = recorder_lib.RoundRecorder(
        run, rounds=rounds, eval_every=eval_every,
        checkpoint_every=checkpoint_every, on_non_finite=on_non_finite,
        runtime_model=runtime_model or runtime.RuntimeModel(),
        round_columns=round_columns)
    return _train(run, recorder, rounds=rounds, seed=seed,
                  clients_per_round=clients_per_round,
                  client_groups=run.client_groups, progress=progress,
                  algorithm=_algorithm_name(run_config))
  finally:
    release()


def _algorithm_name(record: dict):
  """The algorithm a run's record names (a spec's, schema 1 or 2, or a flag
  record's), for the progress bar; None if it names none."""
  spec = record.get('spec')
  if isinstance(spec, dict) and isinstance(spec.get('algorithm'), dict):
    return spec['algorithm'].get('algorithm')
  return record.get('algorithm')


def _train(run: resume.ResumedRun, recorder: recorder_lib.RoundRecorder, *, rounds, seed,
           clients_per_round, client_groups, progress,
           algorithm) -> ExperimentResult:
  """Runs the rounds left of `run` with `recorder` after each."""
  recorder.tensorboard = run.tensorboard()
  started = time.perf_counter()
  name = run.task.name
  recorder.bar = bar = tqdm.trange(
      run.start_round + 1, rounds + 1, initial=run.start_round, total=rounds,
      desc=f'{name} {algorithm}' if algorithm else name,
      disable=not progress, leave=True,
  )
  if run.start_round < rounds:  # Round 1 also traces and compiles (20-40 s).
    bar.set_postfix_str('compiling and running the first round')
  # Said with or without a progress bar: what this call will (not) train.
  if run.start_round >= rounds:
    print(f'{run.output_dir}: already complete ({rounds} '
          f'{"round" if rounds == 1 else "rounds"}); nothing to '
          'train.', file=sys.stderr)
  elif run.start_round:
    print(f'{run.output_dir}: resuming from the checkpoint of round '
          f'{run.start_round} of {rounds}.', file=sys.stderr)

  def client_data(round_num):
    cohort = run.task.named_cohort(
        seed, round_num, clients_per_round,
        client_groups.count if client_groups else None)
    # Ray's actors build their clients' data from the ids themselves.
    return (cohort if execution.current_runtime() == execution.RAY
            else list(cohort))

  try:
    with guards.remembering_interrupts() as recorder.interrupt_requested:
      state = run_rounds(run.process, run.state, client_data, bar, recorder)
  except Exception as e:  # pylint: disable=broad-except
    if isinstance(e, (RunError, EvalPlateauError)):
      raise
    # A client first sampled now may hold a bad record (TF's error, or TFF
    # worker's gRPC one): say which, in one line, as round 1's are said
    # before the run starts; anything else is raised as it is.
    failed_round = recorder.last_round + 1
    unreadable = guards.unreadable_cohort(run.task, seed, failed_round,
                                          clients_per_round)
    if unreadable is None:
      raise
    raise DataError(f'round {failed_round}: {unreadable}; '
                    f'{recorder.kept()}.') from None
  except KeyboardInterrupt:
    # A Ctrl-C inside a checkpoint's save may land after TFF renamed it
    # into place: the newest on disk is what a resume takes.
    kept = max(recorder.last_checkpoint,
               checkpoints.newest_saved_round(run.checkpoint_dir))
    raise RunInterrupted(
        f'interrupted in round {max(recorder.last_round, kept) + 1}; resume '
        f'with the same command (from the checkpoint of round {kept}).'
    ) from None
  finally:
    bar.close()
    recorder.tensorboard.flush()
  final_eval = recorder.final_eval
  if run.evaluation and not final_eval:  # Resumed a finished run.
    final_eval = run.evaluation.run(run.process.get_model_weights(state))
  if recorder.history:
    try:
      history_lib.write_history(run.metrics_path, recorder.history)
    except OSError as e:
      raise layout.write_error(run.metrics_path, e, recorder.kept()) from None
  return ExperimentResult(
      state=state,
      history=recorder.history,
      final_eval=final_eval,
      wall_time_seconds=time.perf_counter() - started,
      process=run.process,
      resumed_from=run.start_round,
  )
