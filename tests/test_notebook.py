"""The notebooks in examples/ run top to bottom under a real Jupyter kernel
and print what they ship with (so neither the code nor the outputs rot).

They run in turn in one kernel (`run_notebook.execute_in_one_kernel`): the
suite starts Python and imports TensorFlow once for all of them."""

import os
import sys

import nbformat

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'examples'))
import run_notebook  # pylint: disable=g-import-not-at-top,wrong-import-position

# Each notebook and a line it must print (its point, beyond the shipped
# outputs, which a refresh would overwrite).
NOTEBOOKS = {
    'decaying_k': 'exponential (seed 000)   K per round: [10  8  7  6  5  4  3  3]',
    'adaptive_fl': 'FedGBO ',
    'niid': 'Omega after 10 rounds',
    'mixed_fl': 'advice: ',
    'aggregation_and_export': 'DP guarantee after 10 rounds: epsilon = 31.3',
    'grids': '| 1 | 0.1569 ± 0.1941 | 0.1 ± 0 |',
}


def _path(name):
  return os.path.join(ROOT, 'examples', f'{name}.ipynb')


def test_every_example_notebook_is_tested():
  on_disk = {name[:-len('.ipynb')]
             for name in os.listdir(os.path.join(ROOT, 'examples'))
             if name.endswith('.ipynb')}
  assert on_disk == set(NOTEBOOKS)


def test_the_notebooks_execute_and_print_their_shipped_outputs():
  """Every notebook, in one test: pytest's workers split a module's tests
  between them, and each would execute every notebook again."""
  executed = run_notebook.execute_in_one_kernel(
      [_path(name) for name in NOTEBOOKS])  # Raises on a cell's error.
  for name, notebook in zip(NOTEBOOKS, executed):
    printed = run_notebook.printed(notebook)
    joined = '\n'.join(''.join(cell.values()) for cell in printed)
    assert NOTEBOOKS[name] in joined, name
    assert not any('Traceback' in text or 'Error' in text or 'WARNING' in text
                   for cell in printed for text in cell.values()), joined
    shipped = nbformat.read(_path(name), as_version=4)
    assert printed == run_notebook.printed(shipped), (
        'the notebook prints something else than it ships with; refresh it: '
        f'.venv/bin/python examples/run_notebook.py examples/{name}.ipynb')
  # The mixed FL notebook prints in every cell but the first and last.
  printed = run_notebook.printed(executed[list(NOTEBOOKS).index('mixed_fl')])
  assert all(''.join(cell.values()) for cell in printed[1:-1])
  assert 'round 3: client loss' in '\n'.join(
      ''.join(cell.values()) for cell in printed)
