"""The G~/B~ advice helper."""

import pytest

from tff_mixed.metrics import dissimilarity


def test_dissimilar_gradients_recommend_gradient_transfer():
  advice = dissimilarity.recommend_mixing([4.0, 5.0, 9.0], [2.5, 3.0, 10.0])
  assert advice.mixing == 'two_way_gradient_transfer'
  assert advice.median_b_squared == 3.0
  assert advice.median_g_squared == 5.0


def test_aligned_gradients_recommend_parallel_training():
  advice = dissimilarity.recommend_mixing([0.0, 0.1], [1.0, 1.2])
  assert advice.mixing == 'parallel_training'
  assert advice.median_b_squared == pytest.approx(1.1)


def test_threshold_is_respected():
  assert dissimilarity.recommend_mixing(
      [1.0], [1.5], b_squared_threshold=1.2).mixing == 'two_way_gradient_transfer'


@pytest.mark.parametrize('g, b', [([], []), ([1.0], [1.0, 2.0]), ([float('nan')], [1.0])])
def test_bad_input(g, b):
  with pytest.raises(ValueError):
    dissimilarity.recommend_mixing(g, b)
