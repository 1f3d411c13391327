r"""Sent140 sentiment classification (seeds 001, 003).

  python -m tasks.sent140.train --preset=paper_003 --output_dir=/tmp/sent140

`--preset` sets every flag you do not give to a paper's setting
(`tasks.sent140.task.PRESETS`) or to `cpu_small`; offline, `python -m
tasks.common.fixtures` writes small files in the source's format to try it on.
"""

from absl import flags

from tasks.common import benchmark
from tasks.common import command
from tasks.sent140 import task

BENCHMARK = benchmark.define_flags_for('sent140')
flags.DEFINE_enum(
    'vocabulary', 'all', list(task.VOCABULARIES),
    'Which tweets choose the 5,000 words: all (the kept users\' training and '
    'test tweets, seed 003 §B.2\'s "whole dataset") or train (the training '
    'tweets alone).')

main = benchmark.main_for(BENCHMARK)

if __name__ == '__main__':
  command.run(main)
