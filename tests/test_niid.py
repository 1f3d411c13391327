"""NIID measures of seed 002 §2.3 on hand-built clients."""

import time

import numpy as np
import pytest
import tensorflow as tf

from tff_mixed.metrics import niid


def test_feature_distance_by_hand():
  # Features (all but the last token): [0, 0] vs [1, 2].
  assert niid.feature_distance([[0, 0, 1]], [[1, 2, 2]], 3) == pytest.approx(2.0)
  # Same features [0, 1], different successors of 1.
  assert niid.feature_distance([[0, 1, 2]], [[0, 1, 1]], 3) == 0.0


def test_conditional_distance_by_hand():
  # P(.|0) = e1 on both; P(.|1) = e2 vs e1: Frobenius sqrt(2).
  assert niid.conditional_distance([[0, 1, 2]], [[0, 1, 1]], 3) == (
      pytest.approx(np.sqrt(2.0)))
  # Rows normalise by the count of x: 0 -> 1 twice and 0 -> 2 twice is
  # P(.|0) = (0, 1/2, 1/2), against 0 -> 1 once.
  assert niid.conditional_distance(
      [[0, 1], [0, 1], [0, 2], [0, 2]], [[0, 1]], 3) == pytest.approx(
          np.sqrt(0.25 + 0.25))


def test_federation_measure_by_hand():
  # P_A(X) = (1, 0, 0), P_B(X) = (0, .5, .5): both 1 from the mean.
  # P_A(Y|X): row 0 = (.5, .5, 0); P_B: rows 1, 2 = (0, 0, 1).
  # Each is sqrt(2 * .25^2 + 2 * .5^2) = sqrt(.625) from the mean.
  measure = niid.federation_measure([[[0, 0], [0, 1]], [[1, 2, 2]]], 3)
  assert measure.feature == pytest.approx(1.0)
  assert measure.conditional == pytest.approx(np.sqrt(0.625))
  same = niid.federation_measure([[[3, 1, 2]], [[3, 1, 2]], [[3, 1, 2]]], 4)
  assert same == (0.0, 0.0)


def _dense_measure(clients, vocab):
  """Eq. 2.10 by brute force, dense."""
  px, pyx = [], []
  for client in clients:
    counts, pairs = np.zeros(vocab), np.zeros((vocab, vocab))
    for seq in client:
      for a, b in zip(seq[:-1], seq[1:]):
        counts[a] += 1
        pairs[a, b] += 1
    px.append(counts / counts.sum())
    rows = pairs.sum(axis=1, keepdims=True)
    pyx.append(np.divide(pairs, rows, out=np.zeros_like(pairs),
                         where=rows > 0))
  mx, myx = np.mean(px, axis=0), np.mean(pyx, axis=0)
  return (np.mean([np.abs(p - mx).sum() for p in px]),
          np.mean([np.sqrt(((p - myx)**2).sum()) for p in pyx]))


def test_sparse_measure_equals_dense_brute_force():
  rng = np.random.default_rng(3)
  clients = [rng.integers(0, 7, size=(rng.integers(1, 5), rng.integers(2, 9)))
             for _ in range(6)]
  got = niid.federation_measure(clients, 7)
  want = _dense_measure(clients, 7)
  assert got.feature == pytest.approx(want[0], rel=1e-12)
  assert got.conditional == pytest.approx(want[1], rel=1e-12)


def test_client_formats_and_padding_agree():
  sequences = np.array([[4, 1, 2, 0, 0], [1, 1, 3, 2, 0]])
  unpadded = [[4, 1, 2], [1, 1, 3, 2]]
  other = [[2, 2, 2, 1]]
  want = niid.federation_measure([unpadded, other], 5)
  for client in (
      sequences,
      tf.data.Dataset.from_tensor_slices(sequences),
      tf.data.Dataset.from_tensor_slices(sequences).batch(2),
  ):
    assert niid.federation_measure([client, other], 5, pad_id=0) == want


@pytest.mark.parametrize('clients, vocab, message', [
    ([[[0, 5]]], 5, 'client 0: token id out of range [0, 5): got 5'),
    ([[[0, 1]], [[2]]], 5, 'client 1 has no pair of consecutive tokens'),
    ([], 5, 'clients is empty'),
    ([[[0, 1]]], 0, 'vocab_size must be an int >= 1'),
])
def test_errors_name_what_is_wrong(clients, vocab, message):
  with pytest.raises(ValueError) as info:
    niid.federation_measure(clients, vocab)
  assert message in str(info.value)


def test_ten_thousand_words_over_two_thousand_clients():
  """The |V|^2 = 1e8 transition space stays sparse."""
  rng = np.random.default_rng(0)
  clients = [rng.integers(0, 10_000, size=(40, 20)) for _ in range(2_000)]
  start = time.perf_counter()
  measure = niid.federation_measure(clients, 10_000)
  elapsed = time.perf_counter() - start
  # 760 features per client over 10,000 words: nearly disjoint supports.
  assert 1.8 < measure.feature < 2.0
  assert measure.conditional > 0
  print(f'Sigma(C) of 2,000 clients x 800 tokens, |V| = 10,000: '
        f'{elapsed:.1f}s')


def test_parameter_and_loss_divergence():
  a = [np.array([[1.0, 2.0]]), np.array([3.0])]
  b = [np.array([[1.0, 0.0]]), np.array([3.0])]
  assert niid.parameter_divergence(a, b) == pytest.approx(2.0)
  assert niid.parameter_divergence(a, a) == 0.0
  with pytest.raises(ValueError, match='different shapes'):
    niid.parameter_divergence(a, [np.zeros(3)])
  np.testing.assert_allclose(
      niid.loss_divergence([0.5, 0.4], [0.7, 0.4]), [0.2, 0.0])


def test_statistics_are_reusable():
  stats = niid.token_statistics([[[0, 1, 2]], [[0, 1, 1]]], 3)
  assert stats.num_clients == 2
  assert niid.federation_measure(stats) == niid.federation_measure(
      [[[0, 1, 2]], [[0, 1, 1]]], 3)
