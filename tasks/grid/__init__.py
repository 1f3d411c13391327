"""Grids of ordinary runs: settings x seeds, a table with confidence
intervals, and the papers' tables as specs (`python -m tasks.grid`)."""
