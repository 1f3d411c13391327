"""Measurements beside TFF's own: communication sizes (more in later modules)."""

from tff_mixed.metrics import communication
from tff_mixed.metrics import dissimilarity
from tff_mixed.metrics.dissimilarity import recommend_mixing
