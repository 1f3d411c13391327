"""The schedules as pure objects: closed forms, state, errors."""

import math

import numpy as np
import pytest
import tensorflow as tf

from tff_mixed import schedules

ALL = [
    schedules.constant(3),
    schedules.exponential_decay(10, 0.9),
    schedules.inverse_time_decay(12, 2.0),
    schedules.power_decay(16, 0.25),
    schedules.loss_ratio(10, 0.5, window=3),
    schedules.on_plateau(8, 0.5, patience=2),
]
LOSSES = [4.0, 3.0, 2.0, 2.5, float('nan'), 2.0, 1.0, 1.0, 1.0, 1.0]


@pytest.mark.parametrize('schedule', ALL, ids=lambda s: type(s).__name__)
def test_contract_graph_equals_eager_and_state_is_numpy(schedule):
  state = schedule.initialize()
  for value in state.values():
    assert isinstance(value, (np.ndarray, np.generic))

  @tf.function
  def step(state, t, loss):
    return schedule.next(state, t, loss)

  eager = schedule.values(len(LOSSES), LOSSES)
  graph = []
  for t, loss in enumerate(LOSSES):
    graph.append(float(schedule.value(state)))
    state = step(state, tf.constant(t), tf.constant(loss, tf.float64))
  np.testing.assert_array_equal(eager, graph)
  assert eager[0] == pytest.approx(
      schedule.initial_value / getattr(schedule, 'offset', 1.0))


def test_round_schedules_match_their_closed_forms():
  t = np.arange(50)
  np.testing.assert_allclose(
      schedules.exponential_decay(10, 0.9).values(50), 10 * 0.9**t)
  np.testing.assert_allclose(
      schedules.inverse_time_decay(12, 2.0).values(50), 12 / (2.0 + t))
  np.testing.assert_allclose(
      schedules.power_decay(16, 0.25).values(50), 16 * (t + 1.0)**-0.25)
  np.testing.assert_array_equal(schedules.constant(3).values(5), [3.0] * 5)


def test_theorem2_counts_rounds_from_t_1_as_seed_000_eq_11():
  """Seed 000 Eq. 11 with K_0 = 12, b = 1.5, gamma = 0.05, mu = 1: the first
  round is t = 1, K_1 = ceil(12 / 2.5) = 5 and
  eta_1 = 3 / (2.5 phi(5)), phi(5) = (1 - 0.95^5) / 0.05 = 4.52438125."""
  k = schedules.inverse_time_decay(12, 1.5, first_round=1)
  eta = schedules.theorem2_learning_rate(k, client_learning_rate=0.05, mu=1.0,
                                         offset=1.5)
  assert [int(schedules.num_steps(v)) for v in k.values(3)] == [5, 4, 3]
  phi = lambda steps: (1 - 0.95**steps) / 0.05
  np.testing.assert_allclose(
      eta.values(3), [3 / (2.5 * 4.52438125), 3 / (3.5 * phi(4)),
                      3 / (4.5 * phi(3))], rtol=1e-12)
  # From t = 0 (first_round=0 on both) the first round takes 12 / 1.5 = 8.
  k0 = schedules.inverse_time_decay(12, 1.5)
  eta0 = schedules.theorem2_learning_rate(k0, client_learning_rate=0.05,
                                          mu=1.0, offset=1.5, first_round=0)
  assert int(schedules.num_steps(k0.values(1)[0])) == 8
  np.testing.assert_allclose(eta0.values(1), [3 / (1.5 * phi(8))], rtol=1e-12)
  with pytest.raises(ValueError, match="K's inverse_time schedule starts at "
                     't = 0; Eq. 11 counts both from the same round'):
    schedules.theorem2_learning_rate(k0, client_learning_rate=0.05, mu=1.0,
                                     offset=1.5)


def test_num_steps_is_ceil_with_floor_one():
  got = [int(schedules.num_steps(v)) for v in (0.01, 1.0, 1.2, 9.99, 10.0)]
  assert got == [1, 1, 2, 10, 10]
  # Rounding error in float maths does not add a step.
  assert int(schedules.num_steps(10 * 0.1 * 10)) == 10
  assert int(schedules.num_steps(np.nextafter(10.0, 11.0))) == 10


def test_seed_000_exponential_k_saves_84_percent_of_steps():
  """K_t = ceil(10 * 0.995^t) over 3000 rounds vs constant K = 10 (seed 000 §3)."""
  values = schedules.exponential_decay(10, 0.995).values(3000)
  steps = sum(int(schedules.num_steps(v)) for v in values)
  expected = sum(math.ceil(10 * 0.995**t - 1e-9) for t in range(3000))
  assert steps == expected
  assert 1 - steps / 30000 == pytest.approx(0.847, abs=0.001)


def test_loss_ratio_waits_a_window_then_follows_the_rolling_mean():
  schedule = schedules.loss_ratio(10, exponent=0.5, window=2)
  got = schedule.values(6, [4.0, 4.0, 1.0, float('nan'), 1.0, 1.0])
  # Rounds 0-1 fill the window (F_0 = 4); a NaN round changes nothing.
  expected = [10, 10, 10, 10 * math.sqrt(2.5 / 4), 10 * math.sqrt(2.5 / 4),
              10 * math.sqrt(1 / 4)]
  np.testing.assert_allclose(got, expected)


def test_on_plateau_decays_after_patience_rounds_without_improvement():
  schedule = schedules.on_plateau(8, 0.5, patience=2)
  got = schedule.values(9, [3, 2, 2, 2, 2, 2, 1, 1, 1])
  np.testing.assert_array_equal(got, [8, 8, 8, 8, 4, 4, 2, 2, 2])


def test_on_plateau_respects_min_value_and_window():
  schedule = schedules.on_plateau(1.0, 0.1, patience=1, window=2, min_value=0.05)
  got = schedule.values(5, [1, 1, 1, 1, 1])
  # Window full after round 1 (best = 1); no improvement from round 2 on.
  np.testing.assert_allclose(got, [1, 1, 1, 0.1, 0.05])


def test_values_needs_losses_for_loss_schedules():
  with pytest.raises(ValueError, match='needs losses'):
    schedules.loss_ratio(10).values(3)


@pytest.mark.parametrize('build, match', [
    (lambda: schedules.exponential_decay(10, 1.5), 'decay_rate'),
    (lambda: schedules.exponential_decay(-1, 0.5), 'initial_value'),
    (lambda: schedules.inverse_time_decay(10, 0), 'offset'),
    (lambda: schedules.inverse_time_decay(10, 1, first_round=-1),
     'first_round'),
    (lambda: schedules.power_decay(10, -1), 'exponent'),
    (lambda: schedules.loss_ratio(10, window=0), 'window'),
    (lambda: schedules.on_plateau(10, 1.0, 3), 'factor'),
    (lambda: schedules.on_plateau(10, 0.5, 0), 'patience'),
    (lambda: schedules.constant('3'), 'initial_value'),
])
def test_bad_arguments_are_named(build, match):
  with pytest.raises((TypeError, ValueError), match=match):
    build()


def test_num_steps_of_nan_and_huge_values():
  assert int(schedules.num_steps(float('nan'))) == 1
  assert int(schedules.num_steps(1e300)) == schedules.MAX_STEPS


def test_from_name_defers_to_the_schedules_defaults():
  assert schedules.from_name('loss_ratio', 10, exponent=None, window=None,
                             decay_rate=0.3) == schedules.loss_ratio(10)
  assert schedules.from_name('power', 8) == schedules.power_decay(8, 0.25)
  assert schedules.from_name(
      'on_plateau', 8, factor=0.5, patience=3) == schedules.on_plateau(8, 0.5, 3)


def test_as_schedule():
  # K checks the first value: 0.5 / 0.25 = 2 steps is fine.
  schedule = schedules.inverse_time_decay(0.5, 0.25)
  assert schedules.as_schedule(schedule, 'K', integer=True) is schedule
  with pytest.raises(ValueError, match='K must start at >= 1 step, got 0.5'):
    schedules.as_schedule(schedules.inverse_time_decay(10, 20), 'K', integer=True)
  with pytest.raises(ValueError, match='lr must be a finite number > 0'):
    schedules.as_schedule(-0.1, 'lr')
  assert schedules.as_schedule(5, 'K', integer=True) == schedules.constant(5)
  with pytest.raises(TypeError, match='K must be an int'):
    schedules.as_schedule(2.5, 'K', integer=True)
  with pytest.raises(ValueError, match='K must start at >= 1'):
    schedules.as_schedule(schedules.constant(0.5), 'K', integer=True)
  # K is an int32 in the state: past 2**30 is refused, not clipped.
  with pytest.raises(ValueError, match=r'K must be <= 2\*\*30'):
    schedules.as_schedule(2**30 + 1, 'K', integer=True)
  with pytest.raises(ValueError, match=r'K must start at <= 2\*\*30'):
    schedules.as_schedule(schedules.constant(2.0**31), 'K', integer=True)
  for bad in (float('nan'), float('inf')):
    with pytest.raises(ValueError, match='lr must be a finite number > 0'):
      schedules.as_schedule(bad, 'lr')
  assert schedules.as_schedule(np.float32(0.5), 'lr') == schedules.constant(
      np.float32(0.5))
  with pytest.raises(TypeError, match='lr must be a number or'):
    schedules.as_schedule('fast', 'lr')
  with pytest.raises(ValueError, match='unknown schedule'):
    schedules.from_name('cosine', 1.0)
