"""A training binary's `main`: its flags (or a spec file, `--spec_json`)
read once into a `RunSpec`, run, plotted and summarised."""

import dataclasses
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional

from absl import app
from absl import flags
from absl.testing import flagsaver

from tasks.common import command
from tasks.common import mixing_probe
from tasks.common import run_config
from tasks.common import reports
from tasks.common import run as run_lib
from tasks.common import run_spec
from tasks.common import saved_run
from tasks.common import sources
from tasks.common import task_registry
from tasks.common import task_runs
from tasks.common.training_flags import run_flags
from tasks.common.training_flags import schedule_groups
from tff_mixed import driver
from tff_mixed import keys
from tff_mixed.runtimes import ray_session

FLAGS = flags.FLAGS


def main_for(
    task: str, *,
    runs: Optional[task_runs.Runs] = None,
    presets: Optional[Mapping[str, Mapping[str, Any]]] = None,
    resolve: Optional[Callable[[flags.FlagValues], None]] = None,
    after: Optional[Callable[[Any, run_spec.RunSpec], None]] = None,
    also_read: Sequence[str] = (),
    central_data_flags: str = '',
) -> 'TrainingMain':
  """The `main` of task `task`'s training binary: the flags read once into
  a `RunSpec` (the task's arguments are its flags of the same names,
  `task_registry.arguments`), run by `run_task`.

  Args:
    task: The task's name in `tasks.common.task_registry`.
    runs: The task's `task_runs.Runs` (its module's `RUNS`): its flags,
      defined here in absl's `FLAGS` (call `main_for` once, at import), its
      presets, per-algorithm rules and the training flags it reads, as
      `task_registry.spec` reads them. Or, for a binary of your own that
      defines its flags itself, `presets`, `resolve` and `also_read`.
    presets: A binary of your own: `--preset`'s values
      (`command.apply_preset`), if it has one.
    resolve: A binary of your own: `resolve(FLAGS)` after the preset:
      defaults that depend on other flags (e.g. a per-algorithm central
      batch size), and checks of its own flags (raising `app.UsageError`).
    after: `after(result, spec)` once the run is done (a line of its own).
    also_read: A binary of your own: training flags the task reads (not
      refused as unused).
    central_data_flags: The flags that give the task central data, for the
      error when a mixed FL algorithm has none.
  """
  if runs is not None:
    task_runs.define_flags(runs, FLAGS)
  return TrainingMain(task, runs, presets, resolve, after, tuple(also_read),
                      central_data_flags)


@dataclasses.dataclass(frozen=True)
class TrainingMain:
  """A training binary's `main` (`main_for`'s fields): `main(argv)` runs
  the run its flags (or `--spec_json`) say; `spec_of(args)` is the run a
  command line would train, as a value, training nothing."""
  task: str
  runs: Optional[task_runs.Runs]
  presets: Optional[Mapping[str, Mapping[str, Any]]]
  resolve: Optional[Callable[[flags.FlagValues], None]]
  after: Optional[Callable[[Any, run_spec.RunSpec], None]]
  also_read: tuple[str, ...]
  central_data_flags: str

  def _from_flags(self) -> tuple[run_spec.RunSpec, Optional[tuple[int, int]]]:
    """The run the parsed flags say (`task_runs.read_runs` of the task's
    table, or `task_runs.read` of a binary of your own's flags), and the
    mixing probe's (simulations, first round) when `--mixing_probe` asks
    for it."""
    if self.runs is not None:
      return task_runs.read_runs(
          self.task, self.runs, task_runs.table(self.runs).from_absl(FLAGS))
    return task_runs.read(self.task, FLAGS, presets=self.presets,
                          resolve=self.resolve, also_read=self.also_read,
                          arguments=task_registry.arguments(self.task))

  def __call__(self, argv: Sequence[str]) -> None:
    command.check_no_arguments(argv)
    if FLAGS.spec_json is not None:
      spec, probe = _spec_from_file(self.task, FLAGS), None
    else:
      spec, probe = self._from_flags()
    result = run_task(spec, self.central_data_flags, probe=probe)
    if self.after is not None and probe is None:
      self.after(result, spec)

  def spec_of(self, args: Sequence[str]) -> run_spec.RunSpec:
    """The run `python -m <this binary> *args` trains, read as the binary
    reads it (its presets, defaults and checks), touching no flag of this
    process (`task_runs.spec_from_args`; a binary of your own: its flags
    parsed and restored).

    Raises:
      app.UsageError: A flag that is wrong (one line, naming it).
    """
    try:
      if self.runs is not None:
        return task_runs.spec_from_args(self.task, self.runs, args)
      command.require_finite_floats()
      with flagsaver.flagsaver():
        return task_runs.read_args(self.task, FLAGS, args,
                                   presets=self.presets, resolve=self.resolve,
                                   also_read=self.also_read)
    except ValueError as e:
      raise app.UsageError(str(e)) from None


def _spec_from_file(task: str, fv: flags.FlagValues) -> run_spec.RunSpec:
  """`--spec_json`'s run, with the execution flags given beside it.

  Raises:
    app.UsageError: One line: a file that is not a spec, a spec of another
      task, or a flag that would change what it trains.
  """
  path = fv.spec_json
  given = sorted(
      flag.name for module, defined in fv.flags_by_module_dict().items()
      if module.startswith('tasks.') for flag in defined
      if flag.present and flag.name != 'spec_json'
      and flag.name not in run_flags.SPEC_JSON_EXECUTION)
  if given:
    raise app.UsageError(
        f'--{given[0]}: the run is --spec_json={path}\'s; beside it give only '
        'where and how it executes (' + ', '.join(
            f'--{n}' for n in run_flags.SPEC_JSON_EXECUTION) + ').')
  try:
    spec = saved_run.read_spec_file(path)
  except saved_run.SavedRunError as e:
    raise app.UsageError(f'--spec_json: {e}') from None
  if spec.task != task:
    raise app.UsageError(
        f'--spec_json={path} is a run of task {spec.task}; run it with its '
        'binary.')
  # A run directory's config.json: the spec read has how the run was last
  # started (its "execution"), unless given.
  record = _run_record(path)
  if record is not None and 'rounds' not in (
      record.get(driver.EXECUTION) or {}) and not fv['rounds'].present:
    raise app.UsageError(
        f'--spec_json={path} is a run directory\'s config.json from before '
        'runs recorded their rounds: give --rounds.')
  executed = {name: fv[name].value
              for name in run_flags.SPEC_JSON_EXECUTION
              if name in run_config.EXECUTION and fv[name].present}
  executed['output_dir'] = run_flags.output_dir(fv)
  if 'workers' in executed:
    executed['workers'] = tuple(executed['workers'])
  # Fast mode and the simulated-time model: each flag given over the
  # spec's value, the others as there.
  executed['client_groups'] = run_flags.client_groups_of(
      fv, spec.execution.client_groups)
  executed['runtime_model'] = run_flags.runtime_model(
      fv, spec.execution.runtime_model)
  return dataclasses.replace(spec, execution=dataclasses.replace(
      spec.execution, **executed))


def _run_record(path: str) -> Optional[dict]:
  """The JSON at `path` if it is a run directory's config.json (the driver
  records its provenance there), else None (a spec's own JSON)."""
  with open(path) as f:
    record = json.load(f)
  return record if driver.PROVENANCE in record else None


def run_task(spec: run_spec.RunSpec, central_data_flags: str = '',
             probe: Optional[tuple[int, int]] = None) -> Any:
  """Runs `spec` (`tasks.common.run.run`; an output directory of the same
  run recorded by an older tff_mixed resumes: `saved_run.resume_record`),
  then plots `metrics.png` and prints a line of what it did; with `probe`,
  `(simulations, first_round)`, runs the mixing probe instead
  (`tasks.common.mixing_probe.run_probe`) and returns its advice.

  What the run refuses is one line naming the flag. `central_data_flags`
  names the flags that give this task central data, for the error when a
  mixed FL algorithm has none.
  """
  command.quiet_logs()
  algorithm, config = spec.algorithm, spec.execution
  try:
    if probe is not None:
      return mixing_probe.run_probe(spec, *probe)
    result = run_lib.run(spec)
  except sources.DataUnavailableError as e:
    sources.exit_with(e)
  except run_lib.MissingCentralDataError as e:
    raise app.UsageError(
        f'--algorithm={algorithm.algorithm} needs central data, which this '
        'task ' + (f'gets with {central_data_flags}.' if central_data_flags
                   else 'does not have with these flags.')) from e
  except run_lib.ConfigError as e:
    raise app.UsageError(str(e)) from e
  except run_lib.WorkerError as e:
    sys.exit(f'Error: {e}')
  except ray_session.RayRuntimeError as e:  # Mid-run (started: WorkerError).
    sys.exit(f'Error: --runtime=ray: {e}')
  except driver.RunError as e:
    sys.exit(f'Error: {e}')
  except driver.EvalPlateauError as e:
    raise app.UsageError(
        f'{schedule_groups.monitor_flags(spec.run.eval_plateaus)}: {e}'
    ) from e
  final = ', '.join(  # Counts as integers, metrics to 4 decimals.
      f'{k}={v:.0f}' if k.rsplit('/', 1)[-1].startswith('num_')
      else f'{k}={v:.4f}'
      for k, v in result.final_eval.items())
  plot = os.path.join(config.output_dir, reports.TRAINING_PLOT)
  last = result.history[-1] if result.history else {}
  privacy = (f'; DP: epsilon {last[keys.DP_EPSILON]:.3g} at delta '
             f'{last[keys.DP_DELTA]:.3g}' if keys.DP_EPSILON in last else '')
  try:
    reports.plot_history(result.history, plot,
                         f'{spec.task}: {algorithm.algorithm}, '
                         f'{config.rounds} rounds of '
                         f'{spec.run.clients_per_round} clients{privacy}')
  except OSError as e:  # The run is complete; its plot is a convenience.
    print(f'Warning: {plot} could not be written ({e.strerror or e}); the run '
          f'is complete (metrics.csv).', file=sys.stderr)
    plot = 'not written'
  rounds = '1 round' if config.rounds == 1 else f'{config.rounds} rounds'
  if result.resumed_from >= config.rounds:
    done = f'already complete ({rounds})'
  elif result.resumed_from:
    first = result.resumed_from + 1
    trained = (f'round {first}' if first == config.rounds
               else f'rounds {first}-{config.rounds}')
    done = (f'{trained} (resumed from round {result.resumed_from}) done in '
            f'{result.wall_time_seconds:.1f}s')
  else:
    done = f'{rounds} done in {result.wall_time_seconds:.1f}s'
  print(f'{spec.task}: {done}; final eval: {final or "n/a"}; plot: {plot}')
  return result


