"""Seed 000 §3: the 1-D quadratic problem with a continuum of clients."""
