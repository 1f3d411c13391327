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

# TensorFlow's C++ INFO lines (oneDNN, CUDA probing, Grappler's "Starting new
# session" at each compile) would interleave with a binary's progress bar;
# warnings and errors still show. Set before any task imports TensorFlow;
# an explicit TF_CPP_MIN_LOG_LEVEL wins.
_os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '1')
