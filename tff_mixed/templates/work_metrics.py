"""The K-step client work's metrics and measurements, assembled once.

`build_k_step_client_work` and the selected-rows process
(`tff_mixed.algorithms.selected_rows`) report the same measurements: the
model's metrics plus `sgd_steps`, `first_step_loss`, the client counts and
the FLOPs, which ride in the metrics' one federated sum, then the bytes.
"""

import collections

import tensorflow as tf

from tff_mixed import keys
from tff_mixed import models
from tff_mixed.templates import step_loop


def work_finalizers(model, *, flops: bool) -> collections.OrderedDict:
  """The model's metric finalizers plus the client work's own.

  `sgd_steps`, `first_step_loss`, the client counts and (with `flops`)
  `client_flops_per_client` ride in the metrics' one federated sum: in TFF's C++ runtime every
  separate federated_sum costs a pass over the cohort.
  """
  finalizers = collections.OrderedDict(models.metric_finalizers(model))
  for name in (keys.SGD_STEPS, keys.FIRST_STEP_LOSS, keys.CLIENT_FLOPS) + keys.CLIENT_COUNTS:
    if name in finalizers:
      raise ValueError(f'The model has a metric named {name!r}; rename it.')
  final = lambda fn: tf.function(fn, autograph=False)
  finalizers[keys.SGD_STEPS] = final(lambda steps: steps[0])
  for name in keys.CLIENT_COUNTS:
    finalizers[name] = final(lambda count: count[0])
  finalizers[keys.FIRST_STEP_LOSS] = final(
      lambda loss_and_count: loss_and_count[0] / loss_and_count[1])
  if flops:
    finalizers[keys.CLIENT_FLOPS] = final(
        lambda sum_and_count: tf.math.divide_no_nan(*sum_and_count))
  return finalizers


def pop_client_counts(metrics) -> collections.OrderedDict:
  """Removes the client counts from finalized `metrics`; returns them."""
  return collections.OrderedDict(
      (name, metrics.pop(name)) for name in keys.CLIENT_COUNTS)


def work_measurements(metrics, round_state, costs) -> collections.OrderedDict:
  """The K-step client work's measurements (see `build_k_step_client_work`).

  One assembly, also the selected-rows process's: `metrics` are the
  finalized `work_finalizers` metrics, `round_state` the client-work state
  the clients trained with (its K and learning rate), `costs` the bytes and
  FLOPs per client (an `OrderedDict`, placed after the counts).
  """
  metrics = collections.OrderedDict(metrics)
  measurements = collections.OrderedDict([(keys.TRAIN, metrics)])
  measurements[keys.NUM_LOCAL_STEPS] = round_state[keys.NUM_LOCAL_STEPS]
  hparams = round_state[keys.OPTIMIZER_HPARAMS]
  if keys.LEARNING_RATE in hparams:
    measurements[keys.CLIENT_LEARNING_RATE] = tf.cast(
        hparams[keys.LEARNING_RATE], tf.float32)
  measurements[keys.SGD_STEPS] = metrics.pop(keys.SGD_STEPS)
  measurements[keys.FIRST_STEP_LOSS] = metrics.pop(keys.FIRST_STEP_LOSS)
  measurements[keys.CLIENTS] = pop_client_counts(metrics)
  measurements.update(costs)
  if keys.CLIENT_FLOPS in metrics:
    measurements[keys.CLIENT_FLOPS] = metrics.pop(keys.CLIENT_FLOPS)
  return measurements


def work_metrics(output: step_loop.ClientOutput, flops_per_step=None, *,
                 extra_flops=()) -> collections.OrderedDict:
  """A client's unfinalized metrics for `work_finalizers`.

  `first_step_loss` averages over clients that trained; FLOPs are the steps
  times `flops_per_step` at the client's mean batch size, plus `extra_flops`.
  """
  kept = tf.cast(output.result.update_weight > 0, tf.int32)
  trained = tf.cast(output.sgd_steps * kept > 0, tf.float32)
  metrics = collections.OrderedDict(output.metrics)
  # A dropped client's steps are discarded with its update: FedGBO and 2-way
  # GT divide by the steps that made the round's mean update.
  metrics[keys.SGD_STEPS] = [output.sgd_steps * kept]
  metrics[keys.FIRST_STEP_LOSS] = [output.first_loss * trained, trained]
  took_steps = tf.cast(output.sgd_steps > 0, tf.int32)
  metrics[keys.PARTICIPATING] = [kept]
  metrics[keys.EMPTY] = [1 - took_steps]
  metrics[keys.DROPPED_NON_FINITE] = [took_steps * (1 - kept)]
  if flops_per_step is not None:
    steps = tf.cast(output.sgd_steps, tf.float32)
    batch = tf.math.divide_no_nan(
        tf.cast(output.num_examples, tf.float32), steps)
    flops = steps * tf.cast(flops_per_step(batch), tf.float32)
    for extra in extra_flops:
      flops += tf.cast(extra, tf.float32)
    metrics[keys.CLIENT_FLOPS] = [flops, 1.0]
  return metrics
