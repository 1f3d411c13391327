"""The API reference (`make docs`, docs/build_api_reference.py) builds, and
what it is built from cannot rot: every public name of its modules has a
docstring, and every dotted name in backticks, in those modules and in the
docs, names something that exists."""

import importlib
import importlib.util
import inspect
import os
import pkgutil
import re
import warnings

import pdoc.doc

from tests import binaries

_SPEC = importlib.util.spec_from_file_location(
    'build_api_reference',
    os.path.join(binaries.ROOT, 'docs', 'build_api_reference.py'))
reference = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(reference)


def _modules() -> list[str]:
  names = list(reference.MODULES)
  for package in reference.PACKAGES:
    names.append(package)
    names += [m.name for m in pkgutil.walk_packages(
        importlib.import_module(package).__path__, f'{package}.')
              if not any(p.startswith('_') for p in m.name.split('.'))]
  return names


def _undocumented(doc, module) -> list[str]:
  missing = []
  for member in doc.members.values():
    if member.name.startswith('_') or isinstance(member, pdoc.doc.Variable):
      continue
    if member.taken_from[0] != module:  # Imported: documented where made.
      continue
    if not member.docstring.strip():
      missing.append(member.fullname)
    if isinstance(member, pdoc.doc.Class):
      missing += _undocumented(member, module)
  return missing


def test_every_public_name_has_a_docstring():
  missing = []
  for name in _modules():
    doc = pdoc.doc.Module(importlib.import_module(name))
    if not doc.docstring.strip():
      missing.append(f'{name} (the module)')
    missing += _undocumented(doc, name)
  assert not missing, missing


def _resolves(dotted: str) -> bool:
  parts = dotted.split('.')
  for i in range(len(parts), 0, -1):
    try:
      target = importlib.import_module('.'.join(parts[:i]))
    except ImportError:
      continue
    for part in parts[i:]:
      if not hasattr(target, part):
        return False
      target = getattr(target, part)
    return True
  return False


# A dotted name that ends where the name does (not `build_...`, a pattern).
_DOTTED = re.compile(r'`((?:tff_mixed|tasks)(?:\.[A-Za-z_]\w*)+)(?=[`(\[\s,])')


def test_every_dotted_name_in_backticks_resolves():
  """`tff_mixed.x.y` / `tasks.x.y` in the reference's docstrings and in
  README and docs/*.md name a module, or an attribute of one (a binary
  named as a module, `tasks.digits.train`, resolves as one: only imported
  as a name, never run)."""
  texts = {name: inspect.getsource(importlib.import_module(name))
           for name in _modules()}
  for page in ['README.md'] + sorted(
      os.path.join('docs', f) for f in os.listdir(
          os.path.join(binaries.ROOT, 'docs')) if f.endswith('.md')):
    with open(os.path.join(binaries.ROOT, page)) as f:
      texts[page] = f.read()
  broken = sorted({(where, dotted) for where, text in texts.items()
                   for dotted in _DOTTED.findall(text)
                   if not _exists(dotted)})
  assert not broken, broken


def _exists(dotted: str) -> bool:
  """A module that exists (found, not imported: importing a binary defines
  its flags) or an attribute of an importable one."""
  parts = dotted.split('.')
  for i in range(len(parts), 0, -1):
    module = '.'.join(parts[:i])
    try:
      found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
      found = False
    if not found:
      continue
    if i == len(parts):
      return True
    return _resolves(dotted)
  return False


def test_the_reference_builds_with_a_page_per_module(tmp_path):
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    reference.build(str(tmp_path))
  from_pdoc = [str(w.message) for w in caught
               if 'pdoc' in (w.filename or '')]
  assert not from_pdoc, from_pdoc
  assert (tmp_path / 'index.html').exists()
  # A page for each module a researcher calls (pdoc folds the schedules'
  # and a few packages' private-by-layout submodules into their package).
  for name in [*reference.MODULES, *(f'tff_mixed.{m}' for m in (
      'aggregators', 'algorithms', 'driver', 'execution', 'group_data',
      'keys', 'metrics', 'models', 'optimizers', 'program', 'runtimes',
      'schedules', 'task', 'templates'))]:
    assert (tmp_path / (name.replace('.', '/') + '.html')).exists(), name
