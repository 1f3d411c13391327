"""Seed 004 Table 5 and the App. C.3 client saving."""

import pytest

from tasks.movielens import cost


def test_table5_matches_the_papers_movielens_numbers():
  # N = 3,952 movies, d = 16, n = 160 movies a client a round, K = 10.
  table = cost.table5(num_movies=3952, dim=16, n=160, num_local_steps=10)
  kib = {k: round(c.communicated_kib) for k, c in table.items()}
  assert kib == {'baseline': 494, 'parallel_training': 20,
                 'one_way_gradient_transfer': 30,
                 'two_way_gradient_transfer': 30}
  # "more than 93.9% of communication" saved.
  saving = 1 - (table['two_way_gradient_transfer'].communicated_elements
                / table['baseline'].communicated_elements)
  assert round(100 * saving, 1) == 93.9
  assert table['baseline'].regularizer_flops == 10 * 3952 ** 2 * 16 / 2
  assert table['parallel_training'].regularizer_flops == 3952 ** 2 * 16 / 2


def test_client_step_flops_and_saving():
  b, d, n = 16, 16, 3952
  assert cost.client_step_flops(b, d) == (
      b * d + 3 * b * d * d + 3 * b * b * d + 2 * b)
  assert cost.client_step_flops(b, d, n) - cost.client_step_flops(b, d) == (
      0.5 * n * n * d + n * d)
  assert round(100 * cost.client_saving(b, d, n), 2) == 99.98


@pytest.mark.parametrize('kwargs', [
    dict(num_movies=0, dim=16, n=1, num_local_steps=1),
    dict(num_movies=10, dim=16, n=-1, num_local_steps=1),
    dict(num_movies=10, dim=16, n=1, num_local_steps=0)])
def test_bad_sizes_name_the_argument(kwargs):
  bad = [k for k, v in kwargs.items() if v < (0 if k == 'n' else 1)][0]
  with pytest.raises(ValueError, match=f'{bad} must be'):
    cost.table5(**kwargs)


def test_section_5_3_comp_column():
  # Mflop per client step: the paper prints 125.16 (baseline) and 0.025.
  assert round(cost.client_step_flops(16, 16, 3952) / 1e6, 2) == 125.03
  assert round(cost.client_step_flops(16, 16) / 1e6, 3) == 0.025
