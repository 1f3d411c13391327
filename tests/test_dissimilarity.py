"""The G~/B~ advice helper against seed 004's own Table 2."""

import pytest

from tff_mixed.metrics import dissimilarity


@pytest.mark.parametrize('task, g2, b2, mixing', [
    # Seed 004 Table 2 (max over rounds 10-100) and §5's findings.
    ('celeba_smiling', 49.04, 1.26, 'two_way_gradient_transfer'),
    ('stackoverflow_wikipedia', 0.03, 1.34, 'parallel_training'),
    ('movielens', 0.03, 1.50, 'parallel_training'),
])
def test_table_2_gives_the_papers_choices(task, g2, b2, mixing):
  advice = dissimilarity.recommend_mixing([0.0, g2], [1.0, b2])
  assert advice.mixing == mixing, task
  assert (advice.max_g_squared, advice.max_b_squared) == (g2, b2)


def test_the_maximum_is_over_rounds_and_simulations():
  """App. C.1: 5 simulations, the maximum at each round; here the one
  dissimilar round of one simulation decides."""
  g = [[0.1, 0.2, 0.1], [0.1, 3.0, 0.2]]
  b = [[1.1, 1.2, 1.0], [1.0, 1.1, 1.3]]
  advice = dissimilarity.recommend_mixing(g, b)
  assert advice.mixing == 'two_way_gradient_transfer'
  assert advice.max_g_squared == 3.0 and advice.max_b_squared == 1.3
  assert 'max G~^2 = 3' in advice.reason


def test_b_squared_alone_can_advise_gradient_transfer():
  assert dissimilarity.recommend_mixing(
      [0.0], [2.5]).mixing == 'two_way_gradient_transfer'
  assert dissimilarity.recommend_mixing(
      [0.0], [1.5], b_squared_threshold=1.2).mixing == (
          'two_way_gradient_transfer')


@pytest.mark.parametrize('g, b, message', [
    ([], [], r'g_squared and b_squared must be non-empty and of equal shape, '
             r'got \(0,\) and \(0,\)\.'),
    ([1.0], [1.0, 2.0], r'non-empty and of equal shape, got \(1,\) and '
                        r'\(2,\)\.'),
    ([float('nan')], [1.0], r'g_squared and b_squared must be finite\.'),
    ([1.0], [float('inf')], r'g_squared and b_squared must be finite\.'),
])
def test_bad_input(g, b, message):
  with pytest.raises(ValueError, match=message):
    dissimilarity.recommend_mixing(g, b)
