"""The training error both ways (issue 55 item 3): `train_eval/...`, the
global model on training clients' data, beside `client_work/train/loss`,
the clients' local models during their K steps."""

import pytest
import tensorflow_federated as tff

from tasks.common import run_config
from tasks.common import task_registry
from tasks.quadratic import task as quadratic_task
from tests import runs
from tff_mixed import algorithms
from tff_mixed import driver
from tff_mixed.driver import evaluation


@pytest.fixture(scope='module')
def quadratic():
  # Training clients z = 1, 2, 3, one example each: f(x; z) = z x^2 / 2 - x.
  return quadratic_task.create_quadratic_task(initial_x=-2.0)


@pytest.fixture(scope='module')
def k4_process(quadratic):
  return algorithms.build_fed_avg(
      quadratic.model_fn,
      tff.learning.optimizers.build_sgdm(learning_rate=0.1),
      num_local_steps=4)


def test_train_eval_is_the_global_model_on_every_training_client(
    quadratic, k4_process, tmp_path):
  """With every client: the mean over z = 1, 2, 3 of f(x; z) = x^2 - x at
  the server's x of that round, which the clients' mean loss over their
  local steps is not."""
  result = runs.experiment(quadratic, k4_process, tmp_path, rounds=3,
                           clients_per_round=2, eval_every=1,
                           train_eval_clients=3)
  for row in result.history:
    x = row['eval/x']
    assert row['train_eval/x'] == x
    assert row['train_eval/num_examples'] == 3
    assert row['train_eval/loss'] == pytest.approx(x * x - x, rel=1e-6)
    assert row['client_work/train/loss'] != pytest.approx(x * x - x, rel=0.05)
  assert result.history[-1]['eval/x'] == pytest.approx(
      float(k4_process.get_model_weights(result.state).trainable[0]))
  assert 'train_eval/loss' in driver.metrics_columns(
      quadratic, k4_process, train_eval_clients=3)
  assert not any(c.startswith('train_eval/') for c in driver.metrics_columns(
      quadratic, k4_process))


def test_a_sample_of_training_clients_is_drawn_once_from_the_seed(
    quadratic, k4_process, tmp_path):
  ids = [f'c{i}' for i in range(100)]
  sample = evaluation.training_sample(ids, 7, seed=5)
  assert len(set(sample)) == 7 and sample == sorted(sample, key=ids.index)
  assert evaluation.training_sample(ids, 7, seed=5) == sample
  assert evaluation.training_sample(ids, 7, seed=6) != sample
  assert evaluation.training_sample(ids, 100, seed=5) == ids
  assert evaluation.training_sample(ids, 500, seed=5) == ids
  # Two of the three quadratic clients, the same at every evaluation.
  chosen = evaluation.training_sample(quadratic.train_client_ids, 2, seed=4)
  zs = [float(c) for c in chosen]
  assert len(zs) == 2
  result = runs.experiment(quadratic, k4_process, tmp_path, rounds=2,
                           clients_per_round=2, seed=4, eval_every=1,
                           train_eval_clients=2)
  for row in result.history:
    x = row['eval/x']
    assert row['train_eval/loss'] == pytest.approx(
        sum(z * x * x / 2 - x for z in zs) / 2, rel=1e-6)


def test_the_flag_is_the_run_s_value():
  spec = task_registry.spec('digits', train_eval_clients=20)
  assert spec.run.train_eval_clients == 20
  assert run_config.driver_arguments(
      spec.run, spec.execution)['train_eval_clients'] == 20
  with pytest.raises(task_registry.TaskSpecError,
                     match='train_eval_clients'):
    task_registry.spec('digits', train_eval_clients=-1)
