r"""CIFAR-100 image classification (seeds 001, 003).

  python -m tasks.cifar100.train --preset=paper_003 --output_dir=/tmp/cifar100

`--preset` sets every flag you do not give to a paper's setting
(`tasks.cifar100.task.PRESETS`) or to `cpu_small`; offline, `python -m
tasks.common.fixtures` writes small files in the source's format to try it on.
"""

from tasks.common import binary
from tasks.common import command
from tasks.common import task_registry

main = binary.main_for('cifar100', runs=task_registry.runs('cifar100'))

if __name__ == '__main__':
  command.run(main)
