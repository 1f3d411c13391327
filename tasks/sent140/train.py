r"""Sent140 sentiment classification (seeds 001, 003).

  python -m tasks.sent140.train --preset=paper_003 --output_dir=/tmp/sent140

`--preset` sets every flag you do not give to a paper's setting
(`tasks.sent140.task.PRESETS`) or to `cpu_small`; offline, `python -m
tasks.common.fixtures` writes small files in the source's format to try it on.
"""

from tasks.common import binary
from tasks.common import command
from tasks.common import task_registry

main = binary.main_for('sent140', runs=task_registry.runs('sent140'))

if __name__ == '__main__':
  command.run(main)
