"""The papers' tables as grid specs: each module's `FORMS` maps a form name
('cpu_small', and the paper's by task) to a `tasks.grid.spec.Spec`."""

import pkgutil


def names() -> list[str]:
  """The shipped spec modules (`--spec=<name>`)."""
  return sorted(m.name for m in pkgutil.iter_modules(__path__))
