"""Tasks as `tff.program` data sources, for TFF's program logic.

`tff.learning.programs.train_model` takes a `tff.program.FederatedDataSource`
and keeps its iterator in the program state, serialised with the model. TFF's
`tff.program.DatasetDataSource` serialises the datasets themselves, which fails
for datasets of a task's client function (`cannot pickle 'Graph' object`) and
would checkpoint the data. `TaskDataSource` holds only the round it is at: a
selection is built from the task's client function when asked for, and a
resumed program draws the cohorts an uninterrupted one would.

  data_source = tff_mixed.program.TaskDataSource(task, seed=0)
  await tff.learning.programs.train_model(
      train_process=process, train_data_source=data_source, ...)

`FileProgramStateManager` is TFF's, with old states removed once each
(below). `examples/tff_program.py` is a whole program.
"""

import json
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed.task import Task


class _TaskDataSourceIterator(tff.program.FederatedDataSourceIterator):
  """Selects round after round of a task's clients; see `TaskDataSource`.

  Its state is the number of selections made, so it serialises to a few
  bytes. `from_bytes` needs the task: each `TaskDataSource` makes a subclass
  bound to its task, and TFF's program state managers call `from_bytes` on
  the class of the iterator the new program's data source made.
  """

  _task: Task
  _seed: int
  _federated_type: tff.FederatedType

  def __init__(self, selections: int = 0):
    self._selections = selections

  @property
  def federated_type(self) -> tff.FederatedType:
    return self._federated_type

  def select(self, k: Optional[int] = None) -> list:
    """The next round's cohort: `k` clients' datasets."""
    if k is None or k < 1:
      raise ValueError(f'select needs k >= 1 clients, got {k}.')
    self._selections += 1
    return self._task.cohort(self._seed, self._selections, k)

  def to_bytes(self) -> bytes:
    return json.dumps({'task': self._task.name, 'seed': self._seed,
                       'selections': self._selections}).encode()

  @classmethod
  def from_bytes(cls, buffer: bytes) -> '_TaskDataSourceIterator':
    saved = json.loads(buffer)
    if (saved['task'], saved['seed']) != (cls._task.name, cls._seed):
      raise ValueError(
          f"the saved data iterator is task {saved['task']!r} with seed "
          f"{saved['seed']}, this program's data source task "
          f'{cls._task.name!r} with seed {cls._seed}.')
    return cls(saved['selections'])

  def __eq__(self, other):
    return (type(self) is type(other) and
            self._selections == other._selections)


class TaskDataSource(tff.program.FederatedDataSource):
  """A `Task`'s training clients as a `tff.program.FederatedDataSource`.

  The n-th `select(k)` of an iterator returns the k clients' datasets that
  `tff_mixed.driver.run_experiment` trains on in round n with the same seed
  (`np.random.default_rng([seed, n])` drawing through the task's sampler), so
  a TFF program and our binaries see the same cohorts, and a program resumed
  from its saved state goes on with the cohorts it would have drawn.
  """

  def __init__(self, task: Task, *, seed: int = 0):
    if not isinstance(task, Task):
      raise TypeError(f'task must be a tff_mixed Task, got {type(task)}.')
    element_spec = task.train_dataset_fn(task.train_client_ids[0]).element_spec
    federated_type = tff.FederatedType(
        tff.SequenceType(tff.types.tensorflow_to_type(element_spec)),
        tff.CLIENTS)
    self._federated_type = federated_type
    self._iterator_class = type(
        f'{type(self).__name__}Iterator', (_TaskDataSourceIterator,),
        {'_task': task, '_seed': int(np.int64(seed)),
         '_federated_type': federated_type})

  @property
  def federated_type(self) -> tff.FederatedType:
    return self._federated_type

  def iterator(self) -> tff.program.FederatedDataSourceIterator:
    return self._iterator_class()


class FileProgramStateManager(tff.program.FileProgramStateManager):
  """TFF's `tff.program.FileProgramStateManager`, whose removal of old
  states tolerates one another save removed first.

  `tff.learning.programs.train_model` saves each round's state in a task of
  its own, so two saves can run at once; each then removes the states past
  `keep_total`, and the second to reach a state finds it gone: TFF 0.87
  raises `NotFoundError` in that task, which its program logic logs as a
  traceback (the program goes on). Here a state already removed is what was
  asked for. What this adds to TFF's: that, and nothing else.
  """

  async def _remove(self, version: int) -> None:
    try:
      await super()._remove(version)
    except tf.errors.NotFoundError:
      pass  # Another save's removal got there first.
