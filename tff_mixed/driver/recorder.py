"""What the round loop does after each round (`RoundRecorder`): the
finite-state guard, metrics.csv and TensorBoard, evaluation, the progress
bar and the checkpoint."""

import sys
from typing import Optional

import numpy as np
import tqdm

from tff_mixed import keys
from tff_mixed.driver import checkpoints
from tff_mixed.driver import evaluation as evaluation_lib
from tff_mixed.driver import guards
from tff_mixed.driver import history as history_lib
from tff_mixed.driver import layout
from tff_mixed.driver import resume
from tff_mixed.driver.errors import NonFiniteStateError


def metrics_columns(task, process, *, on_non_finite: str = 'stop',
                    round_columns=None, eval_plateaus=(),
                    train_eval_clients: int = 0, seed: int = 0) -> list[str]:
  """The `metrics.csv` columns `run_experiment(task, process, ...)` writes
  (with these arguments), read off the types before any round: the
  process's measurements, the columns `RoundRecorder` adds, those of
  `round_columns` and the `EvalPlateau`s, and the task's evaluation's. Not
  every row has every column: evaluations come every `eval_every` rounds,
  and a round without clients has no train metrics."""
  evaluation = evaluation_lib.Evaluation(task, train_eval_clients, seed)
  names = [keys.ROUND] + history_lib.metric_columns(
      process.next.type_signature.result.metrics)
  if on_non_finite == 'skip':
    names.append(keys.SKIPPED_NON_FINITE)
  names += [keys.SGD_STEPS_CUMULATIVE, keys.SIMULATED_SECONDS,
            keys.SIMULATED_SECONDS_CUMULATIVE]
  if round_columns is not None:
    names += list(round_columns(1))
  names.append(keys.ROUND_SECONDS)
  if evaluation:
    names += evaluation.metric_names
  names += [plateau.column for plateau in eval_plateaus]
  return list(dict.fromkeys(names))


class RoundRecorder:
  """What happens after each round of `run_experiment` (`run_rounds`'s
  `on_round`): the finite-state guard, the row of `metrics.csv` and
  TensorBoard, evaluation and `EvalPlateau`s, the progress bar, and the
  checkpoint."""

  def __init__(self, run: resume.ResumedRun, *, rounds, eval_every,
               checkpoint_every, on_non_finite, runtime_model,
               round_columns=None):
    self.run = run
    self.state = run.state
    self.history = run.history
    self.rounds = rounds
    self.eval_every = eval_every
    self.checkpoint_every = checkpoint_every
    self.on_non_finite = on_non_finite
    self.runtime_model = runtime_model
    self.round_columns = round_columns
    self.last_round = self.last_checkpoint = run.start_round
    self.final_eval = {}
    self.cumulative_steps = (
        self.history[-1].get(keys.SGD_STEPS_CUMULATIVE, 0.0)
        if self.history else 0.0)
    # Simulated time is not part of the configuration: on resume, earlier
    # rounds are re-timed with this run's model so the cumulative curve is
    # one model's.
    self.simulated = 0.0
    for row in self.history:
      self._add_round_columns(row)
    self.columns = []  # metrics.csv's header, once a row has been written.
    self.tensorboard = None
    self.bar = None
    self.interrupt_requested = None

  def _add_round_columns(self, row):  # Simulated times, `round_columns`.
    row[keys.SIMULATED_SECONDS] = self.runtime_model.round_seconds_from_metrics(
        row)
    self.simulated += row[keys.SIMULATED_SECONDS]
    row[keys.SIMULATED_SECONDS_CUMULATIVE] = self.simulated
    if self.round_columns is not None:
      row.update(self.round_columns(int(row[keys.ROUND])))

  def __call__(self, round_num, output, seconds):
    row = {keys.ROUND: float(round_num)}
    row.update(history_lib.flatten_metrics(output.metrics))
    self._take_if_finite(round_num, output.state, row)
    note = self._without_clients(round_num, row)
    self.cumulative_steps += row.get(keys.ROUND_SGD_STEPS, 0.0)
    row[keys.SGD_STEPS_CUMULATIVE] = self.cumulative_steps
    self._add_round_columns(row)
    row[keys.ROUND_SECONDS] = seconds
    is_last = round_num == self.rounds
    if self.run.evaluation and (
        is_last or (self.eval_every and round_num % self.eval_every == 0)):
      self._evaluate(round_num, row)
    self._warn_diverged(round_num, row)
    self.history.append(row)
    # Every round, so `tail -f` follows; rows past the last checkpoint are
    # dropped on resume (and a row a kill cut short).
    try:
      history_lib.append_history(self.run.metrics_path, self.history,
                                 self.columns)
    except OSError as e:
      raise layout.write_error(self.run.metrics_path, e, self.kept()) from None
    self.tensorboard.write(row)
    self._show(row, note)
    if is_last or round_num % self.checkpoint_every == 0:
      checkpoints.save(self.run.state_manager, self.state, round_num,
                       self.run.checkpoint_dir, self.kept())
      self.last_checkpoint = round_num
    self.last_round = round_num
    if self.interrupt_requested.is_set() and not is_last:  # Swallowed Ctrl-C.
      raise KeyboardInterrupt
    return self.state

  def kept(self) -> str:
    """What a failure now leaves for a resume, for its one line."""
    if self.last_checkpoint:
      return (f'the checkpoint of round {self.last_checkpoint} is kept; '
              'resume with the same command')
    return 'no checkpoint was written yet'

  def _take_if_finite(self, round_num, new_state, row):
    """Takes `new_state` if it is finite; else stops or skips the round."""
    try:
      guards.check_finite_state(new_state, round_num)
      self.state = new_state
      skipped = False
    except NonFiniteStateError as e:
      if self.on_non_finite == 'stop':
        kept = (f'the last checkpoint (round {self.last_checkpoint}) is kept'
                if self.last_checkpoint else 'no checkpoint was written yet')
        raise NonFiniteStateError(
            f'{e} Stopped; {kept}. Lower the learning rates, or with '
            "on_non_finite='skip' (--on_non_finite=skip) undo such rounds "
            'instead.') from None
      tqdm.tqdm.write(f'Warning: {e} The round is undone.', file=sys.stderr)
      skipped = True  # `self.state` is still the state before the round.
    if self.on_non_finite == 'skip':
      row[keys.SKIPPED_NON_FINITE] = float(skipped)

  def _without_clients(self, round_num, row) -> Optional[str]:
    """Drops the train metrics of a round without clients (they would read
    0.0, like perfect training); returns the note to show, or None."""
    if row.get(keys.ROUND_PARTICIPATING) != 0:
      return None
    for key in [k for k in row if k.startswith(keys.TRAIN_PREFIX)]:
      del row[key]
    note = ('all clients dropped' if row.get(keys.ROUND_DROPPED_NON_FINITE)
            else 'no client had data')
    tqdm.tqdm.write(f'Warning: round {round_num}: {note}; the model did not '
                    'learn from clients this round.', file=sys.stderr)
    return note

  def _evaluate(self, round_num, row):
    weights = self.run.process.get_model_weights(self.state)
    self.final_eval = self.run.evaluation.run(weights)
    row.update({keys.path(keys.EVAL, k): v
                for k, v in self.final_eval.items()})
    row.update(self.run.evaluation.run_validation(weights))
    row.update(self.run.evaluation.run_train(weights))
    if self.run.plateaus:
      self.state = self.run.plateaus.apply(self.run.process, self.state,
                                           round_num, row)

  @staticmethod
  def _warn_diverged(round_num, row):
    diverged = [k for k, v in row.items()
                if (k == keys.TRAIN_LOSS
                    or (k.startswith(keys.EVAL + keys.SEPARATOR)
                        and k.endswith(keys.LOSS)))
                and not np.isfinite(v)]
    if diverged:
      tqdm.tqdm.write(
          f'Warning: round {round_num}: '
          + ', '.join(f'{k} = {row[k]}' for k in diverged)
          + ' (the model state is finite; its loss overflows).',
          file=sys.stderr)

  def _show(self, row, note):
    if note:
      self.bar.set_postfix_str(note)
      return
    shown = {}
    if keys.TRAIN_LOSS in row:
      shown['loss'] = f'{row[keys.TRAIN_LOSS]:.4f}'
    for key in ('accuracy', keys.LOSS):
      if key in self.final_eval:
        shown[f'eval_{key}'] = f'{self.final_eval[key]:.4f}'
        break
    self.bar.set_postfix(shown)
