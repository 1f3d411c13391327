"""Turning seed 004 §4.3's sampled G~^2 / B~^2 into advice on the mixing.

Parallel Training's convergence bound grows with the gradient dissimilarity
(G, B of seed 004 Definition 4.2) between the federated and central losses;
the Gradient Transfer bounds do not depend on it. Eq. 7 estimates G (taking
B = 1) and B (taking G = 0) at the round's model. Run App. C.1's probe
(`--mixing_probe=N` on a mixed FL training binary, which runs
`tasks.common.mixing_probe` instead of training, e.g. `python -m
tasks.digits.train --algorithm=parallel_training --client_labels=0,1,2,3,4
--mixing_probe=5 --rounds=100`: App. C.1's 5 simulations over the first 100
rounds, counted from round 10 as Table 2 does; or `build_mixed_fl(...,
gradient_dissimilarity=True)` yourself) and pass the per-round values here.
"""

import dataclasses
import numpy as np


@dataclasses.dataclass(frozen=True)
class MixingAdvice:
  """`recommend_mixing`'s advice.

  Attributes:
    mixing: The mixed FL algorithm advised (a `build_mixed_fl` mixing).
    max_g_squared, max_b_squared: The largest sampled G~^2 and B~^2 (seed
      004 Eq. 7) the advice read.
    reason: Why, in one sentence.
  """
  mixing: str
  max_g_squared: float
  max_b_squared: float
  reason: str


def recommend_mixing(
    g_squared,
    b_squared,
    *,
    g_squared_threshold: float = 1.0,
    b_squared_threshold: float = 2.0,
) -> MixingAdvice:
  """Recommends a mixed FL algorithm from probe runs' G~_t^2 and B~_t^2.

  Seed 004 Definition 4.2 bounds ||grad f_f||^2 / w_f + ||grad f_c||^2 / w_c
  by G^2 + B^2 ||grad f||^2; Parallel Training's convergence bound grows
  with G and B, the Gradient Transfer bounds do not (Table 1). Eq. 7 samples
  G~_t^2 (taking B = 1: the excess over ||grad f||^2, in squared-gradient
  units) and B~_t^2 (taking G = 0: the ratio, 1 when the weighted gradients
  agree). Like App. C.1 this takes the maximum over the rounds and
  simulations given, and follows §5's reading of Table 2:

  * G~^2 well above 0 (CelebA smiling: 49.04) -> Gradient Transfer; §5.1
    shows PT converging worse than 1-way and 2-way GT there.
  * G~^2 near 0 and B~^2 near 1 (Stack Overflow + Wikipedia: 0.03 / 1.34;
    MovieLens: 0.03 / 1.50) -> Parallel Training, which §5.2-5.3 find
    competitive and which sends clients nothing extra.

  The thresholds separating "well above 0" and "near 1" are ours (the paper
  gives none); the defaults, 1.0 and 2.0, put each Table 2 column on the
  side §5 reports. 2-way GT is advised over 1-way: it also moves the central
  model along the federated gradient; 1-way GT is the cheaper choice when
  one central batch per round gives a low-noise gradient.

  Args:
    g_squared, b_squared: G~_t^2 and B~_t^2, one value per round, or one row
      of rounds per simulation (App. C.1: 5 simulations at K = 1 over the
      first 100 rounds; Table 2 takes rounds 10 to 100); the same shape.
    g_squared_threshold: G~^2 above this means dissimilar gradients.
    b_squared_threshold: B~^2 above this means dissimilar gradients.

  Raises:
    ValueError: For empty, mismatched or non-finite inputs.
  """
  g = np.asarray(g_squared, np.float64)
  b = np.asarray(b_squared, np.float64)
  if g.size == 0 or g.shape != b.shape:
    raise ValueError('g_squared and b_squared must be non-empty and of equal '
                     f'shape, got {g.shape} and {b.shape}.')
  if not (np.isfinite(g).all() and np.isfinite(b).all()):
    raise ValueError('g_squared and b_squared must be finite.')
  max_g, max_b = float(g.max()), float(b.max())
  values = f'max G~^2 = {max_g:.3g}, max B~^2 = {max_b:.3g}'
  if max_g > g_squared_threshold or max_b > b_squared_threshold:
    return MixingAdvice(
        'two_way_gradient_transfer', max_g, max_b,
        f'{values} (thresholds {g_squared_threshold:g}, '
        f'{b_squared_threshold:g}): federated and central gradients disagree; '
        'the Gradient Transfer bounds do not depend on that, Parallel '
        "Training's does (seed 004 Table 1, §5.1).")
  return MixingAdvice(
      'parallel_training', max_g, max_b,
      f'{values} (thresholds {g_squared_threshold:g}, '
      f'{b_squared_threshold:g}): gradients largely agree; Parallel Training '
      'is competitive (seed 004 §5.2) and sends clients nothing extra.')
