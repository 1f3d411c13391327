"""--use_synthetic_data: every real-data binary tries out offline on small
files in its source's own format, read through the real loader (issue 19)."""

import csv
import importlib
import inspect
import os

import numpy as np
import pytest
import tensorflow as tf

from tasks.common import fixtures
from tasks.common import saved_run
from tasks.common import synthetic_data
from tasks.shakespeare import leaf
from tests import binaries

BENCHMARKS = ('femnist', 'shakespeare', 'cifar100', 'stackoverflow_tags',
              'sent140')
# Each binary's cpu_small cohort.
MIXED_FL_CLIENTS = {'celeba': 4, 'stackoverflow_wiki': 4, 'movielens': 4}


def test_every_real_data_task_has_synthetic_data():
  assert set(synthetic_data._SYNTHETIC) == {*BENCHMARKS, *MIXED_FL_CLIENTS}  # pylint: disable=protected-access
  # LEAF's Shakespeare windows are as long as its reader's.
  assert inspect.signature(fixtures.write_leaf_shakespeare).parameters[
      'window'].default == leaf.WINDOW


@pytest.mark.parametrize('name', BENCHMARKS)
def test_benchmark_tasks_load_their_synthetic_data_for_cpu_small(name):
  module = importlib.import_module(f'tasks.{name}.task')
  small = module.PRESETS['cpu_small']
  task = module.create_task(
      synthetic_data.synthetic_data(name)['data_dir'], model=small['model'],
      batch_size=small.get('batch_size', 8),
      max_train_clients=small.get('max_train_clients'), download=False,
      seed=0)
  assert len(task.train_client_ids) >= small['clients_per_round']
  batch = next(iter(task.train_dataset_fn(task.train_client_ids[0])))
  _assert_fits_the_model(task, batch, small.get('batch_size', 8))


def _assert_fits_the_model(task, batch, batch_size=None):
  """The batch is what the task's model reads: its input spec's structure,
  dtypes and shapes, at most `batch_size` examples, all finite. Without a
  `batch_size`, one example (central data is batched by the process)."""
  spec = task.model_fn().input_spec
  tf.nest.assert_same_structure(spec, batch)
  for s, t in zip(tf.nest.flatten(spec), tf.nest.flatten(batch)):
    if batch_size is None:
      s = tf.TensorSpec(s.shape[1:], s.dtype)
    assert s.is_compatible_with(tf.TensorSpec.from_tensor(t)), (s, t.shape)
    if batch_size is not None:
      assert 1 <= t.shape[0] <= batch_size
    assert np.isfinite(t.numpy().astype(np.float64)).all()


def test_mixed_fl_tasks_load_their_synthetic_data_for_cpu_small():
  from tasks.celeba import task as celeba  # pylint: disable=g-import-not-at-top
  from tasks.movielens import task as movielens  # pylint: disable=g-import-not-at-top
  from tasks.stackoverflow_wiki import task as lm  # pylint: disable=g-import-not-at-top
  celeba_task, celeba_central = celeba.create_celeba_task(
      synthetic_data.synthetic_data('celeba')['cache_dir'], download=False)
  paths = synthetic_data.synthetic_data('stackoverflow_wiki')
  lm_task, lm_central = lm.create_stackoverflow_wiki_task(
      paths['cache_dir'], paths['data_dir'], eval_clients=20,
      eval_sequences=200, wikipedia_eval_articles=100, download=False)
  movielens_task = movielens.create_movielens_task(
      movielens.load(synthetic_data.synthetic_data('movielens')['data_dir']))
  for name, task in [('celeba', celeba_task), ('stackoverflow_wiki', lm_task),
                     ('movielens', movielens_task)]:
    assert len(task.train_client_ids) >= MIXED_FL_CLIENTS[name], name
    batch = next(iter(task.train_dataset_fn(task.train_client_ids[0])))
    _assert_fits_the_model(task, batch, task.train_batch_size or 64)
  # The central data feeds the same models.
  for task, central in ((celeba_task, celeba_central),
                        (lm_task, lm_central)):
    _assert_fits_the_model(task, next(iter(central())))


def test_written_once_atomically_and_reused(tmp_path, monkeypatch):
  monkeypatch.setattr(synthetic_data, '_synthetic_root', lambda: str(tmp_path))
  first = synthetic_data.synthetic_data('sent140')
  assert first == {'data_dir': str(tmp_path / 'sent140_data_dir')}
  assert os.listdir(tmp_path) == ['sent140_data_dir']  # No partial left.
  mtime = os.path.getmtime(first['data_dir'])
  assert synthetic_data.synthetic_data('sent140') == first
  assert os.path.getmtime(first['data_dir']) == mtime


def _binary(module, *flags):
  return binaries.run(module, '--progress=false', *flags)


def test_a_binary_trains_on_synthetic_data_and_refuses_it_with_data_dir(
    tmp_path):
  out = tmp_path / 'run'
  run = _binary('tasks.movielens.train', '--preset=cpu_small',
                '--use_synthetic_data', f'--output_dir={out}')
  assert run.returncode == 0, run.stderr[-3000:]
  assert ('Warning: --use_synthetic_data: movielens trains on small random '
          "data in its source's format; the results mean nothing."
          in run.stderr)
  assert run.stdout.startswith('movielens: 5 rounds done in ')
  assert run.stdout.strip().endswith(f'; plot: {out}/metrics.png')
  assert (out / 'metrics.png').stat().st_size > 10_000
  assert saved_run.read_spec(str(out)).task_args['use_synthetic_data']
  conflict = _binary('tasks.movielens.train', '--use_synthetic_data',
                     '--data_dir=/data/ml-1m',
                     f'--output_dir={tmp_path / "conflict"}')
  assert conflict.returncode == 1
  assert conflict.stderr.strip().splitlines()[-1] == (
      '--use_synthetic_data replaces --data_dir; give one or the other.')
  assert not (tmp_path / 'conflict').exists()


@pytest.mark.parametrize('name', [n for n in BENCHMARKS if n != 'sent140'])
def test_each_benchmark_binary_trains_on_synthetic_data(name, tmp_path):
  """One round of each benchmark binary (Sent140's runs on its fixture in
  test_benchmarks), with google-research's --client_batch_size: 2 clients x
  K = 2 steps of at most 3 examples (the cpu_small batches are 8 or more),
  printing no ERROR line; on the in-process runtime, the same metrics.csv
  (to float rounding, but wall-clock seconds)."""
  outs = {}
  for runtime in ('tff', 'in_process'):
    out = outs[runtime] = tmp_path / runtime
    run = _binary(f'tasks.{name}.train', '--use_synthetic_data', '--rounds=1',
                  '--eval_every=1', '--client_batch_size=3',
                  f'--output_dir={out}', f'--runtime={runtime}')
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.startswith(f'{name}: 1 round done in ')
    # A good run says no ERROR (pfor's per-op lines for the CNNs and GRUs
    # were 1,300-1,600 of them; the one-line reason stays a warning).
    assert 'ERROR' not in run.stderr, run.stderr[:2000]
  binaries.assert_same_metrics(outs['tff'] / 'metrics.csv',
                               outs['in_process'] / 'metrics.csv')
  out = outs['tff']
  assert saved_run.read_spec(str(out)).task_args['batch_size'] == 3
  with open(out / 'metrics.csv') as f:
    rows = list(csv.DictReader(f))
  assert [r['round'] for r in rows] == ['1']
  work = {k.split('/', 1)[1]: float(v) for k, v in rows[0].items()
          if k.startswith('client_work/')}
  assert (work['num_local_steps'], work['clients/participating'],
          work['train/num_batches']) == (2, 2, 4)
  assert 4 <= work['train/num_examples'] <= 12
  assert np.isfinite(float(rows[0]['eval/loss']))

