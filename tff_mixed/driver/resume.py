"""A run's process, state and history, resumed from its output directory."""

import os
from typing import Optional

from tff_mixed import keys
from tff_mixed.driver import checkpoints
from tff_mixed.driver import config_file
from tff_mixed.driver import history as history_lib
from tff_mixed.driver import layout
from tff_mixed.driver.errors import OutputDirError
from tff_mixed.driver.eval_plateau import Plateaus
from tff_mixed.driver.evaluation import Evaluation
from tff_mixed.driver.evaluation import seeded_initial_weights
from tff_mixed.templates import client_groups as groups


def _checked_process(process, client_groups: Optional[groups.ClientGroups]):
  """`process` (built if it is a builder), checked against `client_groups`
  (None: one dataset per client): the run says the mode, the process must
  take its data."""
  client_groups = groups.checked(client_groups)
  if not hasattr(process, 'next'):  # A builder, called once the dir is good.
    process = process()
  grouped = groups.takes_groups(process)
  if grouped and client_groups is None:
    raise ValueError('The process takes client groups (built with '
                     'client_groups): pass the run the same '
                     'client_groups=ClientGroups(N).')
  if not grouped and client_groups is not None:
    raise ValueError(f'client_groups={client_groups} but the process takes '
                     'one dataset per client (build it with the same '
                     'client_groups).')
  return process


class ResumedRun:
  """A run's process, state and history, resumed from its output directory.

  Raises what `run_experiment` documents, before anything is trained.
  """

  def __init__(self, task, process, *, output_dir, seed, rounds,
               client_groups, eval_plateaus, created, train_eval_clients=0):
    self.task = task
    self.output_dir = output_dir
    self.client_groups = client_groups
    self.process = _checked_process(process, client_groups)
    self.checkpoint_dir = os.path.join(output_dir, layout.CHECKPOINT_DIR)
    checkpoints.remove_temporary_checkpoints(self.checkpoint_dir)
    self.state_manager = checkpoints.state_manager(self.checkpoint_dir)
    state = self.process.initialize()
    state = self.process.set_model_weights(
        state, seeded_initial_weights(task.model_fn, seed))
    if created:
      config_file.record_resolved(output_dir, self.process, state)
    saved, self.start_round = checkpoints.load_latest_good(
        self.state_manager, self.checkpoint_dir, state)
    if self.start_round > rounds:
      raise OutputDirError(
          f'output_dir {output_dir} holds a run checkpointed at round '
          f'{self.start_round}, past rounds={rounds}; ask for at least '
          f'{self.start_round} rounds or choose another output_dir.')
    self.state = state if saved is None else saved
    self.metrics_path = os.path.join(output_dir, layout.METRICS_FILE)
    self.history = history_lib.read_history(self.metrics_path,
                                            self.start_round)
    rounds = [int(row[keys.ROUND]) for row in self.history]
    if rounds != list(range(1, self.start_round + 1)):
      raise OutputDirError(
          f'{self.metrics_path} holds '
          f'{f"rounds {_spans(rounds)}" if rounds else "no rounds"} but the '
          f'checkpoint is of round '
          f'{self.start_round}; restore it (or move the checkpoints aside to '
          'start over).')
    self.evaluation = Evaluation(task, train_eval_clients, seed)
    self.plateaus = Plateaus(eval_plateaus, self.history)
    self.plateaus.check(self.process, self.state,
                        self.evaluation.metric_names)

  def tensorboard(self) -> history_lib.TensorBoard:
    """The TensorBoard writer; the event files of an earlier try are
    rewritten from the history kept (rows a killed run wrote past its
    checkpoint go, all of them when it wrote none)."""
    directory = os.path.join(self.output_dir, layout.TENSORBOARD_DIR)
    if self.history:
      history_lib.write_history(self.metrics_path, self.history)
    return history_lib.TensorBoard(directory, self.history)


def _spans(rounds: list[int]) -> str:
  """`1-4, 6` for rounds [1, 2, 3, 4, 6]."""
  spans = []
  for r in rounds:
    if spans and r == spans[-1][1] + 1:
      spans[-1][1] = r
    else:
      spans.append([r, r])
  return ', '.join(f'{a}' if a == b else f'{a}-{b}' for a, b in spans)
