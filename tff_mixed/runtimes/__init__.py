"""Runtimes a process runs on: TFF's workers (`workers`, driven by
`tff_mixed.execution`) or in process (`in_process`).

`tff_mixed.execution.set_runtime(name)` installs one; see docs/execution.md,
"Runtimes".
"""

from tff_mixed.runtimes.in_process import InProcessContext
from tff_mixed.runtimes.in_process import UnsupportedComputationError
