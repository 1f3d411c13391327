"""Seed 004 App. C.1's probe: G~_t^2 and B~_t^2 at K = J = 1 over several
simulations, and the mixing they advise (`recommend_mixing`)."""

import dataclasses
import os

from tasks.common import registry
from tasks.common import reports
from tasks.common import run as run_lib
from tasks.common import run_config as run_config_lib
from tasks.common import run_spec
from tff_mixed import driver
from tff_mixed import keys
from tff_mixed.algorithms import mixed_fl
from tff_mixed.metrics import dissimilarity

MIXING_PROBE_FILE = 'mixing_probe.csv'


def run_probe(spec: run_spec.RunSpec, simulations: int,
              first_round: int = 10) -> dissimilarity.MixingAdvice:
  """Seed 004 App. C.1's probe of `spec`'s mixed FL algorithm: `simulations`
  simulations of `spec.execution.rounds` rounds at K = J = 1, each an ordinary
  run in `<output_dir>/simulation_<i>` (seed `seed + i`); writes
  `mixing_probe.csv` and prints the advice, counting rounds from
  `first_round`. Each simulation's config.json records its spec.

  Raises:
    run.ConfigError: One line, for an algorithm that is not mixed FL, a
      first round after the last, or a task that cannot run it.
    run.WorkerError, tasks.common.sources.DataUnavailableError,
    tff_mixed.driver.RunError: As `run.run` raises them.
  """
  algorithm, run_config, executed = spec.algorithm, spec.run, spec.execution
  if algorithm.algorithm not in mixed_fl.MIXINGS:
    raise run_lib.ConfigError(f'the mixing probe is for the mixed FL '
                              f'algorithms, not {algorithm.algorithm}.')
  if first_round > executed.rounds:
    raise run_lib.ConfigError(
        f'the mixing probe\'s first counted round ({first_round}, '
        '--mixing_probe_first_round) is after the last of '
        f'rounds={executed.rounds}.')
  run_lib.check_workers(executed)
  task, central_data_fn, _ = run_lib.build_task(spec)
  probe = dataclasses.replace(
      algorithm, num_local_steps=1, num_central_steps=1,
      gradient_dissimilarity=True, client_learning_rate=None)
  rows = []
  with run_lib.execution_of(executed):
    process = registry.build_process(
        probe, task.model_fn, central_data_fn=central_data_fn,
        client_groups=executed.client_groups, seed=run_config.seed,
        clients_per_round=run_config.clients_per_round)
    for simulation in range(simulations):
      seed = run_config.seed + simulation
      simulated = dataclasses.replace(
          spec, algorithm=probe,
          run=dataclasses.replace(run_config, seed=seed, eval_plateaus=()),
          execution=dataclasses.replace(
              executed, eval_every=0, output_dir=os.path.join(
                  executed.output_dir, f'simulation_{simulation}')))
      result = driver.run_experiment(
          task, process, config=run_lib.record_of(simulated),
          **run_config_lib.driver_arguments(simulated.run,
                                            simulated.execution))
      for round_num, metrics in enumerate(result.history, start=1):
        rows.append((simulation, round_num, metrics[keys.ROUND_G_SQUARED],
                     metrics[keys.ROUND_B_SQUARED]))
  counted = [r for r in rows if r[1] >= first_round]
  advice = dissimilarity.recommend_mixing([r[2] for r in counted],
                                          [r[3] for r in counted])
  path = os.path.join(executed.output_dir, MIXING_PROBE_FILE)
  reports.write_csv(path, [
      dict(simulation=s, round=r, G_squared=g, B_squared=b)
      for s, r, g, b in rows])
  print(f'{spec.task}: {simulations} simulations x {executed.rounds} '
        f'rounds at K = J = 1 (rounds >= {first_round} counted; {path}). '
        f'Advice: {advice.mixing}. {advice.reason}')
  return advice
