"""examples/mixed_fl.ipynb runs top to bottom under a real Jupyter kernel
and prints what it ships with (so neither the code nor the outputs rot)."""

import os
import sys

import nbformat

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'examples'))
import run_notebook  # pylint: disable=g-import-not-at-top,wrong-import-position

NOTEBOOK = os.path.join(ROOT, 'examples', 'mixed_fl.ipynb')


def test_mixed_fl_notebook_executes_and_prints_its_shipped_outputs():
  shipped = nbformat.read(NOTEBOOK, as_version=4)
  executed = run_notebook.execute(NOTEBOOK)  # Raises on a cell's error.
  printed = run_notebook.printed(executed)
  assert all(''.join(cell.values()) for cell in printed[1:-1]), (
      'every cell but the first and last prints something')
  joined = '\n'.join(''.join(cell.values()) for cell in printed)
  assert 'round 3: client loss' in joined
  assert 'advice: ' in joined
  assert not any('Traceback' in text or 'Error' in text
                 for cell in printed for text in cell.values())
  assert printed == run_notebook.printed(shipped), (
      'the notebook prints something else than it ships with; refresh it: '
      '.venv/bin/python examples/run_notebook.py examples/mixed_fl.ipynb')
