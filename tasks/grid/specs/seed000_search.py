"""Seed 000 App. B's hyper-parameter search (its Table 4), which chose Table
5's per-cell rates that `seed000_table1` runs.

"For each value of K, η_0, d_η and γ were tested in a grid search, and the
combination of settings that gave the highest test accuracy over the last
500 rounds are presented" (§4.1); for decaying γ, η_0, d_η, γ_0 and d_γ were
searched, for decaying K, η_0, d_η, γ and d_K. Table 4's values:
η_0, γ_0 ∈ {3.0, 1.0, 0.3, 0.1, 0.03, 0.01}, K_0 ∈ {100, 33, 10, 3} and
d_η, d_γ, d_K ∈ {0.9996, 0.999, 0.996, 0.99}. Stack Overflow's server is
FedAdam at a constant η_0 (Table 5's "Adam"), so its d_η axis is Adam alone.

The table reports, per setting, the mean test accuracy over the last 500
rounds (13 evaluations every 40 rounds; top-5 recall on Stack Overflow),
the paper's criterion for constant γ/K, and the highest test accuracy over
the 4,000 rounds, its criterion for the decaying schemes; the best setting
of each (K, scheme) is the paper's choice. The axis `d` is d_γ for
decaying γ and d_K for decaying K ('-' for constant γ/K). One seed a
setting: the paper does not say it searched over several.

Forms: `cpu_small` on digits (K = 3 and 10, two values of each rate and
decay, Table 5's FEMNIST neighbourhood; 60 rounds with every decay rate
rescaled to the horizon as in `seed000_table1`'s `cpu_small`, evaluation
every 5 rounds: 80 runs), and `femnist`, `shakespeare`, `stackoverflow`,
the paper's search (5,184 runs each, 1,296 for Stack Overflow; months of
compute here: hand them to a cluster with `--list`).
"""

import itertools

from tasks.grid import spec
from tasks.grid import summaries
from tasks.grid.specs import seed000_table1
from tff_mixed import keys

RATES = (3.0, 1.0, 0.3, 0.1, 0.03, 0.01)
STEPS = (100, 33, 10, 3)
DECAYS = (0.9996, 0.999, 0.996, 0.99)
NO_DECAY = '-'


def settings(steps, rates, server_decays, decays, horizon_scale=1.0):
  """Every (K, scheme, η_0, d_η, γ_0, d) of the search; a server decay of
  None is FedAdam's constant rate (labelled 'Adam')."""
  rows = []
  for k, scheme in itertools.product(steps, seed000_table1.SCHEMES):
    scheme_decays = (NO_DECAY,) if scheme == 'constant' else decays
    for eta, d_eta, gamma, d in itertools.product(
        rates, server_decays, rates, scheme_decays):
      decay = None if d == NO_DECAY else d
      flags = seed000_table1.cell_flags(
          (eta, d_eta, gamma, decay, decay), scheme, horizon_scale)
      rows.append(spec.Setting(
          (('K', str(k)), ('scheme', scheme), ('eta0', f'{eta:g}'),
           ('d_eta', 'Adam' if d_eta is None else f'{d_eta:g}'),
           ('gamma0', f'{gamma:g}'), ('d', str(d))),
          {'num_local_steps': k, **flags}))
  return rows


def search_spec(name, binary, *, settings_, flags, metric, last):
  accuracy = keys.eval_column(metric)
  return spec.Spec(
      name=name, binary=binary, settings=settings_, seeds=(0,), flags=flags,
      summaries=(
          summaries.Final(accuracy, last=last,
                          label=f'mean test {metric}, last {last} evaluations'),
          summaries.Best(accuracy, label=f'max test {metric}'),
      ),
      curves=((accuracy, 1),), description=__doc__)


_CPU_ROUNDS = 60
FORMS = {
    'cpu_small': search_spec(
        'seed000_search_cpu_small', 'tasks.digits.train',
        settings_=settings((3, 10), (1.0, 0.3), (0.9996, 0.999),
                           (0.9996, 0.999),
                           seed000_table1.PAPER_ROUNDS / _CPU_ROUNDS),
        flags=dict(algorithm='fedavg', rounds=_CPU_ROUNDS, num_clients=30,
                   clients_per_round=10, batch_size=10, eval_every=5,
                   checkpoint_every=20, client_weighting='dataset_size'),
        metric='accuracy', last=2),
    'femnist': search_spec(
        'seed000_search_femnist', 'tasks.femnist.train',
        settings_=settings(STEPS, RATES, DECAYS, DECAYS),
        flags=dict(preset='paper_000', rounds=seed000_table1.PAPER_ROUNDS),
        metric='accuracy', last=13),
    'shakespeare': search_spec(
        'seed000_search_shakespeare', 'tasks.shakespeare.train',
        settings_=settings(STEPS, RATES, DECAYS, DECAYS),
        flags=dict(preset='paper_000', rounds=seed000_table1.PAPER_ROUNDS),
        metric='accuracy', last=13),
    'stackoverflow': search_spec(
        'seed000_search_stackoverflow', 'tasks.stackoverflow_tags.train',
        settings_=settings(STEPS, RATES, (None,), DECAYS),
        flags=dict(preset='paper_000', rounds=seed000_table1.PAPER_ROUNDS),
        metric='recall_at_5', last=13),
}
