"""The K-step client work and model aggregation every K-step builder
composes (FedAvg and its variants, FedGBO and its baselines, mixed FL).

Written once here: the builder's `model_aggregator` taken the one way
(`client_extensions.model_aggregation`, which may add a client extension
such as DP's clipping), the client work of exactly K steps
(`k_step_client_work.build_k_step_client_work`) with the aggregation's
extensions first and the algorithm's after, and its schedules of K and the
client learning rate (`scheduled_client_work.with_schedules`).
"""

from collections.abc import Sequence
from typing import Any, NamedTuple, Optional

import tensorflow_federated as tff

from tff_mixed import schedules
from tff_mixed.templates import client_extensions
from tff_mixed.templates import client_groups as client_groups_lib
from tff_mixed.templates import k_step_client_work
from tff_mixed.templates import scheduled_client_work


class KStepParts(NamedTuple):
  """A K-step builder's client work and the aggregator of its updates."""
  client_work: tff.learning.templates.ClientWorkProcess
  aggregator: Any  # A `tff.templates.AggregationProcess`.


def k_step_parts(
    model_fn, client_optimizer, update_type, *, model_aggregator,
    client_weighting, client_groups: Optional[client_groups_lib.ClientGroups],
    num_local_steps: schedules.ScheduleOrValue,
    client_learning_rate: Optional[schedules.Schedule],
    metrics_aggregator, extensions: Sequence[Any] = (),
    **work_kwargs) -> KStepParts:
  """The client work of exactly K steps and the model aggregation.

  Args:
    model_fn, client_optimizer: The model and the clients' optimizer.
    update_type: The TFF type of the trainable weights (what is
      aggregated).
    model_aggregator, client_weighting, client_groups: The builder's
      (`client_extensions.model_aggregation`).
    num_local_steps, client_learning_rate: K and the client rate, numbers
      or schedules (`scheduled_client_work.with_schedules`).
    metrics_aggregator: The builder's.
    extensions: The algorithm's client extensions, after the aggregation's.
    **work_kwargs: More of `build_k_step_client_work`'s arguments
      (`flops_per_step`, `loss_weight`).
  """
  aggregation = client_extensions.model_aggregation(
      model_aggregator, update_type, client_weighting=client_weighting,
      client_groups=client_groups)
  client_work = scheduled_client_work.with_schedules(
      k_step_client_work.build_k_step_client_work(
          model_fn, client_optimizer,
          client_weighting=aggregation.client_weighting,
          metrics_aggregator=metrics_aggregator,
          extensions=[*aggregation.extensions, *extensions],
          client_groups=client_groups, **work_kwargs),
      num_local_steps=num_local_steps, learning_rate=client_learning_rate)
  return KStepParts(client_work, aggregation.aggregator)
