r"""Runs a grid of settings x seeds and summarises it with confidence
intervals.

  python -m tasks.grid --spec=seed000_table1 --output_dir=/tmp/t1 --parallel=2
  python -m tasks.grid --spec=seed000_table1 --output_dir=/tmp/t1 --list
  python -m tasks.grid --spec=seed000_table1 --output_dir=/tmp/t1 --index=4
  python -m tasks.grid --spec=seed000_table1 --output_dir=/tmp/t1 --summary_only

`--spec` is a module of `tasks/grid/specs/` (`--spec=list` lists them) or a
Python file defining `FORMS` (form name -> `tasks.grid.spec.Spec`); `--form`
chooses the form (`cpu_small` runs here in minutes; the others are the
papers' settings, named by task, for a user with the data: `--spec=list`
lists them). Every run is an ordinary run of the
spec's binary in `<output_dir>/runs/<setting>/seed_<s>/`, given its run
spec (`<output_dir>/specs/<setting>/seed_<s>.json`: its flags as the binary
reads them, written first for every run left to run, so a wrong flag stops
the grid before any run starts; `run_specs.with_specs`): a finished run is
skipped and an interrupted one resumes, so the same command finishes what
is left. On a cluster, `--list` writes the specs and prints one command per
run (one line each, in index order) and `--index=i` runs the i-th (e.g. a Slurm array job with
`--index=$SLURM_ARRAY_TASK_ID`); `--summary_only` then writes the table.
One runner runs a grid directory at a time (a second says so in one line);
runs another process holds are left to it; the binaries end with the runner,
however it ends.
The summary is `<output_dir>/summary/<name>.md` and `.csv` (mean ± 95%
confidence interval over seeds, Student t) and a plot per curve. A column a
summary or curve reads that no run will write is one line before any run
trains (the first run's process is built to read its columns).
"""

import importlib
import importlib.util
import os
import re
import shutil
import sys
import traceback

from absl import app
from absl import flags

from tasks.common import command
from tasks.grid import run_specs
from tasks.grid import runner
from tasks.grid import spec as spec_lib
from tasks.grid import specs
from tasks.grid import table
from tff_mixed import checks
from tff_mixed import execution

flags.DEFINE_string('spec', None, 'A module of tasks/grid/specs (list: '
                    '--spec=list) or a .py file defining FORMS.')
flags.DEFINE_string('form', 'cpu_small', "The spec's form, a key of its FORMS: "
                    'cpu_small runs here in minutes; the others are the '
                    "paper's setting, by task (--spec=list lists them).")
flags.DEFINE_string('output_dir', None, 'The grid\'s directory: runs/, logs/ '
                    'and summary/.')
flags.DEFINE_integer('parallel', 1, 'Runs at once on this machine (each is '
                     'a binary with its own TFF worker).', lower_bound=1)
flags.DEFINE_string('ray_address', None, 'Hand the runs to Ray instead of '
                    'running them here: host:port (or auto) of a running '
                    'cluster, or local for a Ray on this machine (on '
                    '127.0.0.1, ended with the grid). Each run is a task '
                    'asking for --ray_cpus_per_run CPUs and '
                    '--ray_gpus_per_run GPUs; Ray queues what does not fit. '
                    'The grid directory must be at the same path on every '
                    'node (docs/grids.md).')
flags.DEFINE_float('ray_cpus_per_run', 1.0, 'With --ray_address: CPUs each '
                   'run asks Ray for.', lower_bound=0.0)
flags.DEFINE_float('ray_gpus_per_run', 0.0, 'With --ray_address: GPUs each '
                   'run asks Ray for.', lower_bound=0.0)
flags.DEFINE_bool('list', False, 'Print one command per run, in index '
                  'order, and exit (for a scheduler).')
flags.DEFINE_integer('index', None, 'Run only the run of this index (as '
                     '--list numbers them, from 0), in this process.',
                     lower_bound=0)
flags.DEFINE_bool('summary_only', False, 'Summarise the finished runs; run '
                  'nothing.')
flags.DEFINE_multi_string('run_flag', [], 'name=value: a flag of the spec\'s '
                          'binary added to every run (where the data is: '
                          '--run_flag=data_dir=/data/tff); repeat it. It is '
                          'part of each run\'s configuration.')
# Run flags the grid gives every run when set (the spec's own otherwise),
# and google-research/federated's names for them.
RUN_FLAGS = ('rounds', 'clients_per_round', 'eval_every', 'runtime')
flags.DEFINE_integer('rounds', None, "Every run's --rounds (default the "
                     "spec's).", lower_bound=1)
flags.DEFINE_integer('clients_per_round', None, "Every run's "
                     "--clients_per_round (default the spec's).", lower_bound=1)
flags.DEFINE_integer('eval_every', None, "Every run's --eval_every (default "
                     "the spec's).", lower_bound=0)
flags.DEFINE_enum('runtime', None, list(execution.RUNTIMES),
                  "Every run's --runtime: what runs its computations (default "
                  "the binaries'); the execution, not part of a run's "
                  'configuration, so a grid may finish on another.')
command.define_other_names()  # --total_rounds, --rounds_per_eval.
# Flags of the comparison commands `tasks.decaying_k` and `tasks.adaptive_fl`
# before they became grids (2026-11-24), and what replaced each.
RETIRED = {
    'task': 'give --form=<task> (--spec=list lists each spec\'s forms)',
    'preset': 'give --form=<task>: a form runs the task\'s paper preset',
    'data_dir': 'give --run_flag=data_dir=<dir>',
    'max_train_clients': 'give --run_flag=max_train_clients=<n>',
    'only': 'a grid runs all its settings; --list and --index run one',
    'use_synthetic_data': ('give --form=cpu_small (each spec\'s small form, '
                           'on synthetic data where the task has no '
                           'embedded data)'),
}
for _name in RETIRED:
  flags.DEFINE_string(_name, None, f'Retired: {RETIRED[_name]}.')
FLAGS = flags.FLAGS


def _same_file(a: str, b: str) -> bool:
  return os.path.realpath(a) == os.path.realpath(b)


def _load_error(where: str, path: str, e: Exception) -> app.UsageError:
  """One line for `e`, raised running the spec file at `path`: the file's
  line where Python knows it (the innermost frame in the file, or a syntax
  error's line), then the exception."""
  line = None
  for frame, lineno in traceback.walk_tb(e.__traceback__):
    if _same_file(frame.f_code.co_filename, path):
      line = lineno
  text = str(e)
  if (line is None and isinstance(e, SyntaxError) and e.filename
      and _same_file(e.filename, path)):
    line, text = e.lineno, e.msg  # str(e) repeats the file and line.
  text = re.sub(r'\s*\n\s*', ' ', text.strip())
  at = f', line {line}' if line is not None else ''
  return app.UsageError(f'--spec={where}{at}: {type(e).__name__}'
                        + (f': {text}' if text else ''))


def load_forms(name: str):
  """`FORMS` of a spec module by name, or of a Python file, every form a
  Spec (a Spec checks itself when made); a fault is one UsageError line
  naming the file (and its line, or the form)."""
  if name.endswith('.py'):
    if not os.path.isfile(name):
      raise app.UsageError(f'--spec={name}: no such file.')
    path, where = name, name

    def load():
      module_spec = importlib.util.spec_from_file_location('grid_spec', name)
      module = importlib.util.module_from_spec(module_spec)
      module_spec.loader.exec_module(module)
      return module
  elif name in specs.names():
    module_name = f'tasks.grid.specs.{name}'
    path = importlib.util.find_spec(module_name).origin
    where = f'{name} ({path})'

    def load():
      return importlib.import_module(module_name)
  else:
    raise app.UsageError(f'--spec={name}: not a spec; choose from '
                         f'{", ".join(specs.names())} or give a .py file.')
  try:
    module = load()
  except Exception as e:  # pylint: disable=broad-except
    # The module's own fault (a syntax error, an exception, a Spec that
    # refuses its fields), as one line: nothing has been written yet.
    raise _load_error(where, path, e) from None
  forms = getattr(module, 'FORMS', None)
  if not isinstance(forms, dict) or not forms:
    raise app.UsageError(f'--spec={where} defines no FORMS (form name -> '
                         'Spec).')
  for form, value in forms.items():
    if not isinstance(value, spec_lib.Spec):
      raise app.UsageError(
          f'--spec={where}: form {form!r} is {checks.a_kind(value)}, not a '
          'tasks.grid.spec.Spec.')
  return forms


def main(argv):
  command.check_arguments(argv, FLAGS.output_dir or 'unused')
  for name in RETIRED:
    if FLAGS[name].present:
      raise app.UsageError(_retired(name))
  if FLAGS.spec in (None, 'list'):
    for name in specs.names():
      forms = load_forms(name)
      first = next(iter(forms.values()))
      print(f'{name} ({", ".join(forms)}): '
            f'{first.description.splitlines()[0] if first.description else ""}')
    if FLAGS.spec is None:
      raise app.UsageError('give --spec (one of the above).')
    return 0
  forms = load_forms(FLAGS.spec)
  if FLAGS.form not in forms:
    raise app.UsageError(f'--form={FLAGS.form}: --spec={FLAGS.spec} has '
                         f'{", ".join(forms)}.')
  spec = forms[FLAGS.form]
  if not FLAGS.output_dir:
    raise app.UsageError('give --output_dir (the grid\'s directory).')
  extra = {}
  for item in FLAGS.run_flag:
    name, sep, value = item.partition('=')
    if not sep or not name:
      raise app.UsageError(f'--run_flag={item}: give name=value.')
    extra[name.lstrip('-')] = value
  for name in RUN_FLAGS:
    if FLAGS[name].value is not None:
      extra[name] = str(FLAGS[name].value)
  try:
    spec = spec.with_flags(extra)
  except ValueError as e:
    raise app.UsageError(f'--run_flag: {e}') from None
  runs = spec.runs(FLAGS.output_dir)

  def with_specs(runs, **kwargs):
    try:
      return run_specs.with_specs(runs, FLAGS.output_dir, **kwargs)
    except run_specs.SpecError as e:
      raise app.UsageError(f'--spec={FLAGS.spec} --form={FLAGS.form}: {e}'
                           ) from None

  def check_planned(todo, here=True):
    """What the summaries read, against what the runs will write; a run
    that cannot be built `here` refuses the grid (on a scheduler's login
    node, `--list`, or for Ray's nodes, its data may live elsewhere: said,
    not refused)."""
    try:
      table.check_planned_columns(spec, FLAGS.output_dir, todo)
    except run_specs.SpecError as e:
      if here:
        raise app.UsageError(
            f'--spec={FLAGS.spec} --form={FLAGS.form}: {e}') from None
      print(f'grid: the columns the summaries read are not checked here: '
            f'{e}', file=sys.stderr)

  if FLAGS.list:  # Checked here: a scheduler's `--index` runs are not.
    existed = os.path.exists(FLAGS.output_dir)
    listed = with_specs(runs)
    try:
      check_planned([r for r in listed if not runner.is_done(r)], here=False)
    except (app.UsageError, table.MissingColumnError):
      if not existed:
        shutil.rmtree(FLAGS.output_dir)  # A refused grid leaves nothing.
      raise
    for run in listed:
      print(run.command(sys.executable))
    return 0
  if FLAGS.index is not None:
    if FLAGS.index >= len(runs):
      raise app.UsageError(f'--index={FLAGS.index}: the grid has '
                           f'{len(runs)} runs (0 to {len(runs) - 1}).')
    return runner.run_one(with_specs(runs[FLAGS.index:FLAGS.index + 1],
                                     unfinished_only=True)[0])
  failed = []
  if not FLAGS.summary_only:
    # A summary or curve that finished runs cannot give: said before more
    # runs (summarise says it again once some are finished).
    table.check_columns(spec, FLAGS.output_dir)
    existed = os.path.exists(FLAGS.output_dir)
    release = runner.lock_grid(FLAGS.output_dir)  # One runner per grid.
    try:
      try:
        todo = with_specs(runs, unfinished_only=True)
        # A cluster's runs read their data where they run (Ray's nodes).
        check_planned([r for r in todo if not runner.is_done(r)],
                      here=not FLAGS.ray_address)
      except (app.UsageError, table.MissingColumnError):
        release()
        if not existed:
          shutil.rmtree(FLAGS.output_dir)  # A refused grid leaves nothing.
        raise
      start, parallel = runner.launch, FLAGS.parallel
      if FLAGS.ray_address:
        try:
          execution.ray_context(address=None if FLAGS.ray_address == 'local'
                                else FLAGS.ray_address)
        except (RuntimeError, ValueError) as e:
          raise app.UsageError(f'--ray_address: {e}') from None
        start = runner.on_ray(FLAGS.ray_cpus_per_run, FLAGS.ray_gpus_per_run)
        parallel = max(len(todo), 1)  # Ray queues them.
      failed = runner.run_all(todo, FLAGS.output_dir, parallel=parallel,
                              start=start)
      table.summarise(spec, FLAGS.output_dir)
    finally:
      release()
  else:
    table.summarise(spec, FLAGS.output_dir)
  if failed:
    print(f'grid: {len(failed)} of {len(runs)} runs failed (see above); the '
          'table leaves them out. Fix the cause and run the same command '
          'again.', file=sys.stderr)
    return 1
  return 0


def _retired(name: str) -> str:
  return (f'--{name} is retired: the comparisons are grids now; '
          f'{RETIRED[name]} (CHANGELOG.md, 2026-11-24).')


def run_spec(name: str) -> None:
  """The entry point of a command that is one spec's grid
  (`tasks.decaying_k`, `tasks.adaptive_fl`): this command with `--spec`
  defaulting to `name`. A flag of the command before it was a grid is
  answered with what replaced it, whatever else is given (before absl
  reads the command line, which would stop at any flag it does not know)."""
  for arg in sys.argv[1:]:
    name_given = arg.lstrip('-').split('=', 1)[0]
    for retired in (name_given, name_given[2:] if name_given.startswith(
        'no') else None):
      if arg.startswith('-') and retired in RETIRED:
        print(_retired(retired), file=sys.stderr)
        sys.exit(1)
  FLAGS.set_default('spec', name)
  command.run(main)


if __name__ == '__main__':
  command.run(main)
