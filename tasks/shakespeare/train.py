r"""Shakespeare next-character prediction (seeds 000, 001, 003).

  python -m tasks.shakespeare.train --preset=paper_003 \
      --output_dir=/tmp/shakespeare

`--preset` sets every flag you do not give to a paper's setting
(`tasks.shakespeare.task.PRESETS`) or to `cpu_small`; offline, `python -m
tasks.common.fixtures` writes small files in the source's format to try it on.
"""

from tasks.common import binary
from tasks.common import command
from tasks.common import task_registry

main = binary.main_for('shakespeare', runs=task_registry.runs('shakespeare'))

if __name__ == '__main__':
  command.run(main)
