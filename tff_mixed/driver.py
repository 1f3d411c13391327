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


def prepare_output_dir(output_dir: str, config: Mapping[str, Any]) -> None:
  """Creates `output_dir` with `config.json`, or checks it matches `config`.

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
    return
  tmp = path + '.tmp'
  with open(tmp, 'w') as f:
    json.dump(config, f, indent=2, sort_keys=True)
  os.replace(tmp, path)


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


RoundHook = Callable[[int, tff.learning.templates.LearningProcessOutput, float],
                     None]


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
  wall time). Returns the last state. `run_experiment` drives it with its
  cohort sampling (`sample_client_data`), metrics, checkpoints and
  evaluation; experiment scripts with their own cohorts and measurements
  pass theirs.
  """
  for round_num in round_nums:
    started = time.perf_counter()
    output = process.next(state, client_data_fn(round_num))
    state = output.state
    if on_round is not None:
      on_round(round_num, output, time.perf_counter() - started)
  return state


def sample_client_data(task: Task, seed: int, round_num: int,
                       clients_per_round: int) -> list[tf.data.Dataset]:
  """Round `round_num`'s cohort: `np.random.default_rng([seed, round_num])`
  samples it, so a resumed run sees the same clients as an uninterrupted
  one."""
  rng = np.random.default_rng([seed, round_num])
  return [task.train_dataset_fn(cid)
          for cid in task.sample_clients(rng, clients_per_round)]


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

  Returns:
    An `ExperimentResult` with the final state, per-round history (including
    rounds of an earlier, resumed run) and the final evaluation. Besides the
    process's metrics each row has `sgd_steps_cumulative`, `round_seconds`
    (measured here) and the simulated times.

  Raises:
    ValueError: For non-positive `rounds`/`clients_per_round`/`checkpoint_every`.
    OutputDirError: If `output_dir` holds a run with another configuration.
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
  run_config = full_config(task.name, seed, clients_per_round, config)
  prepare_output_dir(output_dir, run_config)
  if not hasattr(process, 'next'):  # A builder, called once the dir is good.
    process = process()
  grouped = groups.takes_groups(process)
  if grouped and client_groups < 1:
    raise ValueError('The process takes client groups (built with '
                     'client_groups=True): pass client_groups >= 1.')
  if not grouped and client_groups:
    raise ValueError(f'client_groups={client_groups} but the process takes one '
                     'dataset per client (build it with client_groups=True).')

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
  cumulative_steps = history[-1].get('sgd_steps_cumulative', 0.0) if history else 0.0
  if runtime_model is None:
    runtime_model = runtime.RuntimeModel()
  # Simulated time is not part of the configuration: on resume, earlier rounds
  # are re-timed with this run's model so the cumulative curve is one model's.
  simulated = 0.0
  for row in history:
    row['simulated_seconds'] = runtime_model.round_seconds_from_metrics(row)
    simulated += row['simulated_seconds']
    row['simulated_seconds_cumulative'] = simulated
  summary_writer = tf.summary.create_file_writer(
      os.path.join(output_dir, TENSORBOARD_DIR)
  )
  eval_data = task.eval_dataset_fn() if task.eval_dataset_fn else None
  evaluate = build_evaluation(task.model_fn) if eval_data is not None else None
  final_eval = {}
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
