"""The centralised oracle of seed 004 §5: all training data pooled in one place.

Seed 004's figures compare every mixing with an "oracle" trained as if the
federated and the datacentre data were colocated. `pooled_task` turns a
task plus its central data into a one-client task whose client is the
pooled examples, reshuffled every round; `--algorithm=oracle` runs it with
K SGD steps a round (the step budget a round's clients take), each on a
batch of clients_per_round x client batch size examples (the examples a
round's cohort processes per step), at the client learning rate: FedAvg
with one client holding everything is exactly centralised SGD.
"""

from collections.abc import Callable
from typing import Optional

import numpy as np
import tensorflow as tf

from tff_mixed.task import Task

POOLED = 'pooled'


def _examples(dataset: tf.data.Dataset):
  """(one array per flattened tensor holding every example, largest batch)."""
  columns, largest = None, 0
  for batch in dataset.as_numpy_iterator():
    flat = tf.nest.flatten(batch)
    if columns is None:
      columns = [[] for _ in flat]
    for column, tensor in zip(columns, flat):
      column.append(tensor)
    largest = max(largest, len(flat[0]))
  return ([] if columns is None else [np.concatenate(c) for c in columns],
          largest)


def pooled_examples(task: Task,
                    central_data_fn: Optional[Callable[[], tf.data.Dataset]]):
  """(every training client's examples then the central data's, structured
  like the task's batches with leading dimension = examples; the largest
  client batch, the task's B)."""
  datasets = [task.train_dataset_fn(c) for c in task.train_client_ids]
  spec = datasets[0].element_spec
  clients = [_examples(d) for d in datasets]
  largest = max(b for _, b in clients)
  parts = [p for p, _ in clients]
  if central_data_fn is not None:
    parts.append(_examples(central_data_fn())[0])
  parts = [p for p in parts if p]
  if not parts:
    raise ValueError(f'Task {task.name!r} has no training examples to pool.')
  columns = [np.concatenate(c) for c in zip(*parts)]
  return tf.nest.pack_sequence_as(spec, columns), largest


def pooled_task(task: Task,
                central_data_fn: Optional[Callable[[], tf.data.Dataset]],
                clients_per_round: int) -> Task:
  """One client, id `pooled:<seed>`, holding every example of `task`'s
  training clients and of `central_data_fn`, shuffled with that seed (a new
  seed every round) and batched by `clients_per_round` x B, B the largest
  batch of any training client."""
  if clients_per_round < 1:
    raise ValueError(
        f'clients_per_round must be >= 1, got {clients_per_round}.')
  examples, client_batch = pooled_examples(task, central_data_fn)
  count = len(tf.nest.flatten(examples)[0])
  batch_size = clients_per_round * max(client_batch, 1)

  def dataset_fn(cid):
    seed = int(cid.split(':')[1])
    return tf.data.Dataset.from_tensor_slices(examples).shuffle(
        count, seed=seed, reshuffle_each_iteration=False).batch(batch_size)

  return Task(
      name=f'{task.name}_oracle', model_fn=task.model_fn,
      train_client_ids=[f'{POOLED}:0'], train_dataset_fn=dataset_fn,
      eval_dataset_fn=task.eval_dataset_fn,
      client_sampler=lambda rng, n: [f'{POOLED}:{rng.integers(2**31)}'],
      flops_per_example=task.flops_per_example,
      flops_per_step=task.flops_per_step, client_shuffle='none')  # `dataset_fn` reshuffles every round itself.
