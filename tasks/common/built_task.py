"""`BuiltTask`: what a task's build function returns (`task_registry`)."""

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Optional

import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed.task import Task


@dataclasses.dataclass(frozen=True)
class BuiltTask:
  """A task as a run trains it.

  Attributes:
    task: The `Task`.
    central_data_fn: Mixed FL's central (datacentre) data, batched, or None
      (the task has none with these arguments).
    process_fn: For a task that builds its own process for this algorithm
      (MovieLens's selected rows), `process_fn()`; None: the algorithm
      registry's (`registry.build_process`).
    run_needs: Fields of the run (`run_config.RunConfig`) or of its
      execution (`run_config.Execution`) that process needs at one value:
      field -> (value, why), refused in one line when the run says
      otherwise.
  """
  task: Task
  central_data_fn: Optional[Callable[[], tf.data.Dataset]] = None
  process_fn: Optional[
      Callable[[], tff.learning.templates.LearningProcess]] = None
  run_needs: Mapping[str, tuple[Any, str]] = dataclasses.field(
      default_factory=dict)


def with_central_examples(
    task: Task, examples_fn: Callable[[], tf.data.Dataset], *,
    batch_size: int, shuffle_buffer: int, seed: int) -> BuiltTask:
  """`task` with central data: `examples_fn`'s examples shuffled (a buffer
  of `shuffle_buffer`, from `seed`) and batched (a task's central
  arguments)."""
  return BuiltTask(task, lambda: examples_fn().shuffle(
      shuffle_buffer, seed=seed).batch(batch_size))
