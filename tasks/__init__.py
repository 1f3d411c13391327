"""Task modules and their absl training binaries."""

import os

# TensorFlow's C++ INFO lines drown the binaries' own output.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

# Replaces TFF's import-time default context (whose worker can outlive the
# process) before anything can start a worker; the worker starts lazily.
from tff_mixed import execution  # pylint: disable=g-import-not-at-top,g-bad-import-order

execution.set_local_execution_context()
