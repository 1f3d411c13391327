"""Turning seed 004 §4.3's sampled G~^2 / B~^2 into advice on the mixing.

Parallel Training's convergence bound grows with the gradient dissimilarity
(G, B of seed 004 Definition 4.2) between the federated and central losses;
the Gradient Transfer bounds do not depend on it. Eq. 7 estimates G (taking
B = 1) and B (taking G = 0) at the round's model. Run a short probe with
`build_mixed_fl(..., gradient_dissimilarity=True)` and pass the
per-round values here.
"""

import dataclasses
from collections.abc import Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class MixingAdvice:
  mixing: str
  median_b_squared: float
  median_g_squared: float
  reason: str


def recommend_mixing(
    g_squared: Sequence[float],
    b_squared: Sequence[float],
    *,
    b_squared_threshold: float = 2.0,
) -> MixingAdvice:
  """Recommends a mixed FL algorithm from a probe run's G~^2 and B~^2.

  B~^2 = (||grad f_f||^2 / w_f + ||grad f_c||^2 / w_c) / ||grad f||^2 is 1 when
  the weighted federated and central gradients agree and grows as they
  diverge. With the median B~^2 above `b_squared_threshold` the problem is in
  the regime where Parallel Training is expected to converge slower (seed 004
  §4.2-4.3), so Gradient Transfer is advised (2-way; 1-way is the cheaper
  choice when one central batch per round gives a low-noise gradient). Below
  it, Parallel Training is advised: it sends nothing extra to clients.

  Raises:
    ValueError: For empty, mismatched or non-finite inputs.
  """
  g = np.asarray(g_squared, np.float64)
  b = np.asarray(b_squared, np.float64)
  if g.size == 0 or g.shape != b.shape:
    raise ValueError('g_squared and b_squared must be non-empty and of equal length.')
  if not (np.isfinite(g).all() and np.isfinite(b).all()):
    raise ValueError('g_squared and b_squared must be finite.')
  median_b, median_g = float(np.median(b)), float(np.median(g))
  if median_b > b_squared_threshold:
    return MixingAdvice(
        'two_way_gradient_transfer', median_b, median_g,
        f'median B~^2 = {median_b:.3g} > {b_squared_threshold:g}: federated '
        'and central gradients disagree; Gradient Transfer is insensitive to '
        'that, Parallel Training is not.')
  return MixingAdvice(
      'parallel_training', median_b, median_g,
      f'median B~^2 = {median_b:.3g} <= {b_squared_threshold:g}: gradients '
      'largely agree; Parallel Training needs no extra client download.')
