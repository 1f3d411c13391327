"""The FedAvg workload that `bench/peers.py` runs in every implementation.

NumPy only, so both the project venv (TFF) and `.venv-peers` (FedJAX, pfl)
import it and see bit-identical data and initial weights.

Model: dense MLP 64 -> 128 ReLU -> 10 logits, softmax cross-entropy averaged
over the batch. Weights are `[k1, b1, k2, b2]` with Keras' kernel layout
`[in, out]` (Haiku's too; PyTorch's `nn.Linear.weight` is the transpose).

Clients: client `c` has `EXAMPLES_PER_CLIENT` = 40 examples drawn from
`np.random.default_rng(DATA_SEED + c)`: x ~ N(0, 1) float32 of dim 64, labels
uniform in 0..9 (int32). Batches of 8 in the stored order (no shuffling), so
one pass is K = 5 SGD steps (client lr 0.1). The server averages the client
updates weighted by examples (all equal) and applies them with SGD lr 1.0.

Cohorts: round r of a run with S clients per round trains clients
`r * S, ..., r * S + S - 1` (every client once per run).
"""

import numpy as np

INPUT_DIM = 64
HIDDEN = 128
NUM_CLASSES = 10
EXAMPLES_PER_CLIENT = 40
BATCH_SIZE = 8
LOCAL_STEPS = EXAMPLES_PER_CLIENT // BATCH_SIZE  # K = 5: one pass, in order.
CLIENT_LR = 0.1
SERVER_LR = 1.0
DATA_SEED = 1_000
INIT_SEED = 0


def initial_weights(seed: int = INIT_SEED) -> list:
  """`[k1, b1, k2, b2]`, float32: Glorot-uniform kernels, zero biases."""
  rng = np.random.default_rng(seed)

  def glorot(fan_in, fan_out):
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32)

  return [
      glorot(INPUT_DIM, HIDDEN), np.zeros(HIDDEN, np.float32),
      glorot(HIDDEN, NUM_CLASSES), np.zeros(NUM_CLASSES, np.float32),
  ]


def client_data(client_id: int):
  """`(x, y)` of one client: float32 `[40, 64]` and int32 `[40]`."""
  rng = np.random.default_rng(DATA_SEED + client_id)
  x = rng.standard_normal((EXAMPLES_PER_CLIENT, INPUT_DIM)).astype(np.float32)
  y = rng.integers(0, NUM_CLASSES, EXAMPLES_PER_CLIENT).astype(np.int32)
  return x, y


def cohort(round_num: int, clients_per_round: int) -> list:
  """Client ids of round `round_num` (0-based)."""
  start = round_num * clients_per_round
  return list(range(start, start + clients_per_round))


def reference_round(weights, client_ids) -> list:
  """One FedAvg round of this workload in plain float64 NumPy (a checker)."""
  weights = [w.astype(np.float64) for w in weights]
  total = [np.zeros_like(w) for w in weights]
  for c in client_ids:
    x, y = client_data(c)
    k1, b1, k2, b2 = [w.copy() for w in weights]
    for s in range(LOCAL_STEPS):
      xb = x[s * BATCH_SIZE:(s + 1) * BATCH_SIZE].astype(np.float64)
      yb = y[s * BATCH_SIZE:(s + 1) * BATCH_SIZE]
      h_pre = xb @ k1 + b1
      h = np.maximum(h_pre, 0.0)
      logits = h @ k2 + b2
      p = np.exp(logits - logits.max(axis=1, keepdims=True))
      p /= p.sum(axis=1, keepdims=True)
      p[np.arange(len(yb)), yb] -= 1.0
      d_logits = p / len(yb)
      d_h = (d_logits @ k2.T) * (h_pre > 0)
      grads = [xb.T @ d_h, d_h.sum(0), h.T @ d_logits, d_logits.sum(0)]
      k1, b1, k2, b2 = [w - CLIENT_LR * g
                        for w, g in zip((k1, b1, k2, b2), grads)]
    for t, w0, w in zip(total, weights, (k1, b1, k2, b2)):
      t += w0 - w  # Equal example counts: the weighted mean is the mean.
  return [w - SERVER_LR * t / len(client_ids)
          for w, t in zip(weights, total)]
