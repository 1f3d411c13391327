"""Algorithm builders; each returns a TFF process."""

from tff_mixed.algorithms.fed_avg import ADAM_VARIANTS
from tff_mixed.algorithms.fed_avg import SEED000_ADAM
from tff_mixed.algorithms.fed_avg import TFF_ADAM

from tff_mixed.algorithms.fed_avg import build_adaptive_fed_opt
from tff_mixed.algorithms.fed_avg import build_fed_adam
from tff_mixed.algorithms.fed_avg import build_fed_avg
from tff_mixed.algorithms.fed_avg import build_fed_prox
from tff_mixed.algorithms.fed_gbo import build_fed_gbo
from tff_mixed.algorithms.fed_gbo import build_mfl
from tff_mixed.algorithms.fed_gbo import build_mimelite
from tff_mixed.algorithms.mixed_fl import build_mixed_fl
from tff_mixed.algorithms.selected_rows import build_selected_rows_mixed_fl
