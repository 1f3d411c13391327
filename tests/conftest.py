"""One TFF execution context (and worker) for the whole test session; the
binaries' forking runner (tests/binaries.py) ends with it."""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import pytest  # pylint: disable=g-import-not-at-top

from tests import binaries  # pylint: disable=g-import-not-at-top
from tff_mixed import execution  # pylint: disable=g-import-not-at-top


@pytest.fixture(scope='session', autouse=True)
def tff_context():
  worker = execution.set_local_execution_context()
  yield worker
  execution.shutdown()
  binaries.stop()  # The forking runner of the binaries, if one started.
