"""Validation splits (`Task.validation_dataset_fn`, issue 27 item 4): held out
of the training clients' data, evaluated beside the test data as
`validation/<metric>`, and what an on-plateau schedule may watch."""

import dataclasses

import numpy as np
import pytest
import tensorflow_federated as tff

from tasks.common import training_flags
from tasks.digits import task as digits_task
from tasks.quadratic import task as quadratic_task
from tests import runs
from tff_mixed import algorithms
from tff_mixed import driver
from tff_mixed import schedules


def _examples(dataset):
  return sorted(map(tuple, np.concatenate(
      [b['x'] for b in dataset.as_numpy_iterator()]).tolist()))


def test_digits_holds_out_a_fraction_of_every_client():
  whole = digits_task.create_digits_task(num_clients=20, seed=3)
  split = digits_task.create_digits_task(num_clients=20, seed=3,
                                         validation_fraction=0.25)
  held = []
  for cid in whole.train_client_ids:
    every = _examples(whole.train_dataset_fn(cid))
    kept = _examples(split.train_dataset_fn(cid))
    assert len(every) - len(kept) == int(0.25 * len(every))
    assert set(kept) <= set(every)
    held += sorted(set(every) - set(kept))
  assert _examples(split.validation_dataset_fn()) == sorted(held)
  assert whole.validation_dataset_fn is None
  # The held-out examples depend on the seed only.
  again = digits_task.create_digits_task(num_clients=20, seed=3,
                                         validation_fraction=0.25)
  assert _examples(again.validation_dataset_fn()) == sorted(held)
  with pytest.raises(ValueError, match=r'validation_fraction must be in '
                     r'\[0, 1\), got 1.0'):
    digits_task.create_digits_task(validation_fraction=1.0)


@pytest.fixture(scope='module')
def quadratic():
  task = quadratic_task.create_quadratic_task(initial_x=-20.0,
                                              num_eval_points=50)
  # Validation: the clients z = 1 and z = 3, where f(x; z) = z x^2 / 2 - x.
  return dataclasses.replace(task, validation_dataset_fn=lambda: {
      'low': quadratic_task.client_dataset('1.0'),
      'high': quadratic_task.client_dataset('3.0')})


@pytest.fixture(scope='module')
def k4_process(quadratic):
  return algorithms.build_fed_avg(
      quadratic.model_fn,
      tff.learning.optimizers.build_sgdm(learning_rate=1e-3),
      num_local_steps=4)


def test_validation_is_evaluated_beside_the_test_data(quadratic, k4_process,
                                                      tmp_path):
  result = runs.experiment(quadratic, k4_process, tmp_path, rounds=2,
                           clients_per_round=2, eval_every=1)
  x = float(k4_process.get_model_weights(result.state).trainable[0])
  last = result.history[-1]
  for name, z in (('low', 1.0), ('high', 3.0)):
    assert last[f'validation/{name}/x'] == pytest.approx(x)
    assert last[f'validation/{name}/loss'] == pytest.approx(
        0.5 * z * x * x - x, rel=1e-5)
  assert 'eval/x' in last and 'validation/x' not in last
  # The result's final evaluation is the test data's, as before.
  assert result.final_eval['x'] == pytest.approx(x)
  assert not any('validation' in k for k in result.final_eval)


def test_k_step_on_the_validation_loss(quadratic, k4_process, tmp_path):
  """x rises at every round, so validation/high/x (mode min) never improves
  after the first evaluation: with patience 1 K halves at rounds 4 and 6."""
  plateau = driver.EvalPlateau(schedules.on_plateau(4, factor=0.5, patience=1),
                               metric='validation/high/x')
  result = runs.experiment(
      quadratic, k4_process, tmp_path, rounds=6, clients_per_round=3, seed=7,
      eval_every=2, checkpoint_every=2, eval_plateaus=[plateau])
  assert [row['client_work/sgd_steps'] for row in result.history] == [
      12, 12, 12, 12, 6, 6]
  with pytest.raises(driver.EvalPlateauError,
                     match="reports .*validation/high/loss"):
    runs.experiment(
        quadratic, k4_process, tmp_path / 'bad', rounds=2, clients_per_round=3,
        eval_every=1, eval_plateaus=[driver.EvalPlateau(
            schedules.on_plateau(4, factor=0.5, patience=1),
            metric='validation/loss')])


def test_the_flags_take_a_validation_monitor():
  _, run, _ = training_flags.config_from_values(
      k_schedule='on_plateau', k_monitor='validation/loss', eval_every=2)
  assert run.eval_plateaus[0].metric == 'validation/loss'
