"""The one training driver behind every binary: plain Python, no flags.

`run_experiment` runs any `LearningProcess` on any `Task`: seeded client
sampling, periodic centralised evaluation, metrics to CSV and TensorBoard, a
progress bar, and checkpoint/resume through `tff.program.FileProgramStateManager`.
A run killed and restarted with the same configuration continues from its last
checkpoint and ends with the same model as an uninterrupted run.
"""

import asyncio
import collections
import csv
import dataclasses
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Optional, Union

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff
import tqdm

from tff_mixed import schedules
from tff_mixed.metrics import runtime
from tff_mixed.templates import client_groups as groups
from tff_mixed.task import Task

CONFIG_FILE = 'config.json'
METRICS_FILE = 'metrics.csv'
CHECKPOINT_DIR = 'checkpoints'
TENSORBOARD_DIR = 'tensorboard'
TRAIN_LOSS_KEY = 'client_work/train/loss'


class OutputDirError(ValueError):
  """The output directory holds a run with another configuration."""


@dataclasses.dataclass
class ExperimentResult:
  state: Any
  history: list[dict[str, float]]
  final_eval: dict[str, float]
  wall_time_seconds: float


def flatten_metrics(metrics: Any, prefix: str = '') -> dict[str, float]:
  """Flattens nested metric mappings to `{'a/b/c': float}`."""
  flat = {}
  if isinstance(metrics, Mapping):
    for key, value in metrics.items():
      flat.update(flatten_metrics(value, f'{prefix}{key}/'))
  elif isinstance(metrics, (list, tuple)) and not isinstance(metrics, str):
    for i, value in enumerate(metrics):
      flat.update(flatten_metrics(value, f'{prefix}{i}/'))
  else:
    value = np.asarray(metrics)
    if value.size == 1 and value.dtype.kind in 'biuf':
      flat[prefix.rstrip('/')] = value.item()
  return flat


def seeded_initial_weights(
    model_fn, seed: int
) -> tff.learning.models.ModelWeights:
  """Initial weights drawn from the model's own initializers under `seed`."""
  tf.keras.utils.set_random_seed(seed)
  model = model_fn()
  weights = tff.learning.models.ModelWeights.from_model(model)
  return tf.nest.map_structure(lambda v: v.numpy(), weights)


def build_evaluation(model_fn) -> tff.Computation:
  """A `tff.tensorflow.computation` (weights, dataset) -> finalized metrics.

  Centralised evaluation: the model's metrics over every batch, computed in
  one TF graph (Keras metric finalizers must run in graph mode).
  """
  with tf.Graph().as_default():
    model = model_fn()
    weights_type = tff.learning.models.weights_type_from_model(model)
    data_type = tff.SequenceType(tff.types.tensorflow_to_type(model.input_spec))

  @tff.tensorflow.computation(weights_type, data_type)
  def evaluate(model_weights, dataset):
    model = model_fn()
    weights = tff.learning.models.ModelWeights.from_model(model)

    @tf.function  # Orders the metric updates before the read.
    def run(model_weights, dataset):
      tf.nest.map_structure(lambda v, t: v.assign(t), weights, model_weights)
      for batch in dataset:
        model.forward_pass(batch, training=False)
      return model.report_local_unfinalized_metrics()

    unfinalized = run(model_weights, dataset)
    return collections.OrderedDict(
        (name, finalizer(unfinalized[name]))
        for name, finalizer in model.metric_finalizers().items()
    )

  return evaluate


def evaluate_all(evaluate, model_weights, eval_data) -> dict[str, float]:
  """Flat metrics of `evaluate` on a dataset or on each of a name->dataset map
  (keys `<name>/<metric>`)."""
  if isinstance(eval_data, Mapping):
    results = {}
    for name, dataset in eval_data.items():
      metrics = flatten_metrics(evaluate(model_weights, dataset))
      results.update({f'{name}/{k}': v for k, v in metrics.items()})
    return results
  return flatten_metrics(evaluate(model_weights, eval_data))


def prepare_output_dir(output_dir: str, config: Mapping[str, Any]) -> bool:
  """Creates `output_dir` with `config.json`, or checks it matches `config`.

  Returns whether it wrote `config.json` (a new run).

  Raises:
    OutputDirError: If `output_dir` holds a run with another configuration.
  """
  os.makedirs(output_dir, exist_ok=True)
  path = os.path.join(output_dir, CONFIG_FILE)
  config = json.loads(json.dumps(dict(config), sort_keys=True, default=str))
  if os.path.exists(path):
    with open(path) as f:
      previous = json.load(f)
    changed = sorted(
        k for k in set(previous) | set(config) if previous.get(k) != config.get(k)
    )
    if changed:
      key = changed[0]
      raise OutputDirError(
          f'output_dir {output_dir} holds a run with a different configuration '
          f'({key}: {previous.get(key)!r} there, {config.get(key)!r} now); '
          'choose another output_dir or delete it.'
      )
    return False
  tmp = path + '.tmp'
  with open(tmp, 'w') as f:
    json.dump(config, f, indent=2, sort_keys=True)
  os.replace(tmp, path)
  return True


def _remove_new_run(output_dir: str, existed: bool) -> None:
  """Undoes `prepare_output_dir` of a run that failed before its first
  round: its `config.json`, its empty checkpoint directory, and `output_dir`
  itself if this run created it and nothing else is there."""
  os.remove(os.path.join(output_dir, CONFIG_FILE))
  checkpoints = os.path.join(output_dir, CHECKPOINT_DIR)
  if os.path.isdir(checkpoints) and not os.listdir(checkpoints):
    os.rmdir(checkpoints)
  if not existed and not os.listdir(output_dir):
    os.rmdir(output_dir)


def _read_history(path: str, last_round: int) -> list[dict[str, float]]:
  """Rows of an earlier run up to `last_round` (later rows were not saved)."""
  if not os.path.exists(path):
    return []
  with open(path, newline='') as f:
    rows = [
        {k: float(v) for k, v in row.items() if v != ''}
        for row in csv.DictReader(f)
    ]
  return [row for row in rows if row['round'] <= last_round]


def _write_history(path: str, history: list[dict[str, float]]) -> None:
  keys = list(dict.fromkeys(k for row in history for k in row))
  tmp = path + '.tmp'
  with open(tmp, 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=keys)
    writer.writeheader()
    writer.writerows(history)
  os.replace(tmp, path)


def full_config(task_name, seed, clients_per_round, config=None) -> dict:
  """The configuration `run_experiment` records in `config.json`."""
  run_config = dict(config or {})
  run_config.update(task=task_name, seed=seed, clients_per_round=clients_per_round)
  return run_config


class EvalPlateauError(ValueError):
  """An `EvalPlateau` that does not fit the process or the evaluation."""


NUM_LOCAL_STEPS = 'num_local_steps'
LEARNING_RATE = 'learning_rate'
PLATEAU_HPARAMS = (NUM_LOCAL_STEPS, LEARNING_RATE)


@dataclasses.dataclass(frozen=True)
class EvalPlateau:
  """Decays K or the client learning rate when an evaluation metric plateaus.

  Seed 001 §3.5 (last paragraph, and Table 3's K-step and lr-step rows):
  "once the validation error plateaus we decay either K or eta". A process
  sees only its clients' training loss, which is what
  `tff_mixed.schedules.on_plateau` watches inside it; this watches the
  driver's centralised evaluation instead. After each evaluation the driver
  advances `schedule` with the metric (negated for `mode='max'`) and, when
  the value changes, writes it into the process state with `set_hparams`:
  `client_work/num_local_steps` (as `num_steps(value)`) or
  `client_work/optimizer_hparams/learning_rate`. Patience and window
  therefore count evaluations (every `eval_every` rounds), not rounds.

  The process must hold that hyper-parameter constant, as builders do for
  a number (a hand-set constant stays; a schedule would overwrite it): the
  driver checks at each evaluation that the process still has the value it
  set. On resume the schedule is replayed over the evaluations in
  `metrics.csv`, so a resumed run decays exactly when an uninterrupted one
  does. Each row gets `eval_plateau/<hparam>`, the value the next round
  uses.

  Attributes:
    schedule: A `tff_mixed.schedules.on_plateau(...)`; its initial value
      must be the process's (K, or the client learning rate).
    hparam: `'num_local_steps'` or `'learning_rate'`.
    metric: A column of `metrics.csv` the evaluation writes, e.g.
      `'eval/loss'` (or `'eval/<name>/loss'` when the task evaluates a
      mapping of datasets).
    mode: `'min'` (a loss or an error) or `'max'` (an accuracy).
  """
  schedule: schedules.Schedule
  hparam: str = NUM_LOCAL_STEPS
  metric: str = 'eval/loss'
  mode: str = 'min'

  def __post_init__(self):
    if not isinstance(self.schedule, schedules.OnPlateau):
      raise EvalPlateauError(
          'EvalPlateau needs a tff_mixed.schedules.on_plateau schedule, got '
          f'{type(self.schedule).__name__}.')
    if self.hparam not in PLATEAU_HPARAMS:
      raise EvalPlateauError(f'EvalPlateau hparam must be one of '
                             f'{PLATEAU_HPARAMS}, got {self.hparam!r}.')
    if self.mode not in ('min', 'max'):
      raise EvalPlateauError(
          f"EvalPlateau mode must be 'min' or 'max', got {self.mode!r}.")

  def as_hparam(self, value) -> float:
    """The schedule's value as the process holds it."""
    value = float(value)
    if self.hparam == NUM_LOCAL_STEPS:
      return int(schedules.num_steps(value))
    return float(np.float32(value))

  def observe(self, state: schedules.State, round_num: int,
              metrics: Mapping[str, float]) -> schedules.State:
    """The schedule's state after an evaluation with `metrics`."""
    value = metrics[self.metric]
    return self.schedule.next(
        state, tf.constant(round_num, tf.int32),
        tf.constant(-value if self.mode == 'max' else value, tf.float64))


def _client_hparam(hparams, name: str):
  """(container, key) of K or the client learning rate in `hparams`."""
  work = hparams.get('client_work') if isinstance(hparams, Mapping) else None
  if not isinstance(work, Mapping):
    return None, None
  if name == LEARNING_RATE:
    work = work.get('optimizer_hparams')
    if not isinstance(work, Mapping):
      return None, None
  return (work, name) if name in work else (None, None)


def _check_plateaus(plateaus, plateau_states, process, state, metric_names):
  """Checks every `EvalPlateau` against the process and the evaluation."""
  seen = set()
  for plateau, plateau_state in zip(plateaus, plateau_states):
    if plateau.hparam in seen:
      raise EvalPlateauError(f'two EvalPlateaus set {plateau.hparam}.')
    seen.add(plateau.hparam)
    if metric_names is None:
      raise EvalPlateauError(
          f'EvalPlateau on {plateau.hparam} watches {plateau.metric}, but the '
          'task has no evaluation data.')
    if plateau.metric not in metric_names:
      raise EvalPlateauError(
          f'EvalPlateau on {plateau.hparam}: the evaluation does not report '
          f'{plateau.metric!r}; it reports {", ".join(sorted(metric_names))}.')
    container, key = _client_hparam(process.get_hparams(state), plateau.hparam)
    if container is None:
      raise EvalPlateauError(
          f'EvalPlateau on {plateau.hparam}: this process has no client_work '
          f'{plateau.hparam} in its get_hparams.')
    held = plateau.as_hparam(container[key])
    expected = plateau.as_hparam(plateau.schedule.value(plateau_state))
    if held != expected:
      raise EvalPlateauError(
          f'EvalPlateau on {plateau.hparam} is at {expected}, but the '
          f'process is at {held}.')


def _metric_names(evaluate, eval_data) -> list[str]:
  """The `eval/...` columns `evaluate_all` writes."""
  def leaves(type_, prefix=''):
    if not isinstance(type_, tff.StructType):
      return [prefix.rstrip('/')]
    return [leaf for i, (name, element) in enumerate(
        tff.structure.iter_elements(type_))
            for leaf in leaves(element, f'{prefix}{name or i}/')]

  names = leaves(evaluate.type_signature.result)
  if isinstance(eval_data, Mapping):
    names = [f'{data}/{name}' for data in eval_data for name in names]
  return [f'eval/{name}' for name in names]


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
  `run_experiment` drives it with its
  cohort sampling (`sample_client_data`), metrics, checkpoints and
  evaluation; experiment scripts with their own cohorts and measurements
  pass theirs.
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


def sample_client_data(task: Task, seed: int, round_num: int,
                       clients_per_round: int) -> list[tf.data.Dataset]:
  """Round `round_num`'s cohort: `np.random.default_rng([seed, round_num])`
  samples it, so a resumed run sees the same clients as an uninterrupted
  one."""
  rng = np.random.default_rng([seed, round_num])
  return [task.train_dataset_fn(cid)
          for cid in task.sample_clients(rng, clients_per_round)]


def _apply_plateaus(plateaus, plateau_states, process, state, round_num,
                    row):
  """Advances each `EvalPlateau` with `row`'s evaluation; returns `state`
  with the values they give (and records them in `row`)."""
  hparams = process.get_hparams(state)
  changed = False
  for i, plateau in enumerate(plateaus):
    container, key = _client_hparam(hparams, plateau.hparam)
    current = plateau.as_hparam(plateau.schedule.value(plateau_states[i]))
    if plateau.as_hparam(container[key]) != current:
      raise EvalPlateauError(
          f'round {round_num}: the process has {plateau.hparam} = '
          f'{plateau.as_hparam(container[key])} where EvalPlateau set '
          f'{current}; its {plateau.hparam} follows a schedule of its own '
          '(build it with a constant).')
    plateau_states[i] = plateau.observe(plateau_states[i], round_num, row)
    value = plateau.as_hparam(plateau.schedule.value(plateau_states[i]))
    row[f'eval_plateau/{plateau.hparam}'] = value
    if value != current:
      container[key] = np.asarray(value, np.asarray(container[key]).dtype)
      changed = True
  return process.set_hparams(state, hparams) if changed else state


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
    client_groups: int = 0,
    eval_plateaus: Sequence[EvalPlateau] = (),
) -> ExperimentResult:
  """Trains `process` on `task` for `rounds` rounds, resuming if possible.

  Round r (1-based) samples its cohort with `sample_client_data` and runs
  through `run_rounds`, so a resumed run sees the same clients as an
  uninterrupted one. The initial
  model is drawn from the model's initializers under `seed`.

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
    client_groups: For a process built with `client_groups=True` (fast
      mode), the number of groups each round's cohort is split into (>= 1;
      `tff_mixed.templates.client_groups.group_datasets`); 0 for a process
      that takes one dataset per client.
    runtime_model: Seed 001's model of a round's wall-clock time on real
      clients; default `runtime.RuntimeModel()`. Each row gets
      `simulated_seconds` and `simulated_seconds_cumulative` (on resume the
      earlier rows are re-timed with this model).
    eval_plateaus: `EvalPlateau`s: K or the client learning rate decayed
      when an evaluation metric plateaus (seed 001's K-step and lr-step on
      the validation error); they need `eval_every >= 1`.

  Returns:
    An `ExperimentResult` with the final state, per-round history (including
    rounds of an earlier, resumed run) and the final evaluation. Besides the
    process's metrics each row has `sgd_steps_cumulative`, `round_seconds`
    (measured here) and the simulated times.

  Raises:
    ValueError: For non-positive `rounds`/`clients_per_round`/`checkpoint_every`.
    OutputDirError: If `output_dir` holds a run with another configuration.
    EvalPlateauError: For an `EvalPlateau` that does not fit the process or
      the evaluation (checked before the first round).
  """
  for name, value in (
      ('rounds', rounds),
      ('clients_per_round', clients_per_round),
      ('checkpoint_every', checkpoint_every),
  ):
    if value < 1:
      raise ValueError(f'{name} must be >= 1, got {value}.')
  if eval_every < 0:
    raise ValueError(f'eval_every must be >= 0, got {eval_every}.')
  if eval_plateaus and not eval_every:
    raise EvalPlateauError('eval_plateaus need eval_every >= 1 (with 0 the '
                           'model is evaluated only after the last round).')
  run_config = full_config(task.name, seed, clients_per_round, config)
  existed = os.path.exists(output_dir)
  created = prepare_output_dir(output_dir, run_config)
  try:  # Until the first round, a failure leaves no new run behind.
    if not hasattr(process, 'next'):  # A builder, called once the dir is good.
      process = process()
    grouped = groups.takes_groups(process)
    if grouped and client_groups < 1:
      raise ValueError('The process takes client groups (built with '
                       'client_groups=True): pass client_groups >= 1.')
    if not grouped and client_groups:
      raise ValueError(f'client_groups={client_groups} but the process takes '
                       'one dataset per client (build it with '
                       'client_groups=True).')

    state_manager = tff.program.FileProgramStateManager(
        os.path.join(output_dir, CHECKPOINT_DIR), prefix='round_', keep_total=3
    )
    state = process.initialize()
    state = process.set_model_weights(
        state, seeded_initial_weights(task.model_fn, seed)
    )
    saved, start_round = asyncio.run(state_manager.load_latest(state))
    if saved is not None:
      state = saved
    metrics_path = os.path.join(output_dir, METRICS_FILE)
    history = _read_history(metrics_path, start_round)
    cumulative_steps = (history[-1].get('sgd_steps_cumulative', 0.0)
                        if history else 0.0)
    if runtime_model is None:
      runtime_model = runtime.RuntimeModel()
    # Simulated time is not part of the configuration: on resume, earlier rounds
    # are re-timed with this run's model so the cumulative curve is one model's.
    simulated = 0.0
    for row in history:
      row['simulated_seconds'] = runtime_model.round_seconds_from_metrics(row)
      simulated += row['simulated_seconds']
      row['simulated_seconds_cumulative'] = simulated
    eval_data = task.eval_dataset_fn() if task.eval_dataset_fn else None
    evaluate = (build_evaluation(task.model_fn) if eval_data is not None
                else None)
    final_eval = {}
    # Replays the evaluations of a resumed run, so decays land where they would.
    plateau_states = [p.schedule.initialize() for p in eval_plateaus]
    for row in history:
      for i, plateau in enumerate(eval_plateaus):
        if plateau.metric in row:
          plateau_states[i] = plateau.observe(plateau_states[i],
                                              int(row['round']), row)
    _check_plateaus(
        eval_plateaus, plateau_states, process, state,
        None if evaluate is None else _metric_names(evaluate, eval_data))
  except BaseException:
    if created:
      _remove_new_run(output_dir, existed)
    raise
  summary_writer = tf.summary.create_file_writer(
      os.path.join(output_dir, TENSORBOARD_DIR)
  )
  started = time.perf_counter()

  bar = tqdm.trange(
      start_round + 1, rounds + 1, initial=start_round, total=rounds,
      desc=task.name, disable=not progress, leave=False,
  )
  def on_round(round_num, output, seconds):
    nonlocal state, cumulative_steps, simulated, final_eval
    state = output.state
    row = {'round': float(round_num)}
    row.update(flatten_metrics(output.metrics))
    cumulative_steps += row.get('client_work/sgd_steps', 0.0)
    row['sgd_steps_cumulative'] = cumulative_steps
    row['simulated_seconds'] = runtime_model.round_seconds_from_metrics(row)
    simulated += row['simulated_seconds']
    row['simulated_seconds_cumulative'] = simulated
    row['round_seconds'] = seconds
    is_last = round_num == rounds
    if eval_data is not None and (
        is_last or (eval_every and round_num % eval_every == 0)
    ):
      final_eval = evaluate_all(
          evaluate, process.get_model_weights(state), eval_data)
      row.update({f'eval/{k}': v for k, v in final_eval.items()})
      if eval_plateaus:
        state = _apply_plateaus(eval_plateaus, plateau_states, process, state,
                                round_num, row)
    history.append(row)
    with summary_writer.as_default(step=round_num):
      for key, value in row.items():
        if key != 'round':
          tf.summary.scalar(key, value)
    if TRAIN_LOSS_KEY in row:
      bar.set_postfix(loss=f'{row[TRAIN_LOSS_KEY]:.4f}')
    if is_last or round_num % checkpoint_every == 0:
      # Metrics first: a kill between the two leaves extra rows, which the
      # restart drops because they lie past the last checkpoint.
      _write_history(metrics_path, history)
      asyncio.run(state_manager.save(state, round_num))
    return state

  def client_data(round_num):
    datasets = sample_client_data(task, seed, round_num, clients_per_round)
    return (groups.group_datasets(datasets, client_groups) if grouped
            else datasets)

  state = run_rounds(process, state, client_data, bar, on_round)
  bar.close()
  summary_writer.flush()
  if eval_data is not None and not final_eval:  # Resumed a finished run.
    final_eval = evaluate_all(
        evaluate, process.get_model_weights(state), eval_data)
  if history:
    _write_history(metrics_path, history)
  return ExperimentResult(
      state=state,
      history=history,
      final_eval=final_eval,
      wall_time_seconds=time.perf_counter() - started,
  )
