"""The one training binary of the papers' benchmark tasks.

FEMNIST, Shakespeare, CIFAR-100, Stack Overflow tag prediction and Sent140
(seeds 000, 001 and 003) differ only in their data, models and the papers'
settings, so each `tasks/<task>/train.py` is `define_flags_for('<task>')`
and `main_for` here, reading `tasks/<task>/task.py`. Flags: the training flags
(`tasks.common.training_flags`), `--data_dir` (where the source's files are),
`--download`, `--model` (the paper's model), `--batch_size`,
`--max_train_clients` and `--preset`: `paper_000`, `paper_001`, `paper_003`
(those the task appears in) or `cpu_small`, which sets every flag you did
not give to the paper's value (or a run of a few minutes here).
"""

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from absl import flags

from tasks.common import binary
from tasks.common import command
from tasks.common import fixtures
from tasks.common import flops
from tasks.common import task_registry
from tasks.common import training_flags
from tff_mixed.task import Task



@dataclasses.dataclass(frozen=True)
class Benchmark:
  """A benchmark task as its binary sees it.

  Attributes:
    name: The task's name (`tasks/<name>/`).
    create_task: `create_task(data_dir, *, model, batch_size,
      max_train_clients, download, seed) -> Task`; raises
      `sources.DataUnavailableError` (one line) when the data is missing.
    models: The task's model names, the default first.
    presets: Preset name -> flag values (`paper_000`, ..., `cpu_small`), the
      default first.
    data_help: What `--data_dir` is, and its default.
    batch_size: The default client batch size.
    durations: Paper preset -> how long it takes here (the task module's
      `DURATIONS`, from `bench/benchmark_round_cost.py`).
  """
  name: str
  create_task: Callable[..., Task]
  models: Sequence[str]
  presets: Mapping[str, Mapping[str, Any]]
  data_help: str
  batch_size: int
  durations: Mapping[str, str] = dataclasses.field(default_factory=dict)


def define_flags_for(name: str) -> Benchmark:
  """Defines the binary flags of `tasks.<name>.task` (its `create_task`,
  `MODELS`, `PRESETS` and `DATA_HELP`; the default batch size is the first
  preset's) and returns its `Benchmark`."""
  import importlib  # pylint: disable=g-import-not-at-top
  module = importlib.import_module(f'tasks.{name}.task')
  benchmark = Benchmark(
      name=name, create_task=module.create_task, models=module.MODELS,
      presets=module.PRESETS, data_help=module.DATA_HELP,
      batch_size=next(iter(module.PRESETS.values()))['batch_size'],
      durations=module.DURATIONS)
  define_flags(benchmark)
  return benchmark


def define_flags(benchmark: Benchmark) -> None:
  """Defines the binary's flags (call once, at import)."""
  flags.DEFINE_string('data_dir', None, benchmark.data_help)
  flags.DEFINE_bool('download', True,
                    'Download the data if it is missing (TFF sources).')
  flags.DEFINE_bool('use_synthetic_data', False,
                    fixtures.USE_SYNTHETIC_DATA_HELP)
  flags.DEFINE_enum('model', benchmark.models[0], list(benchmark.models),
                    'The model: which paper\'s architecture.')
  flags.DEFINE_integer('batch_size', benchmark.batch_size,
                       'Client batch size B.', lower_bound=1)
  flags.DEFINE_alias('client_batch_size', 'batch_size')  # google-research/federated's name.
  flags.DEFINE_integer('max_train_clients', None,
                       'Use only the first this many training clients (by '
                       'id); default all.', lower_bound=1)
  flags.DEFINE_enum(
      'flops_convention', flops.OURS, list(flops.CONVENTIONS),
      'How the client-FLOPs columns count a model\'s FLOPs (tasks/common/'
      'flops.py): ours (2 per multiply-accumulate) or seed_003 (its Thop '
      'count, about half; paper_003 sets it, to compare with its Table 4).')
  command.define_preset_flag(
      benchmark.presets,
      'The paper whose settings the flags you did not give take, or '
      'cpu_small (a few minutes on a 2-core CPU).',
      durations=benchmark.durations)
  training_flags.define_training_flags()


def main_for(benchmark: Benchmark) -> binary.TrainingMain:
  """The binary's `main` (`binary.main_for`)."""
  return binary.main_for(benchmark.name,
                         runs=task_registry.runs(benchmark.name))
