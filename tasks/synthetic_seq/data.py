"""SyntheticSeq(K, epsilon), seed 002 §4.1 Algorithm 3.

Every client samples its sequences from a single-layer tanh RNN without
biases: with e = W_ei onehot(t), h <- tanh(W_hh h + W_he e), and the next
token drawn from softmax(W_oh h); h starts at 0 and every sequence of a
client starts at the client's start token.

Two readings (`reading=`):

* `algorithm_3` (default: Alg. 3 as printed). Each client draws its
  weights from N(0, epsilon) (epsilon a variance: §4.2 "the variance of
  these matrices") with no shared base (at epsilon = 0, Alg. 3's "non-zero
  deterministic values": N(0, 1) draws fixed by the seed, the same for every
  client) and samples its start token uniformly from [1..K], so clusters
  have random sizes and some may be empty.
* `shared_base` (ours, an option). Feature shift, K: clients fall into K
  clusters of equal size (client c in cluster c mod K), cluster k starting
  every sequence at token k + 1. Concept drift, epsilon: each client's
  weights are the shared base plus its own N(0, epsilon) perturbation, our
  reading of §4.4 (the variance of P(Y|X) grows with epsilon while its
  mean stays); equal clusters make K's effect exact. Under `algorithm_3`
  epsilon scales every client's weights (and so the sharpness of its
  next-token distribution) instead of spreading them around a common
  model.

Defaults are §4.2's: |V| = 100, E = 5, H = 20, 40 sequences of 20 tokens
(the start token included), 20 clients. Everything is a function of `seed`.
"""

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class SyntheticSeqConfig:
  """SyntheticSeq's sizes (§4.2 defaults)."""
  vocab_size: int = 100
  embedding_dim: int = 5
  hidden_dim: int = 20
  num_sequences: int = 40
  sequence_length: int = 20
  num_clients: int = 20

  def __post_init__(self):
    for field in dataclasses.fields(self):
      value = getattr(self, field.name)
      minimum = 2 if field.name == 'sequence_length' else 1
      if not isinstance(value, int) or value < minimum:
        raise ValueError(f'{field.name} must be an int >= {minimum}, got '
                         f'{value!r}.')


def _weights(rng, config, scale):
  c = config
  return dict(
      w_ei=rng.normal(0.0, scale, (c.embedding_dim, c.vocab_size)),
      w_hh=rng.normal(0.0, scale, (c.hidden_dim, c.hidden_dim)),
      w_he=rng.normal(0.0, scale, (c.hidden_dim, c.embedding_dim)),
      w_oh=rng.normal(0.0, scale, (c.vocab_size, c.hidden_dim)),
  )


SHARED_BASE, ALGORITHM_3 = 'shared_base', 'algorithm_3'
READINGS = (SHARED_BASE, ALGORITHM_3)


def start_token(client: int, num_clusters: int) -> int:
  """Cluster `client mod K` starts at token `cluster + 1` (`shared_base`)."""
  return client % num_clusters + 1


def client_parameters(client: int, num_clusters: int, epsilon: float, *,
                      config: SyntheticSeqConfig = SyntheticSeqConfig(),
                      seed: int = 0, reading: str = ALGORITHM_3):
  """(start token, generator weights, rng for the tokens) of one client.

  `algorithm_3` (Alg. 3 as printed, the default): weights = N(0, epsilon)
  draws with no shared base (at epsilon = 0, the "non-zero deterministic
  values" Alg. 3 asks for: the base), start token sampled uniformly from
  [1..K] per client. `shared_base` (ours): weights = base + N(0, epsilon)
  noise, start token `start_token(client, K)`.
  """
  if reading not in READINGS:
    raise ValueError(f'reading must be one of {READINGS}, got {reading!r}.')
  base = _weights(np.random.default_rng([seed, 0]), config, 1.0)
  rng = np.random.default_rng([seed, 1, client])
  noise = _weights(rng, config, np.sqrt(epsilon))
  if reading == SHARED_BASE:
    weights = {name: base[name] + noise[name] for name in base}
    return start_token(client, num_clusters), weights, rng
  start = int(np.random.default_rng([seed, 2, client]).integers(
      1, num_clusters + 1))
  return start, (base if epsilon == 0 else noise), rng


def synthetic_seq(num_clusters: int, epsilon: float, *,
                  config: SyntheticSeqConfig = SyntheticSeqConfig(),
                  seed: int = 0, reading: str = ALGORITHM_3
                  ) -> list[np.ndarray]:
  """SyntheticSeq(K, epsilon): one int32 array (sequences, length) a client.

  `reading` picks how clients' weights and start tokens are drawn
  (`client_parameters`); the sequences are then sampled from them alike.

  Raises:
    ValueError: For K outside [1, min(clients, |V| - 1)], epsilon < 0 or an
      unknown reading.
  """
  if isinstance(num_clusters, bool) or not isinstance(num_clusters, int) or (
      not 1 <= num_clusters <= min(config.num_clients, config.vocab_size - 1)):
    raise ValueError(
        f'num_clusters must be an int in [1, {min(config.num_clients, config.vocab_size - 1)}]'
        f' (clients and start tokens), got {num_clusters!r}.')
  if not epsilon >= 0:
    raise ValueError(f'epsilon must be >= 0, got {epsilon}.')
  clients = []
  for client in range(config.num_clients):
    start, w, rng = client_parameters(client, num_clusters, epsilon,
                                      config=config, seed=seed,
                                      reading=reading)
    tokens = np.empty((config.num_sequences, config.sequence_length), np.int32)
    tokens[:, 0] = start
    hidden = np.zeros((config.num_sequences, config.hidden_dim))
    for position in range(1, config.sequence_length):
      embedded = w['w_ei'][:, tokens[:, position - 1]].T
      hidden = np.tanh(hidden @ w['w_hh'].T + embedded @ w['w_he'].T)
      logits = hidden @ w['w_oh'].T
      probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
      probabilities /= probabilities.sum(axis=1, keepdims=True)
      cumulative = probabilities.cumsum(axis=1)
      draws = rng.random((config.num_sequences, 1))
      tokens[:, position] = np.minimum(
          (cumulative < draws).sum(axis=1), config.vocab_size - 1)
    clients.append(tokens)
  return clients
