"""Executes a notebook under a real Jupyter kernel and saves its outputs.

  .venv/bin/python examples/run_notebook.py examples/mixed_fl.ipynb

The notebooks ship with their outputs; `tests/test_notebook.py` executes each
again and checks it prints the same, so the shipped outputs cannot go stale.
Rerun this after changing a notebook (or what it prints).
"""

import os
import sys

import nbclient
import nbclient.util
import nbformat


def _client(notebook, path, timeout_seconds, startup_timeout_seconds,
            km=None) -> nbclient.NotebookClient:
  return nbclient.NotebookClient(
      notebook, km=km, timeout=timeout_seconds, kernel_name='python3',
      startup_timeout=startup_timeout_seconds,
      coalesce_streams=True,  # One output per stream: not split by timing.
      resources={'metadata': {'path': os.path.dirname(os.path.abspath(path))}},
  )


def _without_timestamps(notebook):
  for cell in notebook.cells:  # Timestamps only: keeps the diffs to outputs.
    cell.metadata.pop('execution', None)
  return notebook


def execute(path: str, timeout_seconds: int = 600,
            startup_timeout_seconds: int = 600) -> nbformat.NotebookNode:
  """`path`'s notebook executed top to bottom in the kernel `python3` of this
  environment, from the notebook's own directory as Jupyter would.

  The kernel's start-up gets as long as a cell (nbclient's default of 60 s
  is too short on a busy 2-core machine)."""
  notebook = nbformat.read(path, as_version=4)
  _client(notebook, path, timeout_seconds, startup_timeout_seconds).execute()
  return _without_timestamps(notebook)


def execute_in_one_kernel(paths: list[str], timeout_seconds: int = 600,
                          startup_timeout_seconds: int = 600
                          ) -> list[nbformat.NotebookNode]:
  """`execute` of each notebook in turn, in one kernel: the test suite pays
  for starting Python and importing TensorFlow and TFF once. Before each
  notebook after the first the kernel forgets every name (`%reset -f`);
  modules stay imported. A notebook that printed something else in a kernel
  of its own would fail its test, so the shipped outputs (`execute`'s) are
  what a fresh kernel prints."""
  executed, first = [], None
  try:
    for path in paths:
      notebook = nbformat.read(path, as_version=4)
      if first is None:
        first = _client(notebook, path, timeout_seconds,
                        startup_timeout_seconds)
        first.execute(cleanup_kc=False)
      else:
        reset = nbformat.v4.new_notebook(
            cells=[nbformat.v4.new_code_cell('%reset -f')])
        for run in (reset, notebook):
          client = _client(run, path, timeout_seconds,
                           startup_timeout_seconds, km=first.km)
          client.execute()
          client.kc.stop_channels()
      executed.append(_without_timestamps(notebook))
  finally:
    if first is not None and first.km is not None:
      if first.kc is not None:
        first.kc.stop_channels()
      nbclient.util.run_sync(first.km.shutdown_kernel)(now=True)
  return executed


def printed(notebook: nbformat.NotebookNode) -> list[dict[str, str]]:
  """Per code cell, the text it printed, by stream, and displayed: how the
  kernel split a stream into outputs (a flush timer) does not matter."""
  cells = []
  for cell in notebook.cells:
    if cell.cell_type != 'code':
      continue
    shown = {}
    for output in cell.outputs:
      name = output.get('name', 'display')
      text = output.get('text') or output.get('data', {}).get('text/plain', '')
      shown[name] = shown.get(name, '') + text
    cells.append(shown)
  return cells


def main(paths: list[str]) -> None:
  if not paths:
    sys.exit('usage: run_notebook.py NOTEBOOK.ipynb ...')
  for path in paths:
    nbformat.write(execute(path), path)
    print(f'{path}: executed, outputs saved.')


if __name__ == '__main__':
  main(sys.argv[1:])
