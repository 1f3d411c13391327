"""Shared process parts the algorithm builders compose.

Layers, bottom up: `common` (argument checks, optimizers, weights,
aggregators); `step_loop` (the one `tf.function` step loop);
`k_step_client_work` with `client_extensions` and `scheduled_client_work`
(the client side); `mixed_fl_step` (the mixed-FL server maths);
`composers` (processes with a server-side step). `tff_mixed.algorithms`
builds on these and never on each other.
"""

from tff_mixed.templates.client_extensions import AugmentingGradient
from tff_mixed.templates.client_extensions import ClientExtension
from tff_mixed.templates.client_extensions import FirstGradientMean
from tff_mixed.templates.client_extensions import GlobalOptimizerState
from tff_mixed.templates.client_groups import ClientGroups
from tff_mixed.templates.composers import compose_with_server_step
from tff_mixed.templates.composers import ServerStep
from tff_mixed.templates.k_step_client_work import build_k_step_client_work
from tff_mixed.templates.scheduled_client_work import with_schedules
from tff_mixed.templates.step_loop import build_k_step_update
from tff_mixed.templates.step_loop import DATASET_SIZE
from tff_mixed.templates import vectorisable
from tff_mixed.templates import vectorised
