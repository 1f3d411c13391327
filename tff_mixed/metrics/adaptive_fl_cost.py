"""Per-client cost of a round of the adaptive-FL algorithms of seed 003.

Seed 003 (Mills et al., *Accelerating Federated Learning with a Global Biased
Optimiser*), Table 2 (what a client downloads and uploads) and App. B.6,
Eq. 22 (FLOPs of a client's local update):

  FedAvg, AdaptiveFedOpt  K (B fb + 2 |x|)
  FedGBO                  K (B fb + C_fixed |x|)
  Mimelite                K (B fb + C_fixed |x|) + n fb
  MFL                     K (B fb + C_moving |x|)

with fb the forward plus backward FLOPs of one example, |x| the number of
parameters, n the client's examples and C the operations per parameter of
an optimizer step (`tff_mixed.optimizers.AdaptiveOptimizer.ops_fixed` and
`ops_moving`: SGDm 5 / 5, RMSProp 5 / 8, Adam 8 / 11). These C are Table 9's
with its first two row labels swapped: so read, RMSProp's 5 and 8 match the
§B.6 text's own count, and every value matches counting the operations of
Table 1 one by one (the text's 4 for SGDm does not).
"""

import collections
from typing import Optional

from tff_mixed import optimizers

FEDAVG = 'fedavg'
ADAPTIVE_FED_OPT = 'adaptive_fed_opt'
FED_GBO = 'fed_gbo'
MIMELITE = 'mimelite'
MFL = 'mfl'
ALGORITHMS = (FEDAVG, ADAPTIVE_FED_OPT, FED_GBO, MIMELITE, MFL)
SGD_OPS_PER_PARAMETER = 2


def _check_algorithm(algorithm: str, optimizer) -> None:
  if algorithm not in ALGORITHMS:
    raise ValueError(f'algorithm must be one of {list(ALGORITHMS)}, got '
                     f'{algorithm!r}.')
  client_adaptive = algorithm in (FED_GBO, MIMELITE, MFL)
  if client_adaptive and not isinstance(optimizer, optimizers.AdaptiveOptimizer):
    raise ValueError(f'{algorithm} needs its AdaptiveOptimizer, got '
                     f'{optimizer!r}.')


def ops_per_parameter(algorithm: str,
                      optimizer: Optional[optimizers.AdaptiveOptimizer] = None
                      ) -> int:
  """C of Eq. 22: operations per parameter of one client step."""
  _check_algorithm(algorithm, optimizer)
  if algorithm in (FED_GBO, MIMELITE):
    return optimizer.ops_fixed
  if algorithm == MFL:
    return optimizer.ops_moving
  return SGD_OPS_PER_PARAMETER


def step_flops(batch_size, *, flops_per_example: float, num_parameters: int,
               ops: int):
  """B fb + C |x|: FLOPs of one client step (works on numbers and tensors)."""
  return batch_size * flops_per_example + ops * num_parameters


def round_flops(
    algorithm: str,
    *,
    num_local_steps: int,
    batch_size: float,
    flops_per_example: float,
    num_parameters: int,
    optimizer: Optional[optimizers.AdaptiveOptimizer] = None,
    num_examples: float = 0.0,
) -> float:
  """Eq. 22: a client's FLOPs in one round (`num_examples`: Mimelite's n)."""
  ops = ops_per_parameter(algorithm, optimizer)
  flops = num_local_steps * step_flops(
      batch_size, flops_per_example=flops_per_example,
      num_parameters=num_parameters, ops=ops)
  if algorithm == MIMELITE:
    flops += num_examples * flops_per_example
  return float(flops)


def communicated_elements(
    algorithm: str, num_parameters: int,
    optimizer: Optional[optimizers.AdaptiveOptimizer] = None,
) -> collections.OrderedDict:
  """Table 2: floats a client downloads and uploads per round.

  |s| = (number of statistics) x |x|: one for SGDm and RMSProp, two for Adam.
  """
  _check_algorithm(algorithm, optimizer)
  statistics = 0
  if algorithm in (FED_GBO, MIMELITE, MFL):
    statistics = len(optimizer.init([])) * num_parameters
  upload = {FEDAVG: num_parameters, ADAPTIVE_FED_OPT: num_parameters,
            FED_GBO: num_parameters, MIMELITE: 2 * num_parameters,
            MFL: num_parameters + statistics}[algorithm]
  return collections.OrderedDict(
      download=num_parameters + statistics, upload=upload)
