"""examples/mixed_fl.ipynb runs top to bottom (so it cannot rot)."""

import os

import nbclient
import nbformat

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_mixed_fl_notebook_executes():
  notebook = nbformat.read(os.path.join(ROOT, 'examples', 'mixed_fl.ipynb'), as_version=4)
  nbclient.NotebookClient(
      notebook, timeout=600, kernel_name='python3',
      resources={'metadata': {'path': ROOT}},
  ).execute()
  outputs = ''.join(
      o.get('text', '') for cell in notebook.cells if cell.cell_type == 'code'
      for o in cell.get('outputs', []))
  assert 'round 3: client loss' in outputs
  assert 'eval accuracy (all labels):' in outputs
