r"""A TFF program: TFF's `train_model` program logic runs our FedAvg on digits.

Everything around the process is TFF's own: `tff.learning.programs.train_model`
drives the rounds, `tff.program.FileProgramStateManager` (with
`tff_mixed.program`'s fix of its removal of old states) checkpoints (and
resumes) the state with the data iterator, release managers write the metrics
(CSV, TensorBoard) and the final model. `tff_mixed.program.TaskDataSource`
bridges our task to `tff.program`; any of our processes can take FedAvg's place.

  .venv/bin/python examples/tff_program.py --output_dir=/tmp/tff_program \
      --total_rounds=20

Run it again with more rounds and it resumes from the last saved round.
"""

import asyncio
import os

from absl import app
from absl import flags
import tensorflow_federated as tff

import tff_mixed
from tasks.common import command
from tasks.digits import task as digits

_OUTPUT_DIR = flags.DEFINE_string(
    'output_dir', None, 'Where the program state, metrics and final model go.')
_TOTAL_ROUNDS = flags.DEFINE_integer(
    'total_rounds', 20, 'Rounds to train (a resumed program trains up to it).',
    lower_bound=1)
_CLIENTS_PER_ROUND = flags.DEFINE_integer(
    'clients_per_round', 10, 'Clients sampled per round.', lower_bound=1)
_NUM_LOCAL_STEPS = flags.DEFINE_integer(
    'num_local_steps', 5, 'SGD steps every client takes (K).', lower_bound=1)
_CLIENT_LEARNING_RATE = flags.DEFINE_float(
    'client_learning_rate', 0.1, 'Client SGD learning rate.', lower_bound=0.0)
_SEED = flags.DEFINE_integer(
    'seed', 0, 'Seeds the initial model and the cohorts.')
flags.mark_flag_as_required('output_dir')


async def run_program(output_dir: str, *, total_rounds: int,
                      clients_per_round: int, num_local_steps: int,
                      client_learning_rate: float, seed: int) -> None:
  """Trains FedAvg on digits with `train_model`, writing into `output_dir`."""
  task = digits.create_digits_task(seed=seed)
  process = tff_mixed.algorithms.build_fed_avg(
      task.model_fn,
      tff.learning.optimizers.build_sgdm(learning_rate=client_learning_rate),
      num_local_steps=num_local_steps)
  initial_state = process.set_model_weights(
      process.initialize(),
      tff_mixed.driver.seeded_initial_weights(task.model_fn, seed))
  metrics_managers = tff.program.GroupingReleaseManager([
      tff.program.CSVFileReleaseManager(
          os.path.join(output_dir, 'train_metrics.csv'), key_fieldname='round'),
      tff.program.TensorBoardReleaseManager(
          os.path.join(output_dir, 'tensorboard')),
  ])
  await tff.learning.programs.train_model(
      train_process=process,
      initial_train_state=initial_state,
      train_data_source=tff_mixed.program.TaskDataSource(task, seed=seed),
      train_per_round_clients=clients_per_round,
      train_total_rounds=total_rounds,
      # TFF's, its old states removed once each (tff_mixed.program).
      program_state_manager=tff_mixed.program.FileProgramStateManager(
          os.path.join(output_dir, 'program_state')),
      model_output_manager=tff.program.SavedModelFileReleaseManager(
          os.path.join(output_dir, 'model')),
      train_metrics_manager=metrics_managers,
      evaluation_manager=None,
      evaluation_periodicity=1,
  )


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {" ".join(argv[1:])}')
  command.quiet_logs()  # TF's and TFF's INFO lines (a few per checkpoint) off.
  context = tff_mixed.execution.create_program_context()
  try:
    with tff.framework.get_context_stack().install(context):
      asyncio.run(run_program(
          _OUTPUT_DIR.value, total_rounds=_TOTAL_ROUNDS.value,
          clients_per_round=_CLIENTS_PER_ROUND.value,
          num_local_steps=_NUM_LOCAL_STEPS.value,
          client_learning_rate=_CLIENT_LEARNING_RATE.value, seed=_SEED.value))
  finally:
    tff_mixed.execution.shutdown()  # Ends the program context's TFF worker.
  print(f'trained to round {_TOTAL_ROUNDS.value}; per-round metrics in '
        f'{_OUTPUT_DIR.value}/train_metrics.csv, the final state in '
        f'{_OUTPUT_DIR.value}/model.')


if __name__ == '__main__':
  app.run(main)
