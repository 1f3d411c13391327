"""Measurements beside TFF's own: communication sizes (more in later modules)."""

from tff_mixed.metrics import communication
