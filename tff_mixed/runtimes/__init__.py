"""Runtimes a process runs on: TFF's workers (`workers`, driven by
`tff_mixed.execution`), in process (`in_process`) or on Ray actors
(`ray_runtime`, with `ray_session` for Ray itself; imported on first use, so
that nothing imports Ray unless asked).

`tff_mixed.execution.set_runtime(name)` installs one; see docs/execution.md,
"Runtimes".
"""

from tff_mixed.runtimes.in_process import InProcessContext
from tff_mixed.runtimes.in_process import UnsupportedComputationError
