"""The tests' two ways to train: rounds of a process, and a driver run; and
a run's config.json as an older tff_mixed wrote it."""

import json
import os

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


def write_as_schema1(run_dir):
  """Rewrites `run_dir`'s config.json as schema 1 wrote it: how the run
  executes inside its spec at placeholders (100 rounds, every 10, in
  process), and only its rounds, cadences and runtime beside it. Returns
  the record written."""
  from tasks.common import run_spec  # pylint: disable=g-import-not-at-top
  path = os.path.join(run_dir, driver.CONFIG_FILE)
  with open(path) as f:
    record = json.load(f)
  ran = record[driver.EXECUTION]
  placeholders = json.loads(run_spec.RunSpec(
      record['spec']['task']).to_json())
  record['spec']['run'].update(placeholders[driver.EXECUTION],
                               __type__='tasks.common.registry:RunConfig',
                               client_groups=ran['client_groups'])
  record.update(schema=1, **{driver.EXECUTION: {
      name: ran[name]
      for name in ('rounds', 'eval_every', 'checkpoint_every', 'runtime')}})
  with open(path, 'w') as f:
    json.dump(record, f)
  return record
