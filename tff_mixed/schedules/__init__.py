"""Round schedules for the number of local steps K and the client learning rate.

Seed 000 (*Faster Federated Learning with Decaying Number of Local SGD Steps*)
decays K exponentially (§3) and as Theorem 2's K0 / (b + t); its journal
version (seed 001, §3.4-3.5) adds a round-based K-rounds schedule, a K-error
schedule driven by the training loss, and a K-step schedule that decays on a
plateau. The journal's extracted text lost its formulas; the forms below are
this project's reading of it:

  constant(v)                      v_t = v
  exponential_decay(v0, d)         v_t = v0 * d^t                 (000 §3)
  inverse_time_decay(v0, b, t0)    v_t = v0 / (b + t0 + t)        (000 Eq. 11)
  power_decay(v0, p)               v_t = v0 * (t + 1)^(-p)        (001 Eqs. 10
                                                                   and 12)
  loss_ratio(v0, e, window)        v_t = v0 * (F_t / F_0)^e       (001 Eqs. 13
                                                                   and 14)
  on_plateau(v0, factor, patience) v <- v * factor after `patience` rounds
                                   without improvement            (001 §3.5)

where F_t is the mean over the last `window` rounds of the training loss
clients report after their first local step (journal Eq. 15) and F_0 the first
such mean. What we assumed where the journal's formulas were lost:

* K-rounds and lr-rounds (Eqs. 10 and 12) follow from Theorem 2 (Eq. 9)
  and Corollary 2.1 (Eq. 11) with computation time negligible; the text
  keeps only that K* decreases "at least as fast as" a power of the round
  and scales with sqrt(F). With F falling as t^(-1/2) that is t^(-1/4):
  `power_decay`'s default exponent 1/4 is our reading, not a printed value.
* K-error and lr-error (Eqs. 13 and 14) substitute F_t for F_0 in Eq. 9 /
  Eq. 11 and divide; we read Eq. 9's K* as proportional to sqrt(F), so
  `loss_ratio`'s default exponent is 1/2 for K (and the same form for the
  learning rate). Until `window` losses have been seen the value stays v0,
  as the journal says.
* K-step is "decay when the validation error plateaus" (§3.5, last
  paragraph). Inside a process `on_plateau` watches the clients'
  training-loss estimate F_t, the only error the process sees; on the
  validation error it is `tff_mixed.driver.EvalPlateau` (flags:
  `--k_monitor=eval/loss`), which advances the same `on_plateau` with the
  driver's evaluation and sets K by `set_hparams`.

A schedule gives a real value v_t; used for K it becomes
`num_steps(v_t) = max(ceil(v_t), 1)`, used for a learning rate it is v_t.

A schedule is a small pure object, like an optax schedule but with state:
`initialize()` gives its state (NumPy values, so it can sit in a TFF server
state and be checkpointed), `value(state)` the value for the coming round and
`next(state, round_num, loss)` the state for round `round_num + 1` after
round `round_num` reported `loss` (NaN when no client reported one). `next`
uses TensorFlow ops only, so it runs eagerly and inside TFF computations.
"""

from typing import Union

import numpy as np

from tff_mixed import checks
from tff_mixed.schedules.base import BEST
from tff_mixed.schedules.base import LOSSES
from tff_mixed.schedules.base import MAX_STEPS
from tff_mixed.schedules.base import num_steps
from tff_mixed.schedules.base import OBSERVED
from tff_mixed.schedules.base import REFERENCE
from tff_mixed.schedules.base import Schedule
from tff_mixed.schedules.base import State
from tff_mixed.schedules.base import VALUE
from tff_mixed.schedules.base import WAIT
from tff_mixed.schedules.loss_based import LossRatio
from tff_mixed.schedules.loss_based import OnPlateau
from tff_mixed.schedules.round_based import Constant
from tff_mixed.schedules.round_based import ExponentialDecay
from tff_mixed.schedules.round_based import InverseTimeDecay
from tff_mixed.schedules.round_based import phi
from tff_mixed.schedules.round_based import PowerDecay
from tff_mixed.schedules.round_based import Theorem2LearningRate


def constant(value: float) -> Schedule:
  """v_t = value."""
  return Constant(value)


def exponential_decay(initial_value: float, decay_rate: float) -> Schedule:
  """v_t = initial_value * decay_rate^t (seed 000 §3); K_t = ceil(K0 d^t)."""
  return ExponentialDecay(initial_value, decay_rate)


def inverse_time_decay(initial_value: float, offset: float, *,
                       first_round: int = 0) -> Schedule:
  """v_t = initial_value / (offset + t), t = `first_round` in the first round
  (seed 000 Theorem 2's K_t = K_0 / (b + t)).

  t counts the process's rounds from 0 by default, so the first value is
  initial_value / offset, as every schedule here starts at t = 0. Seed 000's
  rounds start at t = 1 (Eq. 11): for its K_t give `first_round=1`, as
  `theorem2_learning_rate` expects by default (the same as offset + 1).
  """
  return InverseTimeDecay(initial_value, offset, first_round)


def power_decay(initial_value: float, exponent: float) -> Schedule:
  """v_t = initial_value * (t + 1)^-exponent (seed 001's K-rounds schedule).

  The journal's analysis gives K* proportional to sqrt(F(x_t)); with F
  falling as t^(-1/2), exponent = 1/4.
  """
  return PowerDecay(initial_value, exponent)


def loss_ratio(initial_value: float, exponent: float = 0.5,
               window: int = 10) -> Schedule:
  """v_t = initial_value * (F_t / F_0)^exponent (seed 001's K-error schedule).

  F_t is the mean of the last `window` reported losses (journal Eq. 15), F_0
  the first such mean. The value stays `initial_value` until `window` losses
  have been reported; a round with no loss (NaN) leaves the state unchanged.
  """
  return LossRatio(initial_value, exponent, window)


def on_plateau(initial_value: float, factor: float, patience: int, *,
               window: int = 1, min_value: float = 0.0) -> Schedule:
  """Multiplies the value by `factor` once the loss plateaus (seed 001's K-step).

  The monitored loss is the mean of the last `window` reported losses; when it
  has not fallen below its best for `patience` consecutive rounds, the value
  becomes `max(value * factor, min_value)` and the count restarts. Used for K
  the value is floored at 1 step by `num_steps`. Given to a builder it
  watches the clients' reported loss each round; given to
  `tff_mixed.driver.EvalPlateau` it watches an evaluation metric instead
  (seed 001's reading).
  """
  return OnPlateau(initial_value, factor, patience, window, min_value)


def theorem2_learning_rate(num_local_steps: Schedule, *,
                           client_learning_rate: float, mu: float,
                           offset: float, first_round: int = 1) -> Schedule:
  """Seed 000 Theorem 2's server rate (Eq. 11), coupled to K.

    eta_t = a_t / (b + t),  a_t = 3 / phi_mu(gamma, K_t),
    phi_mu(gamma, K) = (1 - (1 - gamma mu)^K) / gamma          (Eq. 6)

  for t = 1, 2, ... as in the seed (`first_round=0` counts from t = 0
  instead: with K_0 = 12 and b = 1.5 its first round takes K = 8 steps where
  the seed's takes 5), with b = `offset`
  (the theorem takes b = 3 kappa^2 and K_t = max(K_0 / (b + t), 1): pass
  `inverse_time_decay(K_0, b, first_round=1)` as K; an inverse-time K that
  starts at another t is refused),
  gamma the constant client learning rate (the theorem needs
  gamma <= ln(2) / (K_0 mu)) and mu the objective's strong convexity. K_t
  is the number of steps clients actually take, `num_steps(K schedule)`,
  where the theorem's K_t is real.

  Args:
    num_local_steps: K's schedule (a schedule of the round).
    client_learning_rate: gamma, > 0.
    mu: mu, > 0.
    offset: b, > 0.
    first_round: The t of the first round, an int >= 0 (the seed's 1).
  """
  return Theorem2LearningRate(num_local_steps, client_learning_rate, mu,
                              offset, first_round)


ScheduleOrValue = Union[Schedule, int, float]
# A step count (K): an int, or a schedule (its values become steps).
ScheduleOrSteps = Union[Schedule, int]


def as_schedule(value: ScheduleOrValue, name: str,
                *, integer: bool = False) -> Schedule:
  """`value` as a `Schedule` (a number becomes `constant`); checks its type.

  Args:
    value: A `Schedule` or a number.
    name: The argument's name, for errors.
    integer: Whether the schedule is for a step count: a plain number must
      then be an int >= 1, and a schedule must start at >= 1.
  """
  if isinstance(value, Schedule):
    first = float(value.initialize()[VALUE])
    if integer and first < 1:
      raise ValueError(f'{name} must start at >= 1 step, got {first}.')
    if integer and first > MAX_STEPS:
      raise ValueError(f'{name} must start at <= 2**30 steps, got {first}.')
    return value
  if isinstance(value, bool) or not isinstance(
      value, (int, float, np.integer, np.floating)):
    raise TypeError(
        f'{name} must be a number or a tff_mixed.schedules.Schedule, got '
        f'{type(value).__name__}.')
  if integer:
    if not isinstance(value, (int, np.integer)):
      raise TypeError(f'{name} must be an int or a schedule, got {value!r}.')
    checks.check_num_steps(value, name)
  checks.check_number(value, name)
  return constant(value)


_PARAMETERS = {
    'constant': (Constant, ()),
    'exponential': (ExponentialDecay, ('decay_rate',)),
    'inverse_time': (InverseTimeDecay, ('offset',)),
    'power': (PowerDecay, ('exponent',)),
    'loss_ratio': (LossRatio, ('exponent', 'window')),
    'on_plateau': (OnPlateau, ('factor', 'patience', 'window', 'min_value')),
}


def from_name(name: str, initial_value: float, **parameters) -> Schedule:
  """Builds a schedule by name (for binaries' flags).

  Keyword arguments a schedule does not take are ignored, and None means the
  schedule's own default, so one set of flags can serve every schedule.
  """
  if name not in _PARAMETERS:
    raise ValueError(
        f'unknown schedule {name!r}; expected one of {sorted(_PARAMETERS)}.')
  cls, names = _PARAMETERS[name]
  kwargs = {k: parameters[k] for k in names if parameters.get(k) is not None}
  return cls(initial_value, **kwargs)


NAMES = tuple(_PARAMETERS)


def parameter_names(name: str) -> tuple[str, ...]:
  """The keyword arguments `from_name(name, ...)` reads."""
  return _PARAMETERS[name][1]

__all__ = [
    'Schedule', 'constant', 'exponential_decay', 'inverse_time_decay',
    'power_decay', 'loss_ratio', 'on_plateau', 'theorem2_learning_rate',
    'phi', 'num_steps', 'as_schedule',
    'from_name', 'NAMES',
]
