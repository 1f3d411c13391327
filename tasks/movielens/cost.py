"""Per-client computation and communication of the movie-recommendation task.

Seed 004 App. C.3 analyses a dual encoder whose N x d embedding table (shared
by the context and label towers) dominates the model. The spreadout
regulariser over the whole table either runs on every client at every local
step (the baseline, which also moves the whole table both ways) or once on
the server (mixed FL: a client moves only the rows of the n movies in its
round's data, and Gradient Transfer also sends those rows of the central
gradient). `table5` gives the paper's Table 5 forms; `client_flops` the
per-client computation its §C.3 derivation counts.

Counts are in elements (multiply by 4 for float32 bytes) and FLOPs; the
paper's KB are KiB (2 N d x 4 bytes = 494 KiB at N = 3,952, d = 16).
"""

import collections
import dataclasses

BASELINE = 'baseline'
PARALLEL_TRAINING = 'parallel_training'
ONE_WAY_GRADIENT_TRANSFER = 'one_way_gradient_transfer'
TWO_WAY_GRADIENT_TRANSFER = 'two_way_gradient_transfer'
SETTINGS = (BASELINE, PARALLEL_TRAINING, ONE_WAY_GRADIENT_TRANSFER,
            TWO_WAY_GRADIENT_TRANSFER)
BYTES_PER_FLOAT = 4


@dataclasses.dataclass(frozen=True)
class Cost:
  """Regulariser computation (FLOPs) and communication (elements) per client."""

  regularizer_flops: float
  communicated_elements: float

  @property
  def communicated_kib(self) -> float:
    return self.communicated_elements * BYTES_PER_FLOAT / 1024


def _check(**values):
  for name, value in values.items():
    if name == 'n' and value < 0:
      raise ValueError(f'n must be >= 0, got {value}.')
    if name != 'n' and value < 1:
      raise ValueError(f'{name} must be >= 1, got {value}.')


def table5(num_movies: int, dim: int, n: float, num_local_steps: int
           ) -> 'collections.OrderedDict[str, Cost]':
  """Seed 004 Table 5 for each setting.

  Args:
    num_movies: N, rows of the embedding table.
    dim: d, the embedding width.
    n: Mean number of distinct movies in a client's round data (< |B_i| K).
    num_local_steps: K.

  Returns:
    setting -> Cost. The baseline computes the regulariser K N^2 d / 2 per
    client per round and moves 2 N d; mixed FL computes it N^2 d / 2 per
    round on the server (the paper lists it in the same row) and moves 2 n d
    (PT: rows down, row updates up) or 3 n d (GT: plus the rows of the
    central gradient).
  """
  _check(num_movies=num_movies, dim=dim, n=n, num_local_steps=num_local_steps)
  once = num_movies ** 2 * dim / 2
  return collections.OrderedDict([
      (BASELINE, Cost(num_local_steps * once, 2 * num_movies * dim)),
      (PARALLEL_TRAINING, Cost(once, 2 * n * dim)),
      (ONE_WAY_GRADIENT_TRANSFER, Cost(once, 3 * n * dim)),
      (TWO_WAY_GRADIENT_TRANSFER, Cost(once, 3 * n * dim)),
  ])


def client_step_flops(batch_size: int, dim: int, num_movies: int = 0) -> float:
  """FLOPs of one client step as counted in App. C.3.

  Forward B d + B d^2 + B^2 d (bag of words, context layer, similarities),
  hinge B, backward 2 B d^2 + 2 B^2 d plus hinge B. With `num_movies` = N
  (the baseline) the spreadout adds 0.5 N^2 d forward and N d backward.
  """
  _check(batch_size=batch_size, dim=dim)
  return step_flops(batch_size, dim, num_movies)


def step_flops(batch_size, dim: int, num_movies: int = 0):
  """`client_step_flops` without argument checks: plain arithmetic, so
  `batch_size` may be a tensor (a process's per-client measurement)."""
  b, d, big_n = batch_size, dim, num_movies
  model = b * d + 3 * b * d ** 2 + 3 * b ** 2 * d + 2 * b
  return model + 0.5 * big_n ** 2 * d + big_n * d


def client_saving(batch_size: int, dim: int, num_movies: int) -> float:
  """Fraction of a client step's FLOPs saved by moving the spreadout to the
  server (App. C.3; 99.98% for the paper's MovieLens setting)."""
  return 1.0 - (client_step_flops(batch_size, dim)
                / client_step_flops(batch_size, dim, num_movies))
