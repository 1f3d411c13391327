"""The tests' two ways to train: rounds of a process, and a driver run."""

from tff_mixed import driver


def rounds(process, data, n, *, state=None):
  """Every output of `n` rounds on `data` from `state` (default: initial)."""
  state = process.initialize() if state is None else state
  outputs = []
  for _ in range(n):
    outputs.append(process.next(state, data))
    state = outputs[-1].state
  return outputs


def experiment(task, process, output_dir, **kwargs):
  """`driver.run_experiment` into `output_dir`, without a progress bar."""
  return driver.run_experiment(task, process, output_dir=str(output_dir),
                               progress=False, **kwargs)
