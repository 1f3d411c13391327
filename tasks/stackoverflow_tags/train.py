r"""Stack Overflow tag prediction (seed 000).

  python -m tasks.stackoverflow_tags.train --preset=paper_000 \
      --output_dir=/tmp/stackoverflow_tags

`--preset` sets every flag you do not give to a paper's setting
(`tasks.stackoverflow_tags.task.PRESETS`) or to `cpu_small`; offline, `python -m
tasks.common.fixtures` writes small files in the source's format to try it on.
"""

from tasks.common import binary
from tasks.common import command
from tasks.common import task_registry

main = binary.main_for('stackoverflow_tags',
                       runs=task_registry.runs('stackoverflow_tags'))

if __name__ == '__main__':
  command.run(main)
