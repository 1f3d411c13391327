"""Stack Overflow + Wikipedia character data, on fixtures in each source's format."""

import csv
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

import tensorflow_federated as tff

from tasks.common import saved_run
from tasks.stackoverflow_wiki import data
from tasks.stackoverflow_wiki import task as lm_task
from tests import binaries
from tests import runs
from tests import stackoverflow_fixture
from tff_mixed import algorithms
from tff_mixed.algorithms import mixed_fl


SO_CLIENTS = {
    ('train', 'u1'): ['how do i sort a list', 'use sorted()'],
    ('train', 'u2'): ['x' * 150],
    ('heldout', 'h1'): ['held out'],
    ('test', 't1'): ['test post one', 'two'],
}


@pytest.fixture(scope='module')
def stackoverflow(tmp_path_factory):
  cache_dir = tmp_path_factory.mktemp('tff_cache')
  stackoverflow_fixture.write_stackoverflow(str(cache_dir), SO_CLIENTS)
  return data.load_stackoverflow(str(cache_dir), download=False)


def test_char_ids_and_vocabulary():
  ids = data.char_ids(tf.constant('a\nb~é')).numpy().tolist()
  assert ids == [68, data.NEWLINE, 69, 97, data.OOV, data.OOV]  # é: 2 bytes.
  vocab = data.vocabulary()
  assert len(vocab) == data.VOCAB_SIZE == 98
  text = 'Hello, World! 123 {x: [y]}'
  assert ''.join(vocab[i] for i in data.char_ids(tf.constant(text))) == text


def test_sequences_are_shifted_pieces_padded_with_zero():
  texts = tf.data.Dataset.from_tensor_slices(['hello world', 'ab'])
  pairs = [(e['x'].numpy().tolist(), e['y'].numpy().tolist())
           for e in data.to_sequences(texts, length=4)]
  ids = lambda s: data.char_ids(tf.constant(s)).numpy().tolist()
  # 'hello world' -> 'hello', ' worl', 'd' + 4 pads; 'ab' -> 'ab' + 3 pads.
  assert pairs == [
      (ids('hell'), ids('ello')),
      (ids(' wor'), ids('worl')),
      (ids('d') + [0, 0, 0], [0, 0, 0, 0]),
      (ids('ab') + [0, 0], ids('b') + [0, 0, 0]),
  ]


def test_stackoverflow_fixture_clients_and_sequences(stackoverflow):
  train, heldout, test = stackoverflow
  assert sorted(train.client_ids) == ['u1', 'u2']
  assert heldout.client_ids == ['h1'] and test.client_ids == ['t1']
  sequences = data.to_sequences(data.stackoverflow_texts(
      train.create_tf_dataset_for_client('u2')))
  assert sequences.element_spec == data.element_spec()
  xs = [e['x'].numpy() for e in sequences]
  assert len(xs) == 2  # 150 characters -> pieces of 101: 2.
  x_id = data.char_ids(tf.constant('x')).numpy()[0]
  np.testing.assert_array_equal(xs[0], [x_id] * 100)
  assert (xs[1] == x_id).sum() == 49 and (xs[1] == data.PAD).sum() == 51


def test_wikipedia_through_tfds_mock_data():
  with tfds.testing.mock_data(num_examples=4):
    texts = data.load_wikipedia(download=False)
    sequences = data.to_sequences(texts)
    batch = next(iter(sequences.batch(3)))
  assert batch['x'].shape == (3, 100) and batch['y'].shape == (3, 100)
  assert int(tf.reduce_max(batch['x'])) < data.VOCAB_SIZE


def test_missing_sources_give_one_line(tmp_path):
  with pytest.raises(data.DataUnavailableError) as info:
    data.load_stackoverflow(str(tmp_path), download=False)
  assert '\n' not in str(info.value) and 'stackoverflow.sqlite' in str(info.value)
  with pytest.raises(data.DataUnavailableError) as info:
    data.load_wikipedia(str(tmp_path / 'tfds'), download=False)
  message = str(info.value)
  assert '\n' not in message and data.WIKIPEDIA in message


def test_wikipedia_fixture_in_tfds_format_and_split_slices(tmp_path):
  data_dir = str(tmp_path / 'tfds')
  stackoverflow_fixture.write_wikipedia(
      data_dir, [('A', 'first'), ('B', 'second'), ('C', 'third')])
  texts = lambda split: [t.numpy().decode() for t in data.load_wikipedia(
      data_dir, download=False, split=split)]
  assert texts('train') == ['first', 'second', 'third']
  central, evaluation = lm_task.wikipedia_splits(1)
  assert texts(evaluation) == ['first']
  assert texts(central) == ['second', 'third']
  with pytest.raises(ValueError, match='eval_articles must be >= 1'):
    lm_task.wikipedia_splits(0)


def test_loss_and_accuracy_skip_padding():
  # Two positions of one sequence are real characters, one is padding.
  y_true = tf.constant([[5, 7, data.PAD]])
  logits = np.zeros([1, 3, data.VOCAB_SIZE], np.float32)
  logits[0, 0, 5] = 2.0  # Right: the argmax is the target.
  logits[0, 1, 0] = 1.0  # Wrong: the target 7 has logit 0.
  logits[0, 2, 9] = 3.0  # Padding: not scored.
  log_z = lambda row: np.log(np.exp(row.astype(np.float64)).sum())
  expected = ((log_z(logits[0, 0]) - 2.0) + log_z(logits[0, 1])) / 2
  logits = tf.constant(logits)
  loss = lm_task.PaddedCrossentropy()(y_true, logits)
  np.testing.assert_allclose(float(loss), expected, rtol=1e-6)
  accuracy = lm_task.PaddedAccuracy()
  accuracy.update_state(y_true, logits)
  # Position 0 is right (argmax 5), position 1 wrong (argmax 0), pad ignored.
  assert float(accuracy.result()) == 0.5
  all_padding = tf.zeros([1, 3], tf.int32)
  assert float(lm_task.PaddedCrossentropy()(all_padding, logits)) == 0.0
  with pytest.raises(ValueError, match='sample_weight must be None'):
    lm_task.PaddedCrossentropy()(y_true, logits, sample_weight=[1.0])


def test_model_has_the_papers_shape():
  with tf.Graph().as_default():
    model = lm_task.model_fn_for()()
    sizes = sorted(int(np.prod(v.shape)) for v in model.trainable_variables)
  v, e, h = data.VOCAB_SIZE, lm_task.EMBEDDING_DIM, lm_task.GRU_UNITS
  assert sizes == sorted([v * e,  # Embedding.
                          e * 3 * h, h * 3 * h, 2 * 3 * h,  # GRU (reset_after).
                          h * v, v])  # Output layer.


WIKI_ARTICLES = [('Eval', 'Held out article about rivers. ' * 10),
                 ('Central one', 'The river flows to the sea. ' * 20),
                 ('Central two', 'Mountains rise above the valley. ' * 20)]
LM_CLIENTS = {
    ('train', 'u1'): ['def f(x): return x + 1'] * 6,
    ('train', 'u2'): ['import numpy as np; np.zeros(3)'] * 6,
    ('train', 'u3'): ['for i in range(10): print(i)'] * 6,
    ('test', 't1'): ['how do i print a list?', 'use print(list)'],
    ('test', 't2'): ['what is a tuple? ' * 8],
    ('test', 't3'): ['never sampled'],
    ('heldout', 'h1'): ['held-out split (unused)'],
}


class TestTask:
  """The task on the fixtures: data, and rounds of FedAvg and each mixing."""

  @pytest.fixture(scope='class')
  def task_and_central(self, tmp_path_factory):
    cache_dir = str(tmp_path_factory.mktemp('tff_cache'))
    data_dir = str(tmp_path_factory.mktemp('tfds'))
    stackoverflow_fixture.write_stackoverflow(cache_dir, LM_CLIENTS)
    stackoverflow_fixture.write_wikipedia(data_dir, WIKI_ARTICLES)
    return lm_task.create_stackoverflow_wiki_task(
        cache_dir, data_dir, batch_size=2, eval_clients=2, eval_sequences=3,
        wikipedia_eval_articles=1, embedding_dim=8, gru_units=8,
        download=False)

  def test_clients_central_and_evaluation_data_are_the_fixtures(
      self, task_and_central):
    task, central_fn = task_and_central
    assert task.train_client_ids == ['u1', 'u2', 'u3']
    batches = list(task.train_dataset_fn('u1'))
    element_type = tff.types.tensorflow_to_type(
        task.train_dataset_fn('u1').element_spec)
    assert tff.types.tensorflow_to_type(
        lm_task.input_spec()).is_assignable_from(element_type)
    assert [b['x'].shape for b in batches] == [(2, 100), (2, 100), (2, 100)]
    text = [c for c in data.vocabulary()]
    first = ''.join(text[i] for i in batches[0]['x'][0].numpy())
    assert first == 'def f(x): return x + 1'  # Then padding ('').
    # Central: Wikipedia after the held-out article, in 101-id pieces.
    central = list(central_fn())
    central_text = ''.join(text[i] for e in central for i in e['x'].numpy())
    assert 'river flows' in central_text and 'Held out' not in central_text
    assert len(central) == 6 + 7  # 560 and 660 characters, pieces of 101.
    eval_data = task.eval_dataset_fn()
    assert list(eval_data) == ['all', 'stackoverflow', 'wikipedia']
    ids = lambda d: sorted(tuple(x) for b in d for x in b['x'].numpy())
    sizes = {k: len(ids(d)) for k, d in eval_data.items()}
    assert sizes == {'all': 6, 'stackoverflow': 3, 'wikipedia': 3}
    # The mixed set is exactly the two sources' sequences, shuffled.
    assert ids(eval_data['all']) == sorted(
        ids(eval_data['stackoverflow']) + ids(eval_data['wikipedia']))
    so_text = ''.join(text[i] for b in eval_data['stackoverflow']
                      for x in b['x'].numpy() for i in x)
    markers = ('print a list', 'tuple', 'never sampled')  # t1, t2, t3.
    assert sum(m in so_text for m in markers) == 2  # 2 sampled test clients.

  @pytest.mark.parametrize('algorithm', ['fedavg', *mixed_fl.MIXINGS])
  def test_rounds_have_finite_metrics_and_the_loss_falls(
      self, task_and_central, algorithm, tmp_path):
    task, central_fn = task_and_central
    sgd = tff.learning.optimizers.build_sgdm
    if algorithm == 'fedavg':
      process = algorithms.build_fed_avg(
          task.model_fn, sgd(learning_rate=0.5), num_local_steps=2)
    else:
      process = algorithms.build_mixed_fl(
          task.model_fn, central_data_fn=lambda: central_fn().batch(4), mixing=algorithm,
          client_optimizer_fn=sgd(learning_rate=0.5), num_local_steps=2,
          federated_weight=0.73, central_weight=0.27)
    result = runs.experiment(task, process, tmp_path, rounds=3,
                             clients_per_round=3, eval_every=1)
    rows = result.history
    assert all(np.isfinite(v) for r in rows for v in r.values())
    assert set(result.final_eval) >= {
        'all/accuracy', 'stackoverflow/accuracy', 'wikipedia/accuracy',
        'all/loss'}
    losses = [r['eval/all/loss'] for r in rows]
    assert losses[-1] < losses[0]
    # The final evaluation is the trained model's, by hand: accuracy over
    # the non-padding targets; the loss each batch's mean over them,
    # averaged over batches by their sequences (TFF's Keras loss metric).
    keras = task.model_fn.keras_model_fn()
    result.process.get_model_weights(result.state).assign_weights_to(keras)
    for part, dataset in task.eval_dataset_fn().items():
      correct = tokens = loss_sum = sequences = 0.0
      for batch in dataset:
        logits = keras(batch['x']).numpy().astype(np.float64)
        y = batch['y'].numpy()
        mask = y != data.PAD
        log_p = logits - logits.max(-1, keepdims=True)
        log_p -= np.log(np.exp(log_p).sum(-1, keepdims=True))
        nll = -np.take_along_axis(log_p, y[..., None], -1)[..., 0]
        correct += (logits.argmax(-1) == y)[mask].sum()
        tokens += mask.sum()
        loss_sum += nll[mask].mean() * len(y)
        sequences += len(y)
      assert result.final_eval[f'{part}/accuracy'] == pytest.approx(
          correct / tokens, abs=1e-6)
      assert result.final_eval[f'{part}/loss'] == pytest.approx(
          loss_sum / sequences, rel=1e-4)


def _binary(*args):
  return binaries.run('tasks.stackoverflow_wiki.train', *args)


def test_binary_helpfull_lists_the_paper_defaults():
  out = ' '.join(_binary('--helpfull').stdout.split())  # Unwrapped.
  for expected in ("--batch_size: Client batch size |B_i| (sequences).\n"
                   "    (default: '8')",
                   "--num_local_steps: K (K_0 with --k_schedule): SGD steps "
                   "every client takes per round.\n    (default: '16')",
                   "--client_learning_rate: Client learning rate (1.0 with "
                   "--algorithm=two_way_gradient_transfer unless set)\n"
                   "    (default: '2.0')",
                   "--federated_weight: Mixed FL: w_f, the weight of the "
                   "federated loss.\n    (default: '0.73')",
                   "(default: '0.27')", "(default: '1024')",
                   "6400 for 1-way GT", "800 for PT and 2-way GT"):
    expected = ' '.join(expected.split())
    assert expected in out, expected


@pytest.mark.parametrize('missing', ['stackoverflow', 'wikipedia'])
def test_binary_without_data_exits_with_one_line(tmp_path, missing):
  cache_dir, data_dir = tmp_path / 'cache', tmp_path / 'tfds'
  if missing == 'wikipedia':
    stackoverflow_fixture.write_stackoverflow(str(cache_dir), LM_CLIENTS)
  result = _binary(f'--cache_dir={cache_dir}', f'--data_dir={data_dir}',
                   '--nodownload', f'--output_dir={tmp_path / "out"}')
  assert result.returncode == 1
  last = result.stderr.strip().splitlines()[-1]
  if missing == 'stackoverflow':
    assert last.startswith('Error: Stack Overflow: ')
    assert 'stackoverflow.sqlite' in last
  else:
    assert last.startswith('Error: Wikipedia: ') and 'tfds build' in last
  assert not os.path.exists(tmp_path / 'out')


def test_binary_cpu_small_preset_on_the_fixtures(tmp_path):
  cache_dir, data_dir = str(tmp_path / 'cache'), str(tmp_path / 'tfds')
  stackoverflow_fixture.write_stackoverflow(cache_dir, LM_CLIENTS)
  stackoverflow_fixture.write_wikipedia(data_dir, WIKI_ARTICLES)
  result = _binary('--preset=cpu_small', '--clients_per_round=2',
                   '--rounds=2', '--algorithm=two_way_gradient_transfer',
                   '--wikipedia_eval_articles=1', f'--cache_dir={cache_dir}',
                   f'--data_dir={data_dir}', '--noprogress',
                   f'--output_dir={tmp_path / "out"}')
  assert result.returncode == 0, result.stderr[-2000:]
  with open(tmp_path / 'out' / 'metrics.csv') as f:
    rows = list(csv.DictReader(f))
  assert len(rows) == 2
  assert np.isfinite(float(rows[-1]['eval/wikipedia/accuracy']))
  spec = saved_run.read_spec(str(tmp_path / 'out'))
  # The preset's small GRU and |B_c|; 2-way GT's paper learning rate.
  assert (spec.task_args['gru_units'], spec.task_args['central_batch_size'],
          spec.algorithm.client.learning_rate,
          spec.algorithm.federated_weight) == (32, 32, 1.0, 0.73)
