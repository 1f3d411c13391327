"""The papers' benchmark tasks' runs: their binaries' flags and presets.

FEMNIST, Shakespeare, CIFAR-100, Stack Overflow tag prediction and Sent140
(seeds 000, 001 and 003) differ only in their data, models and the papers'
settings, so each `tasks/<task>/train.py` is `binary.main_for` of `runs`
here, which reads `tasks/<task>/task.py`. Flags: the training flags
(`tasks.common.training_flags`), `--data_dir` (where the source's files are),
`--download`, `--model` (the paper's model), `--batch_size`,
`--max_train_clients`, `--flops_convention`, a module's own
(`define_flags`: Sent140's `--vocabulary`) and `--preset`: `paper_000`,
`paper_001`, `paper_003` (those the task appears in) or `cpu_small`, which
sets every flag you did not give to the paper's value (or a run of a few
minutes here).
"""

import functools
import importlib

from tasks.common import flag_table
from tasks.common import flops
from tasks.common import task_runs

PRESET_HELP = ('The paper whose settings the flags you did not give take, or '
               'cpu_small (a few minutes on a 2-core CPU).')


def runs(name: str) -> task_runs.Runs:
  """Benchmark task `name`'s runs (`tasks.<name>.task`'s `MODELS`,
  `PRESETS`, `DURATIONS`, `DATA_HELP` and, if it has one, `define_flags`;
  the default batch size is the first preset's); the training flags keep
  their own defaults."""
  module = importlib.import_module(f'tasks.{name}.task')
  return task_runs.Runs(
      presets=module.PRESETS, preset_durations=module.DURATIONS,
      define_flags=functools.partial(_define_flags, module),
      preset_help=PRESET_HELP)


def _define_flags(module, table: flag_table.Table) -> None:
  """The task's own flags (its arguments), in `table`."""
  table.define(flag_table.STRING, 'data_dir', None, module.DATA_HELP)
  table.define(flag_table.BOOL, 'download', True,
               'Download the data if it is missing (TFF sources).')
  table.define(flag_table.ENUM, 'model', module.MODELS[0],
               list(module.MODELS), 'The model: which paper\'s architecture.')
  task_runs.define_batch_flags(
      table, next(iter(module.PRESETS.values()))['batch_size'],
      batch_help='Client batch size B.')
  table.define(flag_table.INTEGER, 'max_train_clients', None,
               'Use only the first this many training clients (by '
               'id); default all.', lower_bound=1)
  table.define(
      flag_table.ENUM, 'flops_convention', flops.OURS, list(flops.CONVENTIONS),
      'How the client-FLOPs columns count a model\'s FLOPs (tasks/common/'
      'flops.py): ours (2 per multiply-accumulate) or seed_003 (its Thop '
      'count, about half; paper_003 sets it, to compare with its Table 4).')
  if hasattr(module, 'define_flags'):
    module.define_flags(table)
