r"""FEMNIST character recognition (seeds 000, 001, 003).

  python -m tasks.femnist.train --preset=paper_003 --output_dir=/tmp/femnist

`--preset` sets every flag you do not give to a paper's setting
(`tasks.femnist.task.PRESETS`) or to `cpu_small`; offline, `python -m
tasks.common.fixtures` writes small files in the source's format to try it on.
"""

from tasks.common import binary
from tasks.common import command
from tasks.common import task_registry

main = binary.main_for('femnist', runs=task_registry.runs('femnist'))

if __name__ == '__main__':
  command.run(main)
