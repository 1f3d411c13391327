r"""FedSGD on seed 000 §3's quadratic problem.

  python -m tasks.quadratic.train --preset=paper --num_local_steps=10 \
      --server_learning_rate=0.001 --output_dir=/tmp/quadratic_k10

`--preset=cpu_small` (the default) runs 300 rounds (under a minute here);
`--preset=paper` seed 000 §3's 3,000 (about 13 minutes here).

Prints the final model x, the true minimiser x* and, for constant K and gamma,
the surrogate minimiser x*(gamma, K) that FedSGD converges to. Decaying K:
`--k_schedule=exponential --k_decay_rate=0.995`; seed 000 Fig. 1 in full:
`python -m tasks.quadratic.figure1`.
"""

from tasks.common import binary
from tasks.common import command
from tasks.quadratic import task as quadratic_task
from tff_mixed import keys


def print_x(result, spec) -> None:
  """The final x, x* and, for constant K and learning rate, x*(gamma, K)."""
  x = (float(result.history[-1].get(keys.eval_column('x'), float('nan')))
       if result.history else float('nan'))
  line = f'x = {x:.5f}; x* = {quadratic_task.true_minimiser():.5f}'
  algorithm = spec.algorithm
  if (isinstance(algorithm.num_local_steps, int)
      and algorithm.client_learning_rate is None):
    surrogate = quadratic_task.surrogate_minimiser(
        algorithm.client.learning_rate, algorithm.num_local_steps)
    line += f'; x*(gamma, K) = {surrogate:.5f}'
  print(line)


main = binary.main_for('quadratic', runs=quadratic_task.RUNS,
                       after=print_x)


if __name__ == '__main__':
  command.run(main)
