"""What a run raises when it cannot start or go on; each message is one line."""


class RunError(Exception):
  """A run that cannot start or go on; its message is one line."""


class OutputDirError(RunError, ValueError):
  """The output directory cannot hold this run: another configuration, in
  use by another run, unreadable files, or not a writable directory."""


class WriteError(RunError, OSError):
  """A file of the run could not be written (a full disk, a file-size
  limit): the message names the file and the system's reason. What was
  written before stays as it was, so the run resumes from its last
  checkpoint."""


class DataError(RunError, ValueError):
  """A task's data does not read (a bad record, an empty evaluation set):
  raised before anything is written for round 1's clients and the
  evaluation data, and when a round fails for a client first sampled then
  (the last checkpoint kept)."""


class CohortError(RunError, ValueError):
  """The task cannot give the cohort asked for (e.g. more clients a round
  than it has); raised before anything is trained."""


class NonFiniteStateError(RunError, ArithmeticError):
  """A round produced a state that is not finite."""


class EvalPlateauError(ValueError):
  """An `EvalPlateau` that does not fit the process or the evaluation."""


class RunInterrupted(KeyboardInterrupt):
  """Ctrl-C during a run; the message says where to resume from."""
