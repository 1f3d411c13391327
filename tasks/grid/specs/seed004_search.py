"""Seed 004 App. C.4.2's learning rate traded for local steps (Figs. 8-9)
and App. C.4.3's per-algorithm learning rates (Fig. 10).

Figs. 8 (smile classification) and 9 (language model) vary "client
learning rate η (and central learning rate η_c) ... inversely
proportionally ... with K" for each mixed FL algorithm, 5 trials each with
95% intervals; "reducing these learning rates, and making a corresponding
increase in the number of steps, is beneficial. It never hurts
convergence, and often helps." The figures' own (η, K) pairs were lost in
extraction: these forms take the task's paper values (η_0, K_0) and
(η_0 / f, f K_0) for f = 1, 2, 4 (η_c follows η, the binaries' default).
Fig. 10 trains the language model at K = 16 with η = 3.0 for Parallel
Training and 1-way Gradient Transfer and η = 1.0 for 2-way ("2-way
Gradient Transfer tends to diverge when learning rate η was increased
beyond 1.0"), to 2,000 rounds.

The table reports the final evaluation loss and metric; the plot, the
evaluation loss per round with a 95% band (the figures' panels).

Forms: `cpu_small` on CelebA's synthetic stand-in (`--preset=cpu_small`, f
= 1 and 2), `celeba` (Fig. 8: K_0 = 2, η_0 = 0.01, 1,000 rounds),
`stackoverflow_wiki` (Fig. 9: K_0 = 16, η_0 = 2.0, and 1.0 for 2-way GT,
2,000 rounds) and `stackoverflow_wiki_fig10`, all over 5 seeds.
"""

from tasks.grid import spec
from tasks.grid import summaries
from tasks.grid.specs import seed004_tasks
from tff_mixed import keys

MIXED = {name: flags for name, flags in seed004_tasks.ALGORITHMS.items()
         if name in ('PT', '1-way GT', '2-way GT')}
FACTORS = (1, 2, 4)


def traded(k0, rates, factors):
  """Settings of each mixed FL algorithm at (η_0 / f, f K_0); `rates` maps
  an algorithm to its η_0."""
  return spec.cross(
      ('algorithm', MIXED),
      ('f', {str(f): {} for f in factors}),
      cell=lambda labels: dict(
          num_local_steps=k0 * int(labels['f']),
          client_learning_rate=rates[labels['algorithm']]
          / int(labels['f'])))


def search_spec(name, binary, settings, *, flags, metric):
  loss = keys.eval_column(keys.path('all', 'loss'))
  return spec.Spec(
      name=name, binary=binary, settings=settings, seeds=(0, 1, 2, 3, 4),
      flags=flags,
      summaries=(
          summaries.Final(loss, label='eval loss'),
          summaries.Final(keys.eval_column(keys.path('all', metric)),
                          label=f'eval {metric}')),
      curves=((loss, 1),), description=__doc__)


_CELEBA_RATES = {name: 0.01 for name in MIXED}
_LM_RATES = {'PT': 2.0, '1-way GT': 2.0, '2-way GT': 1.0}
FORMS = {
    'cpu_small': search_spec(
        'seed004_search_cpu_small', 'tasks.celeba.train',
        traded(2, _CELEBA_RATES, (1, 2)),
        flags=dict(preset='cpu_small', use_synthetic_data=True, rounds=5,
                   eval_every=1, checkpoint_every=5),
        metric='auc'),
    'celeba': search_spec(
        'seed004_search_celeba', 'tasks.celeba.train',
        traded(2, _CELEBA_RATES, FACTORS),
        flags=dict(preset='paper', rounds=1000, eval_every=50),
        metric='auc'),
    'stackoverflow_wiki': search_spec(
        'seed004_search_stackoverflow_wiki', 'tasks.stackoverflow_wiki.train',
        traded(16, _LM_RATES, FACTORS),
        flags=dict(preset='paper', rounds=2000, eval_every=50),
        metric='accuracy'),
    'stackoverflow_wiki_fig10': search_spec(
        'seed004_search_stackoverflow_wiki_fig10',
        'tasks.stackoverflow_wiki.train',
        spec.cross(('algorithm', {
            name: {**flags, 'client_learning_rate': 1.0 if name == '2-way GT'
                   else 3.0} for name, flags in MIXED.items()})),
        flags=dict(preset='paper', rounds=2000, eval_every=50,
                   num_local_steps=16),
        metric='accuracy'),
}
