"""The flags read once into an `AlgorithmConfig`, a `RunConfig` and an
`Execution`."""

from collections.abc import Mapping, Sequence
import dataclasses
import os
from typing import Any, Optional

from absl import app
from absl import flags

from tasks.common import flag_table
from tasks.common import registry
from tasks.common import run_config
from tasks.common import run_spec
from tasks.common.training_flags import algorithm as algorithm_flags
from tasks.common.training_flags import definitions
from tasks.common.training_flags import optimizer_groups
from tasks.common.training_flags import run_flags
from tasks.common.training_flags import schedule_groups
from tff_mixed import keys

FLAGS = flags.FLAGS


def config_from_flags(
    flag_values: flags.FlagValues = FLAGS, *, also_read: Sequence[str] = (),
) -> tuple[registry.AlgorithmConfig, run_config.RunConfig,
           run_config.Execution]:
  """Reads and checks every training flag, once: what is trained, how the
  run goes and how it is executed (`--mixing_probe`, which runs a probe
  instead, is read by `task_runs.read`).

  `also_read` names training flags the binary's task reads itself, which
  are therefore not refused as unused by the algorithm.

  Raises:
    app.UsageError: One line naming the flag that is wrong.
  """
  fv = flag_values
  if fv.algorithm == 'fedadam' and fv.server_optimizer not in ('sgd', 'adam'):
    raise app.UsageError(
        '--algorithm=fedadam uses Adam; drop --server_optimizer.')
  # Flags nothing would read, first: each would otherwise be ignored.
  schedule_groups.check_unused_schedule_flags(fv)
  optimizer_groups.check_unused_optimizer_flags(fv)
  algorithm_flags.check_unused_mixed_fl_flags(fv, also_read)
  algorithm_flags.check_adaptive_flags(fv)
  algorithm_flags.check_proximal_strength(fv)
  algorithm_flags.check_aggregator(fv)
  optimizer_groups.check_decays(fv)
  client = optimizer_groups.optimizer_spec(fv, 'client')
  algorithm_flags.check_two_way_client(fv, client)
  eval_plateaus = schedule_groups.eval_plateaus(fv)
  monitored = {p.hparam for p in eval_plateaus}
  num_local_steps = fv.num_local_steps
  if fv.k_schedule != 'constant' and keys.NUM_LOCAL_STEPS not in monitored:
    num_local_steps = schedule_groups.schedule(fv, 'k', num_local_steps)
  client_learning_rate = None
  if (fv.client_lr_schedule != 'constant'
      and keys.LEARNING_RATE not in monitored):
    client_learning_rate = schedule_groups.schedule(
        fv, 'client_lr', fv.client_learning_rate)
  if fv.algorithm == 'oracle':
    given = [f'--{n}' for n in ('server_optimizer', 'server_learning_rate',
                                'server_lr_schedule') if fv[n].present]
    if given:
      raise app.UsageError(
          f'--algorithm=oracle is centralised SGD at the client learning '
          f'rate; drop {", ".join(given)}.')
  server_learning_rate = schedule_groups.server_learning_rate(fv)
  server = optimizer_groups.server_spec(fv)
  adaptive = (algorithm_flags.adaptive_optimizer(fv)
              if fv.algorithm in algorithm_flags.ADAPTIVE_ALGORITHMS else None)
  runtime_model = run_flags.runtime_model(fv)
  algorithm = registry.AlgorithmConfig(
      algorithm=fv.algorithm,
      num_local_steps=num_local_steps,
      client_learning_rate=client_learning_rate,
      server_learning_rate=server_learning_rate,
      server_adam=fv.server_adam,
      client_weighting=(None if fv.client_weighting is None
                        else algorithm_flags.WEIGHTINGS[fv.client_weighting]),
      proximal_strength=fv.proximal_strength,
      aggregator=fv.aggregator,
      clip=fv.clip,
      noise_multiplier=fv.noise_multiplier,
      dp_delta=fv.dp_delta,
      compression_threshold=fv.compression_threshold,
      compression_bits=fv.compression_bits,
      client=client,
      server=server,
      central=optimizer_groups.optimizer_spec(fv, 'central'),
      merge=optimizer_groups.optimizer_spec(fv, 'merge'),
      adaptive=adaptive,
      federated_weight=fv.federated_weight,
      central_weight=fv.central_weight,
      num_central_steps=fv.num_central_steps,
      gradient_dissimilarity=fv.gradient_dissimilarity,
  )
  run = run_config.RunConfig(
      eval_plateaus=eval_plateaus,
      seed=fv.seed,
      client_shuffle=fv.client_shuffle,
      clients_per_round=fv.clients_per_round,
      train_eval_clients=fv.train_eval_clients,
  )
  execution = run_config.Execution(
      rounds=fv.rounds,
      client_groups=run_flags.client_groups_of(fv),
      runtime=fv.runtime,
      local_workers=fv.local_workers,
      workers=tuple(fv.workers),
      concurrency=fv.concurrency,
      ray_workers=fv.ray_workers,
      ray_address=fv.ray_address,
      ray_gpus_per_worker=fv.ray_gpus_per_worker,
      output_dir=run_flags.output_dir(fv),
      eval_every=fv.eval_every,
      checkpoint_every=fv.checkpoint_every,
      progress=fv.progress,
      on_non_finite=fv.on_non_finite,
      runtime_model=runtime_model,
  )
  return algorithm, run, execution


def config_from_values(
    values: Optional[Mapping[str, Any]] = None, *,
    ignore_unknown: bool = False, **overrides,
) -> tuple[registry.AlgorithmConfig, run_config.RunConfig,
           run_config.Execution]:
  """The algorithm, run and execution a training binary reads from these
  flag values.

  `values` and `overrides` map training-flag names to values (`overrides`
  win), read by the training flags' table (`definitions.training_table`)
  and checked by `config_from_flags` as the binary checks them. For flag
  values only: a run directory's config.json of flags
  (`spec_from_flag_record`); code builds a `RunSpec` directly, or a task's
  run with `task_registry.spec`. `ignore_unknown` skips names that are
  not training flags (a task preset's `model` or `batch_size`); otherwise
  they are an error.

  Raises:
    app.UsageError: One line naming the flag that is wrong.
  """
  table = definitions.training_table()
  given = {**(values or {}), **overrides}
  unknown = [name for name in given
             if name not in table and name not in table.aliases]
  if unknown and not ignore_unknown:
    raise app.UsageError(f'not a training flag: {", ".join(unknown)}.')
  try:
    flag_values = table.values(
        {name: value for name, value in given.items() if name not in unknown})
  except flag_table.FlagError as e:
    raise app.UsageError(str(e)) from None
  if not any(flag_values[name].present for name in run_flags.OUTPUT_DIR):
    flag_values['output_dir'].value = os.devnull  # Never written.
  return config_from_flags(flag_values=flag_values)


# Keys of a config.json of flags (schema 0) that are not flags, and the
# flag that only chose other flags' values (`--preset`).
_NOT_FLAGS = ('task', 'provenance', 'resolved', 'preset')
# Flags removed because nothing read them (the server's rate had no
# on-plateau or loss-ratio schedule), which schema 0 recorded at the one
# value they could take.
_RETIRED = ('server_lr_window', 'server_lr_factor', 'server_lr_patience')


def spec_from_flag_record(record: Mapping[str, Any]) -> run_spec.RunSpec:
  """Schema 0: a config.json of flag values (as the binaries wrote them,
  with the driver's `task`, `provenance` and `resolved`) as a run spec,
  read through the training flags as the binary read them (those at their
  default left out, as a user who did not give them); the flags that are
  not training flags are the task's arguments.

  Raises:
    ValueError: In one line, for a record without a task or with a value
      the flags refuse.
  """
  task = record.get('task')
  if not isinstance(task, str):
    raise ValueError('not a run spec: a config.json of flags names its task '
                     "('task'), and this one does not.")
  if record.get('algorithm') == 'oracle' and task.endswith('_oracle'):
    task = task[:-len('_oracle')]  # The name of the oracle's pooled task.
  table = definitions.training_table()
  values = {k: v for k, v in record.items()
            if k not in _NOT_FLAGS and k not in _RETIRED}
  # Each flag as the user gave it: config.json records every flag, its
  # default too, and a default given explicitly reads the same.
  training = {k: v for k, v in values.items()
              if k in table and v != table.flags[k].default}
  try:
    algorithm, run, execution = config_from_values(training)
  except app.UsageError as e:
    raise ValueError(f'config.json of task {task!r}: '
                     f'{str(e).splitlines()[0]}') from None
  return run_spec.RunSpec(
      task=task,
      task_args={k: v for k, v in values.items() if k not in table},
      algorithm=algorithm, run=run,
      execution=dataclasses.replace(execution, output_dir=None))
