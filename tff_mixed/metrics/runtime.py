"""Simulated wall-clock time of federated rounds (seed 001 §3.2, Eq. 3-5).

A client's round takes its download time, K minibatch computations and its
upload time:

  T_i = M_down / B_down + K_i * c_i + M_up / B_up        (Eq. 3)

and a synchronous round lasts as long as its slowest client (Eq. 4). With
every client alike (Eq. 5) a run of rounds t = 1..T takes

  sum_t  M_down / B_down + K_t * c + M_up / B_up.

M (megabits) comes from the process's types, i.e. what it really moves. The
journal's §4.2 bandwidths (4G LTE in the UK) were lost from the text this
project has, so the bandwidth defaults here are this project's assumption of
typical 4G figures, not the paper's. Of its Table 2 (Raspberry Pi 3B+
minibatch times) the means for FEMNIST (0.017), CIFAR-100 (0.31) and
Shakespeare (1.5) survived, read as seconds (the unit was lost); Sent140's
mean and every standard deviation were lost. `minibatch_seconds` defaults to
FEMNIST's. Set all three for your setting.
"""

import dataclasses
from collections.abc import Mapping

import numpy as np

from tff_mixed import keys

BITS_PER_MEGABIT = 1e6

# Measurement keys the driver reads from a round's flattened metrics.
NUM_LOCAL_STEPS_KEY = keys.ROUND_NUM_LOCAL_STEPS
BYTES_DOWN_KEY = keys.ROUND_BYTES_DOWNLOADED
BYTES_UP_KEY = keys.ROUND_BYTES_UPLOADED


@dataclasses.dataclass(frozen=True)
class RuntimeModel:
  """Seed 001's runtime model of a FedAvg round.

  Attributes:
    download_mbps: Client download bandwidth B_down (megabits per second).
    upload_mbps: Client upload bandwidth B_up (megabits per second).
    minibatch_seconds: Time of one minibatch step on a client, c.
  """
  download_mbps: float = 20.0
  upload_mbps: float = 5.0
  minibatch_seconds: float = 0.017

  def __post_init__(self):
    for name in ('download_mbps', 'upload_mbps', 'minibatch_seconds'):
      value = getattr(self, name)
      positive = name != 'minibatch_seconds'
      if (isinstance(value, bool)
          or not isinstance(value, (int, float, np.integer, np.floating))
          or not np.isfinite(value) or value < 0 or (positive and value == 0)):
        bound = '> 0' if positive else '>= 0'
        raise ValueError(f'{name} must be a finite number {bound}, got {value!r}.')

  def client_seconds(self, bytes_down, bytes_up, num_steps,
                     minibatch_seconds=None) -> np.ndarray:
    """Eq. 3 for each client (arguments broadcast against each other)."""
    c = self.minibatch_seconds if minibatch_seconds is None else minibatch_seconds
    down = np.asarray(bytes_down, np.float64) * 8 / BITS_PER_MEGABIT
    up = np.asarray(bytes_up, np.float64) * 8 / BITS_PER_MEGABIT
    return (down / self.download_mbps
            + np.asarray(num_steps, np.float64) * np.asarray(c, np.float64)
            + up / self.upload_mbps)

  def round_seconds(self, bytes_down, bytes_up, num_steps,
                    minibatch_seconds=None) -> float:
    """Eq. 4: the slowest client's time (per-client arrays allowed)."""
    return float(np.max(self.client_seconds(
        bytes_down, bytes_up, num_steps, minibatch_seconds)))

  def round_seconds_from_metrics(self, metrics: Mapping[str, float]) -> float:
    """Eq. 5's round time from a round's flattened metrics (every client
    alike, taking the round's K steps), or NaN if the metrics lack the keys.
    """
    if not all(k in metrics for k in (
        NUM_LOCAL_STEPS_KEY, BYTES_DOWN_KEY, BYTES_UP_KEY)):
      return float('nan')
    return self.round_seconds(metrics[BYTES_DOWN_KEY], metrics[BYTES_UP_KEY],
                              metrics[NUM_LOCAL_STEPS_KEY])
