"""One TFF execution context (and worker) for the whole test session; the
binaries' forking runner (tests/binaries.py) ends with it."""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
# TensorFlow's own intra-op pool in the tests and the binaries they start:
# one thread a call (`client_loop.share_cores`, the runtime's default) is
# for rounds whose calls run side by side; the suite's two workers run
# single calls too (notebooks, evaluations). One fresh-clone run each: 874 s
# of tests with one thread a call, 845 s with TensorFlow's pool (within this
# machine's noise of each other). Both suites pass: results agree to float
# rounding either way; tests/test_execution.py checks the default in
# processes of its own.
os.environ.setdefault('TF_NUM_INTRAOP_THREADS', '0')

import pytest  # pylint: disable=g-import-not-at-top

from tests import binaries  # pylint: disable=g-import-not-at-top
from tff_mixed import execution  # pylint: disable=g-import-not-at-top


@pytest.fixture(scope='session', autouse=True)
def tff_context():
  worker = execution.set_local_execution_context()
  yield worker
  execution.shutdown()
  binaries.stop()  # The forking runner of the binaries, if one started.


# The longest tests (one to two and a half minutes of a worker each) run
# first: started last, one would keep a worker busy while the other idles.
_LONGEST_FIRST = (
    'tests/test_notebook.py::'
    'test_the_notebooks_execute_and_print_their_shipped_outputs',
    'tests/test_demo.py::test_the_demo_at_two_rounds',
)


def pytest_collection_modifyitems(items):
  items.sort(key=lambda item: item.nodeid not in _LONGEST_FIRST)  # Stable.
