"""Writes a tiny CelebA database in the format TFF's loader reads.

`tff.simulation.datasets.celeba.load_data` opens `<cache_dir>/celeba.sqlite`
(see `tests.tff_sqlite`) holding `tf.Example`s with an 84x84x3 int64 `image`
and one int64 feature per attribute.
"""

import os

import numpy as np

from tasks.common import fixtures
from tests import tff_sqlite

TRAIN, TEST = fixtures.CELEBA_SPLITS


def write(cache_dir, clients):
  """`clients`: {(split, client_id): [smiling, ...]}; returns the db path."""
  rng = np.random.default_rng(0)
  return tff_sqlite.write(
      os.path.join(cache_dir, 'celeba.sqlite'),
      {key: [fixtures.celeba_example(rng, smiling) for smiling in labels]
       for key, labels in clients.items()})


# 7 training raw clients (2 composite clients + 1 left over), 2 evaluation.
CLIENTS = {
    (TRAIN, 'c05'): [1, 0, 1],
    (TRAIN, 'c01'): [1, 1],
    (TRAIN, 'c03'): [0, 0, 1],
    (TRAIN, 'c02'): [0],
    (TRAIN, 'c07'): [1, 0],
    (TRAIN, 'c04'): [1, 1, 0],
    (TRAIN, 'c06'): [0, 1],
    (TEST, 'e1'): [1, 0, 0],
    (TEST, 'e2'): [1],
}
