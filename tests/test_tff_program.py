"""tff_mixed.program.TaskDataSource under TFF's own program logic, and the
examples/tff_program.py program (issue 19: "plugs into TFF pipelines")."""

import asyncio
import csv
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tasks.quadratic import task as quadratic_task
from tests import binaries
from tests import runs
from tff_mixed import algorithms
from tff_mixed import driver
from tff_mixed import execution
from tff_mixed import program

SGD = tff.learning.optimizers.build_sgdm
SEED = 5


@pytest.fixture(scope='module')
def task():
  return quadratic_task.create_quadratic_task(num_eval_points=None)


@pytest.fixture(scope='module')
def process(task):
  return algorithms.build_fed_avg(
      task.model_fn, SGD(learning_rate=0.1), SGD(learning_rate=0.5),
      num_local_steps=2)


def _elements(datasets):
  return [[{k: v.tolist() for k, v in batch.items()}
           for batch in dataset.as_numpy_iterator()] for dataset in datasets]


def test_selections_are_the_drivers_cohorts_round_by_round(task):
  iterator = program.TaskDataSource(task, seed=SEED).iterator()
  for round_num in (1, 2, 3):
    assert _elements(iterator.select(4)) == _elements(
        task.cohort(SEED, round_num, 4))


def test_the_iterator_serialises_its_position_only(task):
  source = program.TaskDataSource(task, seed=SEED)
  iterator = source.iterator()
  iterator.select(3)
  iterator.select(3)
  saved = iterator.to_bytes()
  assert len(saved) < 100
  restored = type(source.iterator()).from_bytes(saved)
  assert restored == iterator
  assert _elements(restored.select(3)) == _elements(
      task.cohort(SEED, 3, 3))
  other = program.TaskDataSource(task, seed=SEED + 1)
  with pytest.raises(ValueError, match=r"^the saved data iterator is task "
                     r"'quadratic' with seed 5, this program's data source "
                     r"task 'quadratic' with seed 6\.$"):
    type(other.iterator()).from_bytes(saved)
  with pytest.raises(ValueError, match='select needs k >= 1 clients, got None'):
    iterator.select()
  assert source.federated_type == tff.FederatedType(
      tff.SequenceType(tff.types.tensorflow_to_type(
          task.train_dataset_fn(task.train_client_ids[0]).element_spec)),
      tff.CLIENTS)


def _train_model(task, process, state_dir, rounds):
  metrics = tff.program.MemoryReleaseManager()
  models = tff.program.MemoryReleaseManager()
  initial_state = process.set_model_weights(
      process.initialize(), driver.seeded_initial_weights(task.model_fn, SEED))
  try:
    with tff.framework.get_context_stack().install(
        execution.create_program_context()):
      asyncio.run(tff.learning.programs.train_model(
          train_process=process,
          initial_train_state=initial_state,
          train_data_source=program.TaskDataSource(task, seed=SEED),
          train_per_round_clients=3,
          train_total_rounds=rounds,
          program_state_manager=tff.program.FileProgramStateManager(state_dir),
          model_output_manager=models,
          train_metrics_manager=metrics,
          evaluation_manager=None,
          evaluation_periodicity=1,
      ))
  finally:
    execution.shutdown()  # The program context's worker (and the default's,
    # which restarts on its next use).
  return metrics.values(), models


def test_train_model_resumed_trains_exactly_as_run_experiment(
    task, process, tmp_path):
  """TFF's program logic, stopped after round 2 and resumed from its saved
  state (iterator included), reaches our driver's model bit for bit."""
  state_dir = str(tmp_path / 'program_state')
  first, _ = _train_model(task, process, state_dir, rounds=2)
  resumed, models = _train_model(task, process, state_dir, rounds=3)
  assert sorted(first) == [1, 2] and sorted(resumed) == [3]
  ours = runs.experiment(task, process, tmp_path / 'driver', rounds=3,
                         clients_per_round=3, seed=SEED, eval_every=0)
  for round_num, metrics in [*first.items(), *resumed.items()]:
    np.testing.assert_array_equal(
        metrics['client_work']['first_step_loss'],
        ours.history[round_num - 1]['client_work/first_step_loss'])
  (final_state,) = models.values().values()
  np.testing.assert_array_equal(
      process.get_model_weights(final_state).trainable,
      process.get_model_weights(ours.state).trainable)


def test_example_program_trains_resumes_and_releases(tmp_path):
  out = tmp_path / 'program'

  def run(rounds):
    return binaries.run(
        os.path.join('examples', 'tff_program.py'),
        f'--output_dir={out}', f'--total_rounds={rounds}',
        '--clients_per_round=4', '--num_local_steps=2')

  first = run(2)
  assert first.returncode == 0, first.stderr[-3000:]
  # Past the 5 states kept: TFF's saves then remove old ones, at once.
  resumed = run(9)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert resumed.stdout.strip() == (
      f'trained to round 9; per-round metrics in {out}/train_metrics.csv, '
      f'the final state in {out}/model.')
  assert 'Traceback' not in first.stderr + resumed.stderr
  assert len(os.listdir(out / 'program_state')) <= 6
  with open(out / 'train_metrics.csv', newline='') as f:
    rows = list(csv.DictReader(f))
  assert [row['round'] for row in rows] == [str(r) for r in range(1, 10)]
  assert {row['client_work/sgd_steps'] for row in rows} == {'8'}
  assert sorted(os.listdir(out / 'model')) == [
      'release_training_checkpoint_round_2',
      'release_training_checkpoint_round_9']


def test_a_state_another_save_removed_is_not_an_error(tmp_path, monkeypatch):
  """TFF's `train_model` saves in tasks that run at once, and two can remove
  the same old state: TFF's manager then raises (a traceback in the
  program's log); ours takes a state already gone as removed."""
  from tensorflow_federated.python.program import file_utils  # pylint: disable=g-import-not-at-top

  async def present(path):  # Seen before another save removed it.
    del path
    return True

  monkeypatch.setattr(file_utils, 'exists', present)
  theirs = tff.program.FileProgramStateManager(str(tmp_path))
  with pytest.raises(tf.errors.NotFoundError):
    asyncio.run(theirs._remove(3))  # pylint: disable=protected-access
  asyncio.run(program.FileProgramStateManager(str(tmp_path))._remove(3))  # pylint: disable=protected-access
