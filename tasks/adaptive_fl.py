r"""Seed 003's comparison over seeds: `python -m tasks.grid
--spec=seed003_table4` under its old name.

  python -m tasks.adaptive_fl --output_dir=/tmp/adaptive --parallel=2
  python -m tasks.adaptive_fl --form=cifar100 --output_dir=/tmp/cifar --list

FedAvg, AdaptiveFedOpt, FedGBO, Mimelite and MFL, each adaptive one with
RMSProp, SGDm and Adam, at Table 8's per-cell hyper-parameters, as a grid of
ordinary runs with a table of mean ± 95% confidence interval (client FLOPs,
best accuracy, rounds to a target, bytes). Every flag is `tasks.grid`'s
(docs/grids.md). This command replaced a comparison of one seed at learning
rates tuned on digits with β fixed at 0.9.
"""

from tasks.grid import __main__ as grid

if __name__ == '__main__':
  grid.run_spec('seed003_table4')
