"""Task modules and their absl training binaries.

A binary's entry point, `tasks.outputs.run(main)`, installs tff_mixed's
execution context; importing a task module installs nothing.
"""

import os

# TensorFlow's C++ INFO lines drown the binaries' own output (a default the
# environment can override; it must be set before TensorFlow is imported).
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
