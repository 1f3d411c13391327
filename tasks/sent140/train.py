r"""Sent140 sentiment classification (seeds 001, 003).

  python -m tasks.sent140.train --preset=paper_003 --output_dir=/tmp/sent140

`--preset` sets every flag you do not give to a paper's setting
(`tasks.sent140.task.PRESETS`) or to `cpu_small`; offline, `python -m
tasks.common.fixtures` writes small files in the source's format to try it on.
"""

from tasks.common import benchmark
from tasks.common import outputs

BENCHMARK = benchmark.define_flags_for('sent140')

if __name__ == '__main__':
  outputs.run(benchmark.main_for(BENCHMARK))
