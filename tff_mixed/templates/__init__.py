"""Shared process parts the algorithm builders compose."""

from tff_mixed.templates.k_step_client_work import build_k_step_client_work
from tff_mixed.templates.step_loop import build_k_step_update
