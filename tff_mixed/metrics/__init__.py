"""Measurements beside TFF's own: communication sizes, gradient dissimilarity,
simulated runtime, seed 003's computation and communication (MovieLens's Table 5
forms live with their task, `tasks.movielens.cost`)."""

from tff_mixed.metrics import adaptive_fl_cost
from tff_mixed.metrics import communication
from tff_mixed.metrics import dissimilarity
from tff_mixed.metrics import niid
from tff_mixed.metrics import runtime
from tff_mixed.metrics.dissimilarity import recommend_mixing
