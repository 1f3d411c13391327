"""Task modules and their absl training binaries.

`tasks/<task>/` is one task (data, model, `Task`, binaries); `tasks/common/`
is what every binary shares (the registry and `run`, the training flags,
the entry point and reports, data sources and fixtures); `tasks/grid/` runs grids of settings x
seeds and holds the papers' tables as specs (`tasks/decaying_k.py` and
`tasks/adaptive_fl.py` are two of them under their old names). A binary's entry point,
`tasks.common.command.run(main)`, installs tff_mixed's execution context;
importing a task module installs nothing.
"""
