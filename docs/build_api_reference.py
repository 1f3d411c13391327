"""Builds the API reference from the docstrings: `make docs` (or
`python docs/build_api_reference.py OUT_DIR`) writes `OUT_DIR/index.html`.

pdoc (14.7, the newest release whose dependencies the lock already holds:
Jinja2, Pygments, MarkupSafe; 15+ adds markdown2) renders every public
module of `tff_mixed` and the `tasks` modules a researcher calls from code
(the run spec, `run`, the registries, saved runs, grid specs), reading the
docstrings as Google style. The suite builds it and checks that every
public name has a docstring and every dotted name in backticks resolves
(`tests/test_api_reference.py`).
"""

import os
import pathlib
import sys
from collections.abc import Sequence

# The reference: every public module of these (private modules, `_...`,
# left out; `tff_mixed._loopback_bind` is a C shim, not Python).
PACKAGES = ('tff_mixed',)
MODULES = ('tasks.common.run', 'tasks.common.run_spec',
           'tasks.common.run_config', 'tasks.common.registry',
           'tasks.common.task_registry',
           'tasks.common.saved_run', 'tasks.common.built_task',
           'tasks.common.parts', 'tasks.grid.spec', 'tasks.grid.summaries')


def specs() -> list[str]:
  """pdoc's module specifications for the reference."""
  return [*PACKAGES, *(f'!{p}._.*' for p in PACKAGES), *MODULES]


def build(output_directory: str) -> None:
  """Writes the reference's HTML into `output_directory`."""
  # Our modules import TensorFlow, which probes the CPU with a subprocess:
  # pdoc would block it and warn.
  os.environ.setdefault('PDOC_ALLOW_EXEC', '1')
  import pdoc  # pylint: disable=g-import-not-at-top
  import pdoc.render  # pylint: disable=g-import-not-at-top
  pdoc.render.configure(docformat='google', search=True,
                        footer_text='tff_mixed API reference')
  pdoc.pdoc(*specs(), output_directory=pathlib.Path(output_directory))


def main(argv: Sequence[str]) -> None:
  if len(argv) != 2:
    sys.exit(f'usage: {argv[0]} OUT_DIR')
  build(argv[1])
  print(f'API reference: {os.path.join(argv[1], "index.html")}')


if __name__ == '__main__':
  main(sys.argv)
