"""Seed 004 App. C.1's probe: G~_t^2 and B~_t^2 at K = J = 1 over several
simulations, and the mixing they advise (`recommend_mixing`)."""

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from tasks.common import outputs
from tasks.common import registry
from tff_mixed import driver
from tff_mixed import keys
from tff_mixed.metrics import dissimilarity

MIXING_PROBE_FILE = 'mixing_probe.csv'


def run_probe(task, algorithm: registry.AlgorithmConfig,
              run_config: registry.RunConfig, central_data_fn,
              record: Mapping[str, Any]) -> dissimilarity.MixingAdvice:
  """`run_config.mixing_probe` simulations of `run_config.rounds` rounds,
  each an ordinary run in `<output_dir>/simulation_<i>` (seed `seed + i`);
  writes `mixing_probe.csv` and prints the advice, counting rounds from
  `run_config.mixing_probe_first_round`."""
  probe = dataclasses.replace(
      algorithm, num_local_steps=1, num_central_steps=1,
      gradient_dissimilarity=True, client_learning_rate=None)
  process = registry.build_process(
      probe, task.model_fn, central_data_fn=central_data_fn,
      client_groups=run_config.client_groups, seed=run_config.seed,
      clients_per_round=run_config.clients_per_round)
  rows = []
  for simulation in range(run_config.mixing_probe):
    seed = run_config.seed + simulation
    simulation_config = dataclasses.replace(
        run_config, seed=seed, eval_every=0, eval_plateaus=(),
        output_dir=os.path.join(run_config.output_dir,
                                f'simulation_{simulation}'))
    result = driver.run_experiment(
        task, process, config=dict(
            record, seed=seed, num_local_steps=1, num_central_steps=1,
            gradient_dissimilarity=True),
        **simulation_config.driver_arguments())
    for round_num, metrics in enumerate(result.history, start=1):
      rows.append((simulation, round_num, metrics[keys.ROUND_G_SQUARED],
                   metrics[keys.ROUND_B_SQUARED]))
  first = run_config.mixing_probe_first_round
  counted = [r for r in rows if r[1] >= first]
  advice = dissimilarity.recommend_mixing([r[2] for r in counted],
                                          [r[3] for r in counted])
  path = os.path.join(run_config.output_dir, MIXING_PROBE_FILE)
  outputs.write_csv(path, [
      dict(simulation=s, round=r, G_squared=g, B_squared=b)
      for s, r, g, b in rows])
  print(f'{task.name}: {run_config.mixing_probe} simulations x '
        f'{run_config.rounds} rounds at K = J = 1 (rounds >= {first} '
        f'counted; {path}). Advice: {advice.mixing}. {advice.reason}')
  return advice
