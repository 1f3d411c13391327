r"""Shakespeare next-character prediction (seeds 000, 001, 003).

  python -m tasks.shakespeare.train --preset=paper_003 --output_dir=/tmp/shakespeare

`--preset` sets every flag you do not give to a paper's setting
(`tasks.shakespeare.task.PRESETS`) or to `cpu_small`; offline, `python -m
tasks.fixtures` writes small files in the source's format to try it on.
"""

from tasks import benchmark
from tasks import outputs
from tasks.shakespeare import task

BENCHMARK = benchmark.Benchmark(
    name='shakespeare', create_task=task.create_task, models=task.MODELS,
    presets=task.PRESETS,
    data_help=("TFF's cache directory holding shakespeare.sqlite (default "
               "~/.tff)."),
    batch_size=32)
benchmark.define_flags(BENCHMARK)

if __name__ == '__main__':
  outputs.run(benchmark.main_for(BENCHMARK))
