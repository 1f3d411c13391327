"""Every Python block of the README and of each docs/ page runs as written (issue 19).

Each file's blocks run in order in one namespace, as a reader pasting them into
one session would, in a fresh interpreter per file; the only change is that
`/tmp/...` output directories point into the test's temporary directory.
"""

import glob
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Every file whose Python blocks must run, relative to the repository.
DOCUMENTS = ['README.md'] + sorted(
    os.path.relpath(path, REPO)
    for path in glob.glob(os.path.join(REPO, 'docs', '*.md')))

# At least this many Python blocks per file (a sanity check that the blocks
# are found), and in all.
MIN_BLOCKS = {
    'README.md': 1,             # the quick start
    'docs/mixed_fl.md': 3,      # setup, build_mixed_fl, selected rows
    'docs/decaying_k.md': 3,    # setup, schedules, EvalPlateau with the driver
    'docs/adaptive_fl.md': 2,   # setup, build_fed_gbo
    'docs/execution.md': 2,     # setup, fast mode
    'docs/binaries.md': 2,      # setup, the algorithm registry
    'docs/niid.md': 1,          # the measures
}
MIN_TOTAL_BLOCKS = 14

# Files a document's blocks write under the test's temporary directory.
OUTPUTS = {
    # The driver's block wrote its run where the test pointed it.
    'docs/decaying_k.md': ['k_step/metrics.csv'],
}

_BLOCK = re.compile(r'^```python\n(.*?)^```$', re.MULTILINE | re.DOTALL)

_RUN_BLOCKS = r'''
import re, sys
document, name, tmp = sys.argv[1], sys.argv[2], sys.argv[3]
blocks = re.findall(r'^```python\n(.*?)^```$', open(document).read(),
                    re.MULTILINE | re.DOTALL)
namespace = {'__name__': '__readme__'}
try:
  for number, block in enumerate(blocks, start=1):
    code = block.replace("'/tmp/", f"'{tmp}/")
    exec(compile(code, f'{name} block {number}', 'exec'), namespace)
    print(f'block {number} ran', flush=True)
finally:
  import tff_mixed
  tff_mixed.execution.shutdown()
print(f'{len(blocks)} blocks')
'''


def _count_blocks(name):
  with open(os.path.join(REPO, name)) as f:
    text = f.read()
  expected = len(re.findall(r'^```python$', text, re.MULTILINE))
  # Every opening fence is matched by the extraction the runner uses.
  assert len(_BLOCK.findall(text)) == expected, name
  return expected


def test_the_documents_hold_enough_python_blocks():
  for name in MIN_BLOCKS:
    assert name in DOCUMENTS, f'{name} is missing'
  counts = {name: _count_blocks(name) for name in DOCUMENTS}
  for name, minimum in MIN_BLOCKS.items():
    assert counts[name] >= minimum, (name, counts[name])
  assert sum(counts.values()) >= MIN_TOTAL_BLOCKS, counts


@pytest.mark.parametrize('name', DOCUMENTS)
def test_every_python_block_runs(name, tmp_path):
  expected = _count_blocks(name)
  assert expected >= MIN_BLOCKS.get(name, 0)
  if not expected:
    return  # No Python to run (e.g. a page of commands and tables).
  result = subprocess.run(
      [sys.executable, '-c', _RUN_BLOCKS, os.path.join(REPO, name), name,
       str(tmp_path)], cwd=REPO,
      capture_output=True, text=True, timeout=900,
      env={**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'})
  assert result.returncode == 0, result.stdout[-1000:] + result.stderr[-3000:]
  assert result.stdout.strip().splitlines()[-1] == f'{expected} blocks'
  for output in OUTPUTS.get(name, []):
    assert os.path.exists(tmp_path / output), output


def _anchors(path):
  """GitHub's anchors of a Markdown file's headings (outside code blocks)."""
  anchors, fenced = set(), False
  with open(path) as f:
    for line in f:
      if line.startswith('```'):
        fenced = not fenced
      elif not fenced and re.match(r'#{1,6} ', line):
        title = line.lstrip('#').strip().lower()
        anchors.add(re.sub(r'[^\w\- ]', '', title).replace(' ', '-'))
  return anchors


@pytest.mark.parametrize('name', DOCUMENTS)
def test_relative_links_point_to_existing_files_and_headings(name):
  path = os.path.join(REPO, name)
  with open(path) as f:
    text = re.sub(r'^```.*?^```$', '', f.read(), flags=re.MULTILINE | re.DOTALL)
  for target in re.findall(r'\]\(([^)\s]+)\)', text):
    if re.match(r'[a-z]+:', target):
      continue  # An external address.
    file, _, anchor = target.partition('#')
    linked = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
    assert os.path.exists(linked), f'{name}: {target}'
    if anchor:
      assert anchor in _anchors(linked), f'{name}: {target}'
