r"""Stack Overflow tag prediction (seed 000).

  python -m tasks.stackoverflow_tags.train --preset=paper_000 --output_dir=/tmp/stackoverflow_tags

`--preset` sets every flag you do not give to a paper's setting
(`tasks.stackoverflow_tags.task.PRESETS`) or to `cpu_small`; offline, `python -m
tasks.fixtures` writes small files in the source's format to try it on.
"""

from tasks import benchmark
from tasks import outputs
from tasks.stackoverflow_tags import task

BENCHMARK = benchmark.Benchmark(
    name='stackoverflow_tags', create_task=task.create_task, models=task.MODELS,
    presets=task.PRESETS,
    data_help=("TFF's cache directory holding stackoverflow.sqlite and "
               "datasets/stackoverflow.{word,tag}_count (default ~/.tff)."),
    batch_size=32)
benchmark.define_flags(BENCHMARK)

if __name__ == '__main__':
  outputs.run(benchmark.main_for(BENCHMARK))
