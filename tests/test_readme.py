"""Every Python block of the README runs as written (issue 19).

The blocks run in order in one namespace, as a reader pasting them into one
session would, in a fresh interpreter; the only change is that `/tmp/...`
output directories point into the test's temporary directory.
"""

import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_RUN_BLOCKS = r'''
import re, sys
readme, tmp = sys.argv[1], sys.argv[2]
blocks = re.findall(r'^```python\n(.*?)^```$', open(readme).read(),
                    re.MULTILINE | re.DOTALL)
namespace = {'__name__': '__readme__'}
try:
  for number, block in enumerate(blocks, start=1):
    code = block.replace("'/tmp/", f"'{tmp}/")
    exec(compile(code, f'README block {number}', 'exec'), namespace)
    print(f'block {number} ran', flush=True)
finally:
  import tff_mixed
  tff_mixed.execution.shutdown()
print(f'{len(blocks)} blocks')
'''


def test_every_python_block_of_the_readme_runs(tmp_path):
  readme = os.path.join(REPO, 'README.md')
  with open(readme) as f:
    expected = len(re.findall(r'^```python$', f.read(), re.MULTILINE))
  result = subprocess.run(
      [sys.executable, '-c', _RUN_BLOCKS, readme, str(tmp_path)], cwd=REPO,
      capture_output=True, text=True, timeout=900,
      env={**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'})
  assert result.returncode == 0, result.stdout[-1000:] + result.stderr[-3000:]
  assert result.stdout.strip().splitlines()[-1] == f'{expected} blocks'
  assert expected >= 9
  # The driver's block wrote its run where the test pointed it.
  assert os.path.exists(tmp_path / 'k_step' / 'metrics.csv')
