"""Seed 004 §5.1's label skew: FL only, Parallel Training, 1-way and 2-way
Gradient Transfer, and the centralised oracle, over seeds.

Clients hold some labels, the datacentre the rest; evaluation covers all
labels and each side of the skew (`eval/all/`, `eval/clients/`,
`eval/central/`). The table reports, per run, the final accuracy on each,
and the rounds until the accuracy on all labels reaches `target`. Mixed FL
weighs the federated and central losses equally (w_f = w_c = 0.5) and
takes J = K central steps; central batches follow App. C.2's rubric: 100
examples for PT and 2-way GT, 1000 for 1-way GT (whose one central batch a
round is the gradient every client step adds). The oracle trains on all
training data pooled (`tasks.common.oracle`).

Forms: `cpu_small` is the digits setting of `make demo` (clients hold 0-4,
the datacentre 5-9; 100 clients, 10 a round, K = 10, γ = 0.1, 30 rounds),
over 5 seeds; `make demo` shows one seed of it with the sampled G̃² and B̃².
The paper's tasks (CelebA, Stack Overflow + Wikipedia, MovieLens) have their
own binaries and `tasks.movielens.table` (docs/mixed_fl.md).
"""

from tasks.grid import spec
from tasks.grid import summaries
from tff_mixed import keys

RUNS = {
    'FL only': dict(algorithm='fedavg'),
    'PT': dict(algorithm='parallel_training', central_batch_size=100),
    '1-way GT': dict(algorithm='one_way_gradient_transfer',
                     central_batch_size=1000),
    '2-way GT': dict(algorithm='two_way_gradient_transfer',
                     central_batch_size=100),
    'oracle': dict(algorithm='oracle'),
}


def label_skew_spec(name, *, client_labels, flags, seeds, target):
  column = lambda group: keys.eval_column(keys.path(group, 'accuracy'))
  return spec.Spec(
      name=name, binary='tasks.digits.train',
      settings=spec.cross(('run', RUNS)), seeds=seeds,
      flags={**flags, 'client_labels': client_labels},
      summaries=(
          summaries.Final(column('all'), label='accuracy (all)'),
          summaries.Final(column('clients'),
                          label="accuracy (clients' labels)"),
          summaries.Final(column('central'), label='accuracy (central labels)'),
          summaries.ToTarget(column('all'), target,
                             label=f'rounds to accuracy {target:g}'),
      ),
      curves=((column('all'), 1),), description=__doc__)


FORMS = {
    'cpu_small': label_skew_spec(
        'seed004_label_skew_cpu_small', client_labels='0,1,2,3,4',
        flags=dict(rounds=30, clients_per_round=10, num_clients=100,
                   num_local_steps=10, client_learning_rate=0.1,
                   eval_every=2, checkpoint_every=30),
        seeds=(0, 1, 2, 3, 4), target=0.85),
}
