"""How non-IID a federation of token sequences is, and how far FedAvg drifts.

Seed 002 (Dalal, *Exploring the Effect of Non-Identically Distributed Data on
FL for Next-Word Prediction*), §2.3 and §4.2. A client holds token sequences;
with the one-previous-word view a sequence p_0 .. p_{n-1} gives features
X = p_0 .. p_{n-2} and labels Y = p_1 .. p_{n-1}.

* `feature_distance` (Eq. 2.7-2.8): ||P_i(X) - P_j(X)||_1 between the token
  frequency vectors (feature shift).
* `conditional_distance` (Eq. 2.9): ||P_i(Y|X) - P_j(Y|X)||_F between the
  |V| x |V| transition matrices, row x holding the frequencies of the tokens
  that follow x normalised by how often x occurs (concept drift).
* `federation_measure` (Eq. 2.10): Sigma(C) = (sigma_X, sigma_Y|X), each the
  mean over clients of the client's distance to the mean distribution.
* `parameter_divergence` (Eq. 2.19) and `loss_divergence` (Eq. 4.1).

Frequencies are normalised (P(X) sums to 1), which the thesis leaves open;
a token x a client never has as a feature gives an all-zero row of its
P(Y|X). Everything is computed on sparse counts (scipy.sparse): the cost is
linear in the number of tokens, so 10,000-word vocabularies over thousands
of clients are practical (a |V|^2 transition matrix is never dense).
"""

import collections
from collections.abc import Iterable, Sequence
from typing import Any, Optional, Union

import numpy as np
from scipy import sparse
import tensorflow as tf

Client = Union[tf.data.Dataset, np.ndarray, Sequence[Sequence[int]]]


def _sequences(client: Client) -> Iterable[np.ndarray]:
  """Yields 1-D int arrays: the client's sequences.

  A client is a `tf.data.Dataset` of sequences or of batches of them, a 2-D
  array (one sequence per row) or a sequence of 1-D sequences.
  """
  if isinstance(client, tf.data.Dataset):
    items = client.as_numpy_iterator()
  else:
    items = [client] if isinstance(client, np.ndarray) else client
  for item in items:
    array = np.asarray(item)
    if array.ndim == 1 and array.dtype != object:
      yield array
    elif array.ndim == 2:
      yield from array
    else:
      for row in item:
        yield np.asarray(row)


def _client_pairs(client: Client, vocab_size: int,
                  pad_id: Optional[int]) -> tuple[np.ndarray, np.ndarray]:
  """(features, labels): every consecutive pair of non-pad tokens."""
  features, labels = [], []
  for sequence in _sequences(client):
    sequence = np.asarray(sequence, np.int64).reshape(-1)
    if pad_id is not None:
      sequence = sequence[sequence != pad_id]
    if sequence.size and (sequence.min() < 0 or sequence.max() >= vocab_size):
      raise ValueError(
          f'token id out of range [0, {vocab_size}): got '
          f'{sequence.min() if sequence.min() < 0 else sequence.max()}; '
          'check vocab_size or pad_id.')
    features.append(sequence[:-1])
    labels.append(sequence[1:])
  if not features:
    return np.zeros(0, np.int64), np.zeros(0, np.int64)
  return np.concatenate(features), np.concatenate(labels)


class TokenStatistics(collections.namedtuple(
    'TokenStatistics', ['feature_frequencies', 'conditional_frequencies'])):
  """Per-client distributions as sparse rows (one row per client).

  Attributes:
    feature_frequencies: `csr_matrix` (clients, |V|): P_c(X).
    conditional_frequencies: `csr_matrix` (clients, |V|^2): P_c(Y|X), entry
      x |V| + y.
  """

  @property
  def num_clients(self) -> int:
    return self.feature_frequencies.shape[0]


def token_statistics(clients: Sequence[Client], vocab_size: int, *,
                     pad_id: Optional[int] = None) -> TokenStatistics:
  """Counts every client's features and transitions once (sparse).

  Args:
    clients: Each a `tf.data.Dataset` of token sequences (or of batches of
      them), a 2-D array, or a sequence of 1-D sequences of token ids.
    vocab_size: |V|; ids must lie in [0, |V|).
    pad_id: Optional id to drop before pairing (padding).

  Raises:
    ValueError: For no clients, a bad `vocab_size`, a client without any
      pair of tokens, or an id out of range (naming the client).
  """
  if isinstance(vocab_size, bool) or not isinstance(
      vocab_size, (int, np.integer)) or vocab_size < 1:
    raise ValueError(f'vocab_size must be an int >= 1, got {vocab_size!r}.')
  if len(clients) == 0:  # pylint: disable=g-explicit-length-test
    raise ValueError('clients is empty.')
  rows, feature_cols, pair_cols = [], [], []
  for index, client in enumerate(clients):
    try:
      features, labels = _client_pairs(client, vocab_size, pad_id)
    except ValueError as e:
      raise ValueError(f'client {index}: {e}') from e
    if not features.size:
      raise ValueError(f'client {index} has no pair of consecutive tokens.')
    rows.append(np.full(features.size, index, np.int64))
    feature_cols.append(features)
    pair_cols.append(features * vocab_size + labels)
  rows = np.concatenate(rows)
  num_clients = len(clients)
  ones = np.ones(rows.size)
  feature_counts = sparse.csr_matrix(
      (ones, (rows, np.concatenate(feature_cols))),
      shape=(num_clients, vocab_size))
  pair_counts = sparse.csr_matrix(
      (ones, (rows, np.concatenate(pair_cols))),
      shape=(num_clients, vocab_size * vocab_size))
  pair_counts.sum_duplicates()
  feature_counts.sum_duplicates()
  totals = np.asarray(feature_counts.sum(axis=1)).reshape(-1)
  feature_frequencies = sparse.diags(1.0 / totals) @ feature_counts
  # Normalise each transition count by its client's count of x.
  pair_counts = pair_counts.tocoo()
  x = pair_counts.col // vocab_size
  denominators = np.asarray(
      feature_counts[pair_counts.row, x]).reshape(-1)
  conditional = sparse.csr_matrix(
      (pair_counts.data / denominators, (pair_counts.row, pair_counts.col)),
      shape=pair_counts.shape)
  return TokenStatistics(sparse.csr_matrix(feature_frequencies), conditional)


def feature_distance(client_a: Client, client_b: Client, vocab_size: int, *,
                     pad_id: Optional[int] = None) -> float:
  """Eq. 2.7-2.8: ||P_a(X) - P_b(X)||_1, in [0, 2]."""
  stats = token_statistics([client_a, client_b], vocab_size, pad_id=pad_id)
  diff = stats.feature_frequencies[0] - stats.feature_frequencies[1]
  return float(abs(diff).sum())


def conditional_distance(client_a: Client, client_b: Client, vocab_size: int,
                         *, pad_id: Optional[int] = None) -> float:
  """Eq. 2.9: ||P_a(Y|X) - P_b(Y|X)||_F."""
  stats = token_statistics([client_a, client_b], vocab_size, pad_id=pad_id)
  diff = stats.conditional_frequencies[0] - stats.conditional_frequencies[1]
  return float(np.sqrt(diff.multiply(diff).sum()))


def _sparse_mean(matrix: sparse.csr_matrix) -> sparse.csr_matrix:
  """The mean row, kept sparse (a dense |V|^2 row would not fit)."""
  num_rows = matrix.shape[0]
  return sparse.csr_matrix(np.full((1, num_rows), 1.0 / num_rows)) @ matrix


def _l1_to_mean(matrix: sparse.csr_matrix) -> np.ndarray:
  mean = _sparse_mean(matrix).toarray().reshape(-1)
  # |p - m| summed: over the row's non-zeros |p - m|, elsewhere m.
  dense_part = np.full(matrix.shape[0], mean.sum())
  coo = matrix.tocoo()
  correction = np.abs(coo.data - mean[coo.col]) - mean[coo.col]
  return dense_part + np.bincount(coo.row, correction,
                                  minlength=matrix.shape[0])


def _frobenius_to_mean(matrix: sparse.csr_matrix) -> np.ndarray:
  mean = _sparse_mean(matrix)
  squared = (np.asarray(matrix.multiply(matrix).sum(axis=1)).reshape(-1)
             - 2.0 * np.asarray((matrix @ mean.T).todense()).reshape(-1)
             + mean.multiply(mean).sum())
  return np.sqrt(np.maximum(squared, 0.0))


class FederationMeasure(collections.namedtuple(
    'FederationMeasure', ['feature', 'conditional'])):
  """Sigma(C) of Eq. 2.10: (sigma_{P(X),C}, sigma_{P(Y|X),C})."""


def federation_measure(
    clients: Union[Sequence[Client], TokenStatistics],
    vocab_size: Optional[int] = None, *, pad_id: Optional[int] = None,
) -> FederationMeasure:
  """Eq. 2.10: the mean over clients of each client's distance to the mean.

  sigma_X = mean_c ||P_c(X) - mean_c' P_c'(X)||_1 and
  sigma_Y|X = mean_c ||P_c(Y|X) - mean_c' P_c'(Y|X)||_F (unweighted means,
  as the thesis, which assumes equal amounts of data). Both are 0 for
  identically distributed clients.

  Args:
    clients: As in `token_statistics`, or its result.
    vocab_size: |V| (not needed with `TokenStatistics`).
    pad_id: Optional padding id to drop.
  """
  if isinstance(clients, TokenStatistics):
    stats = clients
  else:
    if vocab_size is None:
      raise ValueError('vocab_size is required with raw clients.')
    stats = token_statistics(clients, vocab_size, pad_id=pad_id)
  return FederationMeasure(
      float(_l1_to_mean(stats.feature_frequencies).mean()),
      float(_frobenius_to_mean(stats.conditional_frequencies).mean()))


def parameter_divergence(weights_a: Any, weights_b: Any) -> float:
  """Eq. 2.19: the L2 norm of the difference of two weight structures
  (e.g. FedAvg's and the centralised model's), over all their tensors."""
  flat_a = [np.asarray(t, np.float64).reshape(-1)
            for t in tf.nest.flatten(weights_a)]
  flat_b = [np.asarray(t, np.float64).reshape(-1)
            for t in tf.nest.flatten(weights_b)]
  if [a.size for a in flat_a] != [b.size for b in flat_b]:
    raise ValueError('weights_a and weights_b have different shapes.')
  return float(np.sqrt(sum(np.sum((a - b)**2) for a, b in zip(flat_a, flat_b))))


def loss_divergence(centralized_loss, fed_avg_loss):
  """Eq. 4.1: how much worse FedAvg's loss is than centralised training's.

  The thesis writes Omega = L_centralized - L_FedAvg with L the objective of
  its Ch. 3, the *negative* mean loss; in losses that is
  fed_avg_loss - centralized_loss (> 0 when FedAvg is behind). Both losses
  are on the same data (the union of the clients' training data in §4.2).
  Works elementwise on arrays.
  """
  return np.asarray(fed_avg_loss, np.float64) - np.asarray(
      centralized_loss, np.float64)
