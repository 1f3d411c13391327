"""examples/mixed_fl.ipynb runs top to bottom (so it cannot rot).

The code cells run in order in one fresh Python process, as a kernel would
run them. (A Jupyter kernel via nbclient is not used: the jupyter stack needs
a newer typing_extensions than TFF 0.87 pins.)
"""

import os
import subprocess
import sys

import nbformat

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_mixed_fl_notebook_executes():
  notebook = nbformat.read(
      os.path.join(ROOT, 'examples', 'mixed_fl.ipynb'), as_version=4)
  source = '\n\n'.join(
      cell.source for cell in notebook.cells if cell.cell_type == 'code')
  result = subprocess.run(
      [sys.executable, '-c', source], cwd=ROOT, capture_output=True,
      text=True, timeout=600,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  assert 'round 3: client loss' in result.stdout
  assert 'eval accuracy (all labels):' in result.stdout
