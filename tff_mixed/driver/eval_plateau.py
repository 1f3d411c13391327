"""K or the client learning rate decayed on an evaluation plateau."""

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import tensorflow as tf

from tff_mixed import keys
from tff_mixed import schedules
from tff_mixed.driver.errors import EvalPlateauError

NUM_LOCAL_STEPS = keys.NUM_LOCAL_STEPS
LEARNING_RATE = keys.LEARNING_RATE
PLATEAU_HPARAMS = (NUM_LOCAL_STEPS, LEARNING_RATE)


@dataclasses.dataclass(frozen=True)
class EvalPlateau:
  """Decays K or the client learning rate when an evaluation metric plateaus.

  Seed 001 §3.5 (last paragraph, and Table 3's K-step and lr-step rows):
  "once the validation error plateaus we decay either K or eta". A process
  sees only its clients' training loss, which is what
  `tff_mixed.schedules.on_plateau` watches inside it; this watches the
  driver's centralised evaluation instead. After each evaluation the driver
  advances `schedule` with the metric (negated for `mode='max'`) and, when
  the value changes, writes it into the process state with `set_hparams`:
  `client_work/num_local_steps` (as `num_steps(value)`) or
  `client_work/optimizer_hparams/learning_rate`. Patience and window
  therefore count evaluations (every `eval_every` rounds), not rounds.

  The process must hold that hyper-parameter constant, as builders do for
  a number (a hand-set constant stays; a schedule would overwrite it): the
  driver checks at each evaluation that the process still has the value it
  set. On resume the schedule is replayed over the evaluations in
  `metrics.csv`, so a resumed run decays exactly when an uninterrupted one
  does. Each row gets `eval_plateau/<hparam>`, the value the next round
  uses.

  Attributes:
    schedule: A `tff_mixed.schedules.on_plateau(...)`; its initial value
      must be the process's (K, or the client learning rate).
    hparam: `'num_local_steps'` or `'learning_rate'`.
    metric: A column of `metrics.csv` the evaluation writes, e.g.
      `'eval/loss'` (or `'eval/<name>/loss'` when the task evaluates a
      mapping of datasets).
    mode: `'min'` (a loss or an error) or `'max'` (an accuracy).
  """
  schedule: schedules.Schedule
  hparam: str = NUM_LOCAL_STEPS
  metric: str = keys.path(keys.EVAL, keys.LOSS)
  mode: str = 'min'

  def __post_init__(self):
    if not isinstance(self.schedule, schedules.OnPlateau):
      raise EvalPlateauError(
          'EvalPlateau needs a tff_mixed.schedules.on_plateau schedule, got '
          f'{type(self.schedule).__name__}.')
    if self.hparam not in PLATEAU_HPARAMS:
      raise EvalPlateauError(f'EvalPlateau hparam must be one of '
                             f'{PLATEAU_HPARAMS}, got {self.hparam!r}.')
    if self.mode not in ('min', 'max'):
      raise EvalPlateauError(
          f"EvalPlateau mode must be 'min' or 'max', got {self.mode!r}.")

  @property
  def column(self) -> str:
    """The `metrics.csv` column recording the value it sets."""
    return keys.path(keys.EVAL_PLATEAU, self.hparam)

  def as_hparam(self, value) -> float:
    """The schedule's value as the process holds it."""
    value = float(value)
    if self.hparam == NUM_LOCAL_STEPS:
      return int(schedules.num_steps(value))
    return float(np.float32(value))

  def observe(self, state: schedules.State, round_num: int,
              metrics: Mapping[str, float]) -> schedules.State:
    """The schedule's state after an evaluation with `metrics`."""
    value = metrics[self.metric]
    return self.schedule.next(
        state, tf.constant(round_num, tf.int32),
        tf.constant(-value if self.mode == 'max' else value, tf.float64))


def _client_hparam(hparams, name: str):
  """(container, key) of K or the client learning rate in `hparams`."""
  work = hparams.get(keys.CLIENT_WORK) if isinstance(hparams, Mapping) else None
  if not isinstance(work, Mapping):
    return None, None
  if name == LEARNING_RATE:
    work = work.get(keys.OPTIMIZER_HPARAMS)
    if not isinstance(work, Mapping):
      return None, None
  return (work, name) if name in work else (None, None)


class Plateaus:
  """The `EvalPlateau`s of a run with their schedules' states."""

  def __init__(self, plateaus: Sequence[EvalPlateau],
               history: Sequence[Mapping[str, float]] = ()):
    """Starts the schedules and replays the evaluations of `history` (a
    resumed run's rows), so decays land where they would have."""
    self._plateaus = tuple(plateaus)
    self._states = [p.schedule.initialize() for p in self._plateaus]
    for row in history:
      for i, plateau in enumerate(self._plateaus):
        if plateau.metric in row:
          self._states[i] = plateau.observe(self._states[i],
                                            int(row[keys.ROUND]), row)

  def __bool__(self) -> bool:
    return bool(self._plateaus)

  def check(self, process, state, metric_names) -> None:
    """Checks every `EvalPlateau` against the process and the evaluation."""
    seen = set()
    for plateau, plateau_state in zip(self._plateaus, self._states):
      if plateau.hparam in seen:
        raise EvalPlateauError(f'two EvalPlateaus set {plateau.hparam}.')
      seen.add(plateau.hparam)
      if metric_names is None:
        raise EvalPlateauError(
            f'EvalPlateau on {plateau.hparam} watches {plateau.metric}, but '
            'the task has no evaluation data.')
      if plateau.metric not in metric_names:
        raise EvalPlateauError(
            f'EvalPlateau on {plateau.hparam}: the evaluation does not report '
            f'{plateau.metric!r}; it reports '
            f'{", ".join(sorted(metric_names))}.')
      container, key = _client_hparam(process.get_hparams(state),
                                      plateau.hparam)
      if container is None:
        raise EvalPlateauError(
            f'EvalPlateau on {plateau.hparam}: this process has no '
            f'client_work {plateau.hparam} in its get_hparams.')
      held = plateau.as_hparam(container[key])
      expected = plateau.as_hparam(plateau.schedule.value(plateau_state))
      if held != expected:
        raise EvalPlateauError(
            f'EvalPlateau on {plateau.hparam} is at {expected}, but the '
            f'process is at {held}.')

  def apply(self, process, state, round_num: int, row: dict):
    """Advances each `EvalPlateau` with `row`'s evaluation; returns `state`
    with the values they give (and records them in `row`)."""
    hparams = process.get_hparams(state)
    changed = False
    for i, plateau in enumerate(self._plateaus):
      container, key = _client_hparam(hparams, plateau.hparam)
      current = plateau.as_hparam(plateau.schedule.value(self._states[i]))
      if plateau.as_hparam(container[key]) != current:
        raise EvalPlateauError(
            f'round {round_num}: the process has {plateau.hparam} = '
            f'{plateau.as_hparam(container[key])} where EvalPlateau set '
            f'{current}; its {plateau.hparam} follows a schedule of its own '
            '(build it with a constant).')
      self._states[i] = plateau.observe(self._states[i], round_num, row)
      value = plateau.as_hparam(plateau.schedule.value(self._states[i]))
      row[plateau.column] = value
      if value != current:
        container[key] = np.asarray(value, np.asarray(container[key]).dtype)
        changed = True
    return process.set_hparams(state, hparams) if changed else state
