"""Client groups: many simulated clients in one TFF client value (fast mode).

TFF's runtime costs a few milliseconds per client per round (a dataset
serialised and shipped, several calls on the worker), far more than a small
model's K steps. pfl-research avoids this by training a worker's clients one
after another in one process and summing their updates locally; this module
does the same on TFF's engine, and goes further: a group's clients train all
at once where the model allows (`tff_mixed.templates.vectorised`: their K
steps as one program over weights stacked on a client axis), one after
another otherwise, saying why once (`build_group_training`).

A *group* is one TFF client value holding its clients' batches
(`tff_mixed.group_data`, the data side: `group_arrays`, `group_datasets`).
Shipping two such groups of the benchmark workload's 200 clients to a
worker and reading them costs ~15 ms, where the clients' 200 datasets cost
~115 ms (BENCHMARKS.md, "Vectorised client groups").

Per-client semantics are unchanged: every client starts from the round's
model, takes exactly K steps with its own data cycled, is dropped (weight 0)
if empty or not finite; what a group uploads is the sum over its clients of
what each would have uploaded, except the update itself, which is the group's
weighted mean with the group's weight sum as weight. A weighted mean over
groups is then the weighted mean over clients, so any algorithm whose server
step needs only sums over clients gives the same model (to float rounding).
Aggregators that need each client's value (adaptive clipping, secure
aggregation, quantisation) cannot run on groups; see `check_aggregator`.
DP-FedAvg with fixed clipping can: `tff_mixed.aggregators.gaussian_fixed`
clips in the client work, per client.
"""

import collections
from collections.abc import Callable
import dataclasses
from typing import Any, Optional
import weakref

from absl import logging
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed import aggregators
from tff_mixed import group_data
from tff_mixed import keys
from tff_mixed.templates import client_batches
from tff_mixed.templates import step_loop
from tff_mixed.templates import vectorisable
from tff_mixed.templates import vectorised

# How a group trains its clients (`ClientGroups.mode`): all at once where
# the model allows, else one after another; or always one after another.
VECTORISED, SEQUENTIAL = 'vectorised', 'sequential'
MODES = (VECTORISED, SEQUENTIAL)


@dataclasses.dataclass(frozen=True)
class ClientGroups:
  """Fast mode, as one value: what the builders, `RunConfig`, the driver
  and the binaries' `--client_groups`/`--group_mode` take (None: one TFF
  client per simulated client, faithful mode).

  Attributes:
    count: How many groups each round's cohort is split into (>= 1): the
      driver's split (`Task.cohort_groups`); a process built with any count
      takes any number of groups.
    mode: How a group trains its clients: `VECTORISED` (all at once where
      the model is a `tff_mixed.models.KerasModelFn` that allows it, else
      one after another, saying why once) or `SEQUENTIAL` (always one after
      another). The same model either way, to float rounding.
  """
  count: int = 2
  mode: str = VECTORISED

  def __post_init__(self):
    if (not isinstance(self.count, (int, np.integer))
        or isinstance(self.count, bool) or self.count < 1):
      raise ValueError('ClientGroups.count must be an int >= 1 (the number '
                       f'of groups a cohort is split into), got '
                       f'{self.count!r}.')
    if self.mode not in MODES:
      raise ValueError(f'ClientGroups.mode must be one of {MODES}, got '
                       f'{self.mode!r}.')
    object.__setattr__(self, 'count', int(self.count))


# A run's fast mode unless it says otherwise (`RunConfig`, the binaries' and
# the grid runner's flags): two groups, one per core of a small machine.
# Builders and the driver default to None, a process over one dataset per
# client, as `tff.learning`'s processes take.
DEFAULT = ClientGroups()


def checked(client_groups) -> Optional[ClientGroups]:
  """`client_groups` as builders and the driver take it: None or a
  `ClientGroups`; the values they took before name their replacement."""
  if client_groups is None or isinstance(client_groups, ClientGroups):
    return client_groups
  if client_groups is False or (isinstance(client_groups, (int, np.integer))
                                and client_groups == 0):
    replacement = 'None'
  elif client_groups is True or client_groups == VECTORISED:
    replacement = 'ClientGroups()'
  elif client_groups == SEQUENTIAL:
    replacement = f'ClientGroups(mode={SEQUENTIAL!r})'
  elif isinstance(client_groups, (int, np.integer)) and client_groups > 0:
    replacement = f'ClientGroups({int(client_groups)})'
  else:
    replacement = None
  hint = (f' ({client_groups!r} is now {replacement})' if replacement
          else '')
  raise TypeError(
      'client_groups must be None (one dataset per client) or a '
      f'tff_mixed.templates.client_groups.ClientGroups, got '
      f'{client_groups!r}{hint}.')


def takes_groups(process) -> bool:
  """Whether a process's `next` takes client groups (built with
  `client_groups`) rather than one dataset per client: what the driver
  checks a run's `client_groups` against."""
  signature = getattr(process.next, 'type_signature', None)
  return signature is not None and group_data.is_group_type(
      signature.parameter[1])


def sum_over_clients(client_fn: Callable[[Any], Any], group,
                     input_spec) -> tuple[Any, tf.Tensor]:
  """`(sum over the group's clients of client_fn(batches), clients)`.

  `client_fn` gets each client's batches as a `client_batches.BufferedBatches`
  (and must also accept a dataset: its output structure is read from a
  trace on one). Call inside a `tf.function`.
  """
  outputs = tf.function(client_fn, autograph=False).get_concrete_function(
      tf.data.DatasetSpec(input_spec)).structured_outputs
  totals = tf.nest.map_structure(lambda t: tf.zeros(t.shape, t.dtype), outputs)
  group = group_data.unpack(group)
  buffer = client_batches.BufferedBatches(
      group[group_data.EXAMPLES], group[group_data.BATCH_SIZES], input_spec)
  counts = group[group_data.COUNTS]

  def add_client(i, carry):
    totals, start = carry
    value = client_fn(buffer.view(start, counts[i]))
    return tf.nest.map_structure(tf.add, totals, value), start + counts[i]

  totals, _ = step_loop.loop(tf.shape(counts)[0], add_client,
                             (totals, tf.constant(0, tf.int64)))
  return totals, tf.shape(counts)[0]


def check_aggregator(model_aggregator) -> None:
  """Raises unless `model_aggregator` works on groups' weighted means.

  A group uploads its clients' weighted mean update with their weight sum,
  so a weighted mean over groups equals one over clients; anything that
  looks at single clients' updates (clipping inside the aggregator, TFF's
  DP, secure aggregation, compression, unweighted means) does not.
  `tff_mixed.aggregators.gaussian_fixed` does: the client work clips.
  """
  if model_aggregator is None or isinstance(
      model_aggregator, aggregators.GaussianFixedClipFactory):
    return  # The latter's clipping happens per client, in the client work.
  ok = (type(model_aggregator) is tff.aggregators.MeanFactory  # pylint: disable=unidiomatic-typecheck
        and type(model_aggregator._value_sum_factory)  # pylint: disable=protected-access
        is tff.aggregators.SumFactory
        and type(model_aggregator._weight_sum_factory)  # pylint: disable=protected-access
        is tff.aggregators.SumFactory)
  if not ok:
    raise ValueError(
        f'model_aggregator {type(model_aggregator).__name__} cannot run on '
        'client groups: a group uploads the mean of its clients\' updates, '
        'and this aggregator needs each client\'s update (clipping, DP, '
        'secure aggregation or compression act per client); build with '
        'client_groups=None (one TFF client per simulated client), or for '
        'DP-FedAvg use tff_mixed.aggregators.gaussian_fixed.')


# `vectorisable.not_vectorisable`'s verdict per model function: it traces a
# client's gradient step (0.5-1.5 s), and a notebook or a test module builds
# many processes from one task's model.
_VERDICTS = weakref.WeakKeyDictionary()


def _why_not_vectorised(model_fn) -> Optional[str]:
  try:
    return _VERDICTS[model_fn]
  except (KeyError, TypeError):  # TypeError: not weakly referenceable.
    pass
  reason = vectorisable.not_vectorisable(model_fn)
  try:
    _VERDICTS[model_fn] = reason
  except TypeError:
    pass
  return reason


def build_group_training(model_fn, client_groups, optimizer, client_start,
                         client_finish, build_client_update, input_spec, *,
                         client_weighting, loss_weight, full_gradient,
                         first_gradient, max_clients=None):
  """`train(inputs, weights, group) -> (ClientResult, metrics, uploads)` of
  one group, for the K-step client work's TFF computation.

  `client_start(inputs)` gives what the clients start from
  (`k_step_client_work.ClientStart`), `client_finish(inputs, output)` one
  client's result,
  metrics and uploads from its `step_loop.ClientOutput`; the group's result
  is its clients' weighted mean update with their weight sum, its metrics
  and uploads their sums. Vectorised (`vectorised.build_group_update`)
  where `client_groups.mode` allows and `vectorisable.not_vectorisable` finds no
  reason against; else each client in turn with `build_client_update()`'s
  function, logging why once.
  """
  mode = client_groups.mode
  reason = _why_not_vectorised(model_fn) if mode == VECTORISED else None
  if mode == VECTORISED and reason is None:
    return _vectorised_training(
        model_fn, optimizer, client_start, client_finish,
        client_weighting=client_weighting, loss_weight=loss_weight,
        full_gradient=full_gradient, first_gradient=first_gradient,
        max_clients=max_clients)
  if reason is not None:
    logging.warning('Client groups train their clients one after another: '
                    '%s.', reason)

  def train(inputs, weights, group):
    client_update = build_client_update()

    @tf.function(autograph=False)
    def train_group(inputs, weights, group):
      start = client_start(inputs)

      def weighted(data):
        output = client_update(
            optimizer, start.hparams, inputs[keys.NUM_LOCAL_STEPS], weights,
            data, start.augmenting_gradient, start.optimizer_state,
            start.step_gradient)
        result, metrics, uploads = client_finish(inputs, output)
        weight = result.update_weight
        return (tf.nest.map_structure(lambda u: weight * u, result.update),
                weight, metrics, uploads)

      sums, _ = sum_over_clients(weighted, group, input_spec)
      return _group_result(*sums)

    return train_group(inputs, weights, group)

  return train


def _group_result(update_sum, weight, metrics, uploads):
  update = tf.nest.map_structure(
      lambda u: tf.math.divide_no_nan(u, weight), update_sum)
  return (tff.learning.templates.ClientResult(
      update=update, update_weight=weight), metrics, uploads)


def _vectorised_training(model_fn, optimizer, client_start, client_finish, *,
                         client_weighting, loss_weight, full_gradient,
                         first_gradient, max_clients):
  """`build_group_training`'s vectorised `train`."""

  def train(inputs, weights, group):
    trainable = tuple(weights.trainable)
    if max_clients is None:
      size = lambda t: int(np.prod(np.shape(t), dtype=np.int64))
      state = optimizer.initialize(
          tuple(tf.TensorSpec(t.shape, t.dtype) for t in trainable))
      chunk = vectorisable.default_max_clients(
          sum(size(t) for t in trainable),
          sum(size(t) for t in tf.nest.flatten(state)))
    else:
      chunk = max_clients
    group_update = vectorised.build_group_update(
        model_fn, client_weighting=client_weighting, loss_weight=loss_weight,
        full_gradient=full_gradient, first_gradient=first_gradient,
        max_clients=chunk)

    @tf.function(autograph=False)
    def train_group(inputs, weights, group):
      start = client_start(inputs)

      def one(output):
        result, metrics, uploads = client_finish(
            inputs, output._replace(metrics=group_update.zero_metrics()))
        weight = result.update_weight
        return (tf.nest.map_structure(lambda u: weight * u, result.update),
                weight, metrics, uploads)

      sums, model_metrics, _ = group_update(
          optimizer, start.hparams, inputs[keys.NUM_LOCAL_STEPS], weights,
          group, start.augmenting_gradient, start.optimizer_state, one,
          start.step_gradient)
      update_sum, weight, metrics, uploads = sums
      metrics = collections.OrderedDict(metrics)
      for name, value in model_metrics.items():
        metrics[name] = tf.nest.map_structure(tf.add, metrics[name], value)
      return _group_result(update_sum, weight, metrics, uploads)

    return train_group(inputs, weights, group)

  return train


# What moved to `tff_mixed.group_data` (2026-11-26): the data side of a
# group, below `tff_mixed.task.Task`.
_MOVED = ('EXAMPLES', 'BATCH_SIZES', 'COUNTS', 'examples_spec', 'group_type',
          'is_group_type', 'unpack', 'group_contents', 'group_arrays',
          'group_datasets')


def __getattr__(name):
  if name in _MOVED:
    raise AttributeError(
        f'tff_mixed.templates.client_groups.{name} moved to '
        f'tff_mixed.group_data.{name} (CHANGELOG.md, 2026-11-26).')
  raise AttributeError(
      f'module {__name__!r} has no attribute {name!r}')
