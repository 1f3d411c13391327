"""Task modules and their absl training binaries."""

import os

# TensorFlow's C++ INFO lines drown the binaries' own output.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
