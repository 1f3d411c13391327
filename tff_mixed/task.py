"""The task object every training binary hands to the driver."""

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Optional, Union

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed import checks

ModelFn = Callable[[], tff.learning.models.VariableModel]
# (rng, number of clients) -> client ids. The default samples uniformly
# without replacement; a task may sample from its own distribution.
ClientSampler = Callable[[np.random.Generator, int], Sequence[str]]


@dataclasses.dataclass(frozen=True)
class Task:
  """Data and model of one federated task.

  Attributes:
    name: Short name used in logs and output paths.
    model_fn: No-arg callable returning a fresh `VariableModel`.
    train_client_ids: Ids of the training clients.
    train_dataset_fn: Client id -> preprocessed, batched `tf.data.Dataset`.
    eval_dataset_fn: No-arg callable -> batched centralised evaluation data
      (a dataset, or a mapping from names to datasets, e.g. per label or per
      source, each evaluated and logged as `eval/<name>/<metric>`), or None.
    client_sampler: Optional custom sampler (see `ClientSampler`).
    flops_per_example: Optional forward plus backward FLOPs of one training
      example; binaries use it to measure client FLOPs per round (seed 003
      Eq. 22).
  """

  name: str
  model_fn: ModelFn
  train_client_ids: Sequence[str]
  train_dataset_fn: Callable[[str], tf.data.Dataset]
  eval_dataset_fn: Optional[
      Callable[[], Union[tf.data.Dataset, Mapping[str, tf.data.Dataset]]]
  ] = None
  client_sampler: Optional[ClientSampler] = None
  flops_per_example: Optional[float] = None

  def __post_init__(self):
    if isinstance(self.train_client_ids, (str, bytes)):
      raise TypeError(
          f'Task {self.name!r}: train_client_ids must be a sequence of client '
          f'ids, got the string {self.train_client_ids!r}.')
    if not self.train_client_ids:
      raise ValueError(f'Task {self.name!r} has no training clients.')
    checks.check_dataset_fn(self.train_dataset_fn, 'train_dataset_fn',
                            argument='a client id')
    if self.eval_dataset_fn is not None:
      checks.check_dataset_fn(
          self.eval_dataset_fn, 'eval_dataset_fn',
          returns='a tf.data.Dataset or a mapping of them')
    with tf.Graph().as_default():
      input_spec = self.model_fn().input_spec
    data = self.train_dataset_fn(self.train_client_ids[0])
    if not isinstance(data, tf.data.Dataset):
      raise TypeError(f'train_dataset_fn must return a tf.data.Dataset, got a '
                      f'{type(data).__name__}.')
    element_spec = data.element_spec
    input_type = tff.types.tensorflow_to_type(input_spec)
    element_type = tff.types.tensorflow_to_type(element_spec)
    if not input_type.is_assignable_from(element_type):
      raise ValueError(
          f'Task {self.name!r}: client data element spec {element_spec} does '
          f"not match the model's input spec {input_spec}."
      )

  def sample_clients(self, rng: np.random.Generator, num_clients: int) -> list[str]:
    """Draws a cohort of client ids (without replacement by default)."""
    if self.client_sampler is not None:
      return list(self.client_sampler(rng, num_clients))
    if num_clients > len(self.train_client_ids):
      raise ValueError(
          f'clients_per_round={num_clients} exceeds the '
          f'{len(self.train_client_ids)} training clients of {self.name!r}.'
      )
    chosen = rng.choice(len(self.train_client_ids), num_clients, replace=False)
    return [self.train_client_ids[i] for i in chosen]

  # Cohorts are drawn here rather than by TFF's
  # `tff.simulation.build_uniform_sampling_fn` because a task may sample from
  # its own distribution (the quadratic task draws clients z with density
  # ∝ z^-1/2, seed 000 §3); other tasks draw uniformly without replacement,
  # as TFF's does, from an rng seeded by (seed, round).
  def cohort(self, seed: int, round_num: int,
             num_clients: int) -> list[tf.data.Dataset]:
    """Round `round_num`'s cohort of training datasets.

    `np.random.default_rng([seed, round_num])` samples it, so a resumed run
    (or `tff_mixed.program.TaskDataSource`) sees the clients an
    uninterrupted one does.
    """
    rng = np.random.default_rng([seed, round_num])
    return [self.train_dataset_fn(cid)
            for cid in self.sample_clients(rng, num_clients)]
