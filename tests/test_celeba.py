"""The CelebA task on a fixture database in TFF's own format."""

import csv
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tasks.celeba import data
from tasks.celeba import task as celeba_task
from tasks.common import saved_run
from tests import binaries
from tests import celeba_fixture
from tests import runs
from tff_mixed import algorithms
from tff_mixed.algorithms import mixed_fl


@pytest.fixture(scope='module')
def raw(tmp_path_factory):
  cache_dir = str(tmp_path_factory.mktemp('tff_cache'))
  celeba_fixture.write(cache_dir, celeba_fixture.CLIENTS)
  return data.load_raw(cache_dir, download=False)


def _labels(dataset):
  return [bool(e['smiling'].numpy()) for e in dataset]


def test_raw_clients_and_splits(raw):
  train, test = raw
  assert sorted(train.client_ids) == [f'c0{i}' for i in range(1, 8)]
  assert sorted(test.client_ids) == ['e1', 'e2']
  example = next(iter(train.create_tf_dataset_for_client('c01')))
  assert example['image'].shape == (84, 84, 3)


def test_three_raw_clients_make_one_composite_client(raw):
  train, _ = raw
  ids = data.composite_client_ids(train.client_ids)
  assert ids == ['c01+c02+c03', 'c04+c05+c06']  # c07 is left over.
  labels = _labels(data.composite_dataset(train, ids[0]))
  assert labels == [True, True, False, False, False, True]
  # The paper's counts: 8,408 raw training clients -> 2,802 composite ones.
  assert len(data.composite_client_ids([str(i) for i in range(8408)])) == 2802


def test_federated_smiling_central_non_smiling_eval_both(raw):
  train, test = raw
  composite = data.composite_dataset(train, 'c04+c05+c06')
  federated = composite.filter(data.is_smiling).map(data.to_model_input)
  assert [float(e['y'][0]) for e in federated] == [1.0] * 5
  central = train.create_tf_dataset_from_all_clients().filter(
      data.is_not_smiling)
  assert len(list(central)) == 7  # Every training client's non-smiling faces.
  assert sorted(_labels(test.create_tf_dataset_from_all_clients())) == [
      False, False, True, True]


def test_model_input_matches_the_element_spec(raw):
  train, _ = raw
  inputs = train.create_tf_dataset_for_client('c01').map(data.to_model_input)
  assert inputs.element_spec == data.element_spec()
  x = next(iter(inputs))['x']
  assert 0.0 <= float(tf.reduce_min(x)) and float(tf.reduce_max(x)) <= 1.0


def test_missing_database_is_one_line_naming_the_file(tmp_path):
  with pytest.raises(data.DataUnavailableError) as info:
    data.load_raw(str(tmp_path), download=False)
  message = str(info.value)
  assert '\n' not in message
  assert str(tmp_path / 'celeba.sqlite') in message and data.URL in message


class TestTask:
  """The task on the fixture: two rounds of FedAvg and of each mixing."""

  @pytest.fixture(scope='class')
  def task_and_central(self, tmp_path_factory):
    cache_dir = str(tmp_path_factory.mktemp('tff_cache'))
    celeba_fixture.write(cache_dir, celeba_fixture.CLIENTS)
    return celeba_task.create_celeba_task(
        cache_dir, batch_size=2, hidden_units=4, download=False)

  def test_clients_central_and_evaluation_data_are_the_fixtures(
      self, task_and_central):
    task, central_fn = task_and_central
    assert task.train_client_ids == ['c01+c02+c03', 'c04+c05+c06']
    ys = [y for b in task.train_dataset_fn('c04+c05+c06')
          for y in b['y'].numpy().ravel()]
    assert ys == [1.0] * 5
    assert [float(e['y'][0]) for e in central_fn()] == [0.0] * 7
    eval_data = task.eval_dataset_fn()
    sizes = {k: sum(int(b['y'].shape[0]) for b in d)
             for k, d in eval_data.items()}
    assert sizes == {'all': 4, 'smiling': 2, 'not_smiling': 2}

  @pytest.mark.parametrize('algorithm', ['fedavg', *mixed_fl.MIXINGS])
  def test_rounds_have_finite_metrics_and_the_objective_falls(
      self, task_and_central, algorithm, tmp_path):
    task, central_fn = task_and_central
    sgd = tff.learning.optimizers.build_sgdm
    # Random-pixel images have 21,168 inputs of ~0.5: lr 1e-4 keeps steps small.
    if algorithm == 'fedavg':
      process = algorithms.build_fed_avg(
          task.model_fn, sgd(learning_rate=1e-4), num_local_steps=2)
    else:
      process = algorithms.build_mixed_fl(
          task.model_fn, central_data_fn=lambda: central_fn().batch(7), mixing=algorithm,
          client_optimizer_fn=sgd(learning_rate=1e-4), num_local_steps=2)
    result = runs.experiment(task, process, tmp_path, rounds=3,
                             clients_per_round=2, eval_every=3)
    rows = result.history
    # AUC is undefined (NaN, where Keras says 0.0) over one label: clients
    # train on smiling faces only, and two evaluation subsets hold one label.
    one_label = {'client_work/train/auc', 'eval/smiling/auc',
                 'eval/not_smiling/auc'}
    assert all(np.isfinite(v) != (k in one_label)
               for r in rows for k, v in r.items()), rows
    assert np.isnan(result.final_eval['smiling/auc'])
    assert 0.0 <= result.final_eval['all/auc'] <= 1.0
    assert set(result.final_eval) >= {
        'all/auc', 'all/accuracy', 'smiling/accuracy', 'not_smiling/accuracy'}
    # The training objective falls: the federated loss (smiling faces), plus
    # the central loss (non-smiling faces) with w_f = w_c = 0.5 for mixed FL;
    # one central batch holds all 7 central faces, so it is not batch noise.
    assert ('central/loss' in rows[0]) == (algorithm != 'fedavg')
    objective = [r['client_work/train/loss'] + r.get('central/loss', 0.0)
                 for r in rows]
    assert objective[-1] < objective[0], objective
    # The final evaluation is the trained model's, by hand: each subset's
    # accuracy (p > 0.5) and mean binary cross-entropy.
    keras = task.model_fn.keras_model_fn()
    result.process.get_model_weights(result.state).assign_weights_to(keras)
    for part, dataset in task.eval_dataset_fn().items():
      p, y = [], []
      for batch in dataset:
        p.append(keras(batch['x']).numpy().astype(np.float64).ravel())
        y.append(batch['y'].numpy().astype(np.float64).ravel())
      p, y = np.concatenate(p), np.concatenate(y)
      assert result.final_eval[f'{part}/accuracy'] == pytest.approx(
          np.mean((p > 0.5) == y), abs=1e-6)
      bce = -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))
      assert result.final_eval[f'{part}/loss'] == pytest.approx(bce,
                                                               rel=1e-4)


def _binary(*args):
  return binaries.run('tasks.celeba.train', *args)


def test_binary_helpfull_lists_the_paper_defaults():
  out = _binary('--helpfull').stdout
  for expected in ('--batch_size: Client batch size |B_i|.\n    (default: \'5\')',
                   "--num_local_steps: K (K_0 with --k_schedule)",
                   "--client_learning_rate: Client learning rate\n"
                   "    (default: '0.01')",
                   "--clients_per_round: Clients sampled per round.\n"
                   "    (default: '100')",
                   '1000 for 1-way GT'):
    assert expected in out, expected


def test_binary_without_data_exits_with_one_line(tmp_path):
  result = _binary(f'--cache_dir={tmp_path / "empty"}', '--nodownload',
                   f'--output_dir={tmp_path / "out"}')
  assert result.returncode == 1
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith('Error: CelebA: ') and 'celeba.sqlite' in last
  assert last.endswith('--use_synthetic_data runs the binary on small random '
                       'stand-ins.')
  assert not os.path.exists(tmp_path / 'out')


def test_binary_cpu_small_preset_on_the_fixture(tmp_path):
  cache_dir = str(tmp_path / 'cache')
  celeba_fixture.write(cache_dir, celeba_fixture.CLIENTS)
  result = _binary('--preset=cpu_small', '--clients_per_round=2',
                   '--algorithm=parallel_training', '--hidden_units=4',
                   f'--cache_dir={cache_dir}', '--noprogress',
                   f'--output_dir={tmp_path / "out"}')
  assert result.returncode == 0, result.stderr[-2000:]
  with open(tmp_path / 'out' / 'metrics.csv') as f:
    rows = list(csv.DictReader(f))
  assert len(rows) == 5  # The preset's rounds.
  assert 'eval/not_smiling/accuracy' in rows[-1]
  spec = saved_run.read_spec(str(tmp_path / 'out'))
  assert spec.task_args['central_batch_size'] == 20
  assert spec.run.clients_per_round == 2
