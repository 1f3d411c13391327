"""Every Python block of the README and of each docs/ page runs as written (issue 19).

Each file's blocks run in order in one namespace, as a reader pasting them into
one session would (one interpreter runs every file, each in a namespace of its
own); the only change is that `/tmp/...` output directories point into the
test's temporary directory.
"""

import glob
import json
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
    'docs/binaries.md': 3,      # setup, the algorithm registry, your own parts
    'docs/niid.md': 1,          # the measures
}
MIN_TOTAL_BLOCKS = 15

# Files a document's blocks write under the test's temporary directory.
OUTPUTS = {
    # The driver's block wrote its run where the test pointed it.
    'docs/decaying_k.md': ['k_step/metrics.csv'],
}

_BLOCK = re.compile(r'^```python\n(.*?)^```$', re.MULTILINE | re.DOTALL)

# One interpreter runs every document (TF and TFF start once), each in a
# namespace of its own, as a reader would paste it into a fresh session.
_RUN_ALL = r'''
import json, os, re, sys, traceback
tmp, names = sys.argv[1], sys.argv[2:]
import tff_mixed
results = {}
for name in names:
  with open(name) as f:
    blocks = re.findall(r'^```python\n(.*?)^```$', f.read(),
                        re.MULTILINE | re.DOTALL)
  out = os.path.join(tmp, name.replace('/', '_'))
  namespace = {'__name__': '__readme__'}
  try:
    for number, block in enumerate(blocks, start=1):
      code = block.replace("'/tmp/", f"'{out}/")
      exec(compile(code, f'{name} block {number}', 'exec'), namespace)
    results[name] = {'ran': len(blocks)}
  except BaseException:  # pylint: disable=broad-except
    results[name] = {'error': traceback.format_exc()[-3000:]}
  finally:
    tff_mixed.execution.shutdown()
print('RESULTS ' + json.dumps(results))
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


@pytest.fixture(scope='module')
def ran(tmp_path_factory):
  """Every document's blocks, run: (results by document, output dir)."""
  tmp = tmp_path_factory.mktemp('documents')
  result = subprocess.run(
      [sys.executable, '-c', _RUN_ALL, str(tmp), *DOCUMENTS], cwd=REPO,
      capture_output=True, text=True, timeout=1200,
      env={**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'})
  lines = [line for line in result.stdout.splitlines()
           if line.startswith('RESULTS ')]
  assert result.returncode == 0 and lines, result.stderr[-3000:]
  return json.loads(lines[-1][len('RESULTS '):]), tmp


@pytest.mark.parametrize('name', DOCUMENTS)
def test_every_python_block_runs(name, ran):
  results, tmp = ran
  assert 'error' not in results[name], results[name].get('error')
  assert results[name]['ran'] == _count_blocks(name)
  for output in OUTPUTS.get(name, []):
    path = os.path.join(tmp, name.replace('/', '_'), output)
    assert os.path.exists(path), output


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
