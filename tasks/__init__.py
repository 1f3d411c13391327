"""Task modules and their absl training binaries.

`tasks/<task>/` is one task (data, model, `Task`, binaries); `tasks/common/`
is what every binary shares (the registry and `run`, the training flags,
the entry point and reports, data sources and fixtures); `tasks/grid/` runs grids of settings x
seeds and holds the papers' tables as specs (`tasks/decaying_k.py` and
`tasks/adaptive_fl.py` are two of them under their old names). A binary's entry point,
`tasks.common.command.run(main)`, installs tff_mixed's execution context;
importing a task module installs nothing.
"""

import os as _os
import re as _re
import sys as _sys
import threading as _threading

# TensorFlow's C++ INFO lines (oneDNN, CUDA probing, Grappler's "Starting new
# session" at each compile) would interleave with a binary's progress bar;
# warnings and errors still show. Set before any task imports TensorFlow;
# an explicit TF_CPP_MIN_LOG_LEVEL wins.
_os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '1')

# On a machine without CUDA, importing TensorFlow 2.14 prints three ERROR
# lines ("Unable to register cuDNN factory: Attempting to register factory
# for plugin cuDNN when one has already been registered", and cuFFT's and
# cuBLAS's) though nothing is wrong. Those three are dropped as TensorFlow
# is imported; every other byte it writes to stderr is passed on as it
# comes, so a failing import still says why.
_NOISE = _re.compile(rb'Unable to register cu(DNN|FFT|BLAS) factory: '
                     rb'Attempting to register factory for plugin')


def _import_tensorflow_without_noise() -> None:
  if 'tensorflow' in _sys.modules:
    return
  try:
    _sys.stderr.flush()
    saved = _os.dup(2)
  except (OSError, ValueError, AttributeError):  # No stderr to filter.
    import tensorflow  # pylint: disable=g-import-not-at-top,unused-import
    return
  read, write = _os.pipe()

  def forward():
    pending = b''
    while chunk := _os.read(read, 65536):
      *lines, pending = (pending + chunk).split(b'\n')
      kept = b''.join(line + b'\n' for line in lines if not _NOISE.search(line))
      if kept:
        _os.write(saved, kept)
    if pending and not _NOISE.search(pending):
      _os.write(saved, pending)

  forwarder = _threading.Thread(target=forward, daemon=True)
  forwarder.start()
  _os.dup2(write, 2)
  try:
    import tensorflow  # pylint: disable=g-import-not-at-top,unused-import,redefined-outer-name
  finally:
    _sys.stderr.flush()
    _os.dup2(saved, 2)
    _os.close(write)
    forwarder.join()
    _os.close(read)
    _os.close(saved)


_import_tensorflow_without_noise()
