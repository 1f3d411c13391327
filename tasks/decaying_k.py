r"""Decaying K (seeds 000 and 001) over seeds: `python -m tasks.grid
--spec=seed001_table4` under its old name.

  python -m tasks.decaying_k --output_dir=/tmp/dk --parallel=2
  python -m tasks.decaying_k --form=femnist --output_dir=/tmp/dk_femnist --list

Seed 001 Table 4's rows (dSGD, K-fixed, K-rounds, K-error, K-step on the
validation loss) as a grid of ordinary runs with a table of mean ± 95%
confidence interval; `--spec=seed000_table1` gives seed 000 Table 1's
(constant γ/K, decaying γ, decaying K at Table 5's rates). Every flag is
`tasks.grid`'s (docs/grids.md). This command replaced a comparison of one
seed whose decay rates came from the round count rather than the papers'
tables.
"""

from tasks.grid import __main__ as grid

if __name__ == '__main__':
  grid.run_spec('seed001_table4')
