"""Client groups: many simulated clients in one TFF client value (fast mode).

TFF's runtime costs a few milliseconds per client per round (a dataset
serialised and shipped, several calls on the worker), far more than a small
model's K steps. pfl-research avoids this by training a worker's clients one
after another in one process and summing their updates locally; this module
does the same on TFF's engine.

A *group* is one TFF client value, `OrderedDict(client_batches=a dataset of
its clients' batches, one client after another; client_batch_counts=a
dataset of each client's number of batches)`. `group_datasets` describes
groups on the driver without reading any data (the worker runs the
datasets). Inside the TFF computation, `sum_over_clients` reads the group's
batches once into `tf.TensorArray`s (`step_loop.BufferedBatches`) and runs
the faithful mode's per-client function on each client's view of them, in
one `tf.function`, summing what they return.

A group trains all its clients at once where the model allows
(`tff_mixed.templates.vectorised`: the clients' K steps as one program over
weights stacked on a client axis) and one after another otherwise, saying
why once (`build_group_training`).

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
from collections.abc import Callable, Sequence
from typing import Any

from absl import logging
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed import aggregators
from tff_mixed import keys
from tff_mixed.templates import step_loop
from tff_mixed.templates import vectorised

BATCHES = vectorised.BATCHES
COUNTS = vectorised.COUNTS
# How a group trains its clients (`client_groups=` of the builders; True is
# VECTORISED): all at once where the model allows, else one after another;
# or always one after another.
VECTORISED, SEQUENTIAL = 'vectorised', 'sequential'
MODES = (VECTORISED, SEQUENTIAL)


def group_type(input_spec) -> tff.StructWithPythonType:
  """The TFF type of a group for a model's `input_spec`: every client's
  batches in one sequence, and how many batches each client has."""
  return tff.StructWithPythonType([
      (BATCHES, tff.SequenceType(tff.types.tensorflow_to_type(input_spec))),
      (COUNTS, tff.SequenceType(tff.TensorType(np.int64))),
  ], collections.OrderedDict)


def is_group_type(data_type: tff.types.Type) -> bool:
  """Whether `data_type` (a client data type, maybe federated) is a group."""
  if isinstance(data_type, tff.FederatedType):
    data_type = data_type.member
  return (isinstance(data_type, tff.StructType)
          and [n for n, _ in tff.structure.iter_elements(data_type)]
          == [BATCHES, COUNTS])


def takes_groups(process) -> bool:
  """Whether a process's `next` takes client groups (built with
  `client_groups=True`) rather than one dataset per client."""
  signature = getattr(process.next, 'type_signature', None)
  return signature is not None and is_group_type(signature.parameter[1])


def _num_batches(dataset: tf.data.Dataset) -> int:
  count = int(dataset.cardinality())
  if count == tf.data.INFINITE_CARDINALITY:
    raise ValueError('A client dataset is infinite; client groups need finite '
                     'client datasets (or build with client_groups=False).')
  if count == tf.data.UNKNOWN_CARDINALITY:  # E.g. after filter(): count.
    count = int(dataset.reduce(np.int64(0), lambda n, _: n + 1))
  return count


def group_datasets(datasets: Sequence[tf.data.Dataset], num_groups: int
                   ) -> list[collections.OrderedDict]:
  """Splits a cohort's client datasets into at most `num_groups` groups.

  Client i goes to group `i * num_groups // len(datasets)` (contiguous,
  sizes differing by at most one). A group is `OrderedDict(client_batches=
  the clients' batches one client after another, client_batch_counts=
  each client's number of batches)`, two datasets. Nothing is read here: the TFF worker runs the
  datasets, so the driver only describes them (no tracing, no copy).
  """
  if isinstance(num_groups, bool) or not isinstance(num_groups, int) or (
      num_groups < 1):
    raise ValueError(f'num_groups must be an int >= 1, got {num_groups!r}.')
  datasets = list(datasets)
  if not datasets:
    return []
  groups = []
  for chunk in np.array_split(np.arange(len(datasets)),
                              min(num_groups, len(datasets))):
    members = [datasets[i] for i in chunk]
    counts = np.array([_num_batches(d) for d in members], np.int64)
    order = tf.data.Dataset.from_tensor_slices(
        np.repeat(np.arange(len(members), dtype=np.int64), counts))
    groups.append(collections.OrderedDict([
        (BATCHES, tf.data.Dataset.choose_from_datasets(
            members, order, stop_on_empty_dataset=False)),
        (COUNTS, tf.data.Dataset.from_tensor_slices(counts)),
    ]))
  return groups


def sum_over_clients(client_fn: Callable[[Any], Any], group,
                     input_spec) -> tuple[Any, tf.Tensor]:
  """`(sum over the group's clients of client_fn(batches), clients)`.

  `client_fn` gets each client's batches as a `step_loop.BufferedBatches`
  (and must also accept a dataset: its output structure is read from a
  trace on one). Call inside a `tf.function`.
  """
  outputs = tf.function(client_fn).get_concrete_function(
      tf.data.DatasetSpec(input_spec)).structured_outputs
  totals = tf.nest.map_structure(lambda t: tf.zeros(t.shape, t.dtype), outputs)
  buffer = step_loop.BufferedBatches.read(group[BATCHES], input_spec)
  start = tf.constant(0, tf.int64)
  clients = tf.constant(0, tf.int32)
  for count in iter(group[COUNTS]):
    value = client_fn(buffer.view(start, count))
    totals = tf.nest.map_structure(tf.add, totals, value)
    start += count
    clients += 1
  return totals, clients


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
        'client_groups=False (one TFF client per simulated client), or for '
        'DP-FedAvg use tff_mixed.aggregators.gaussian_fixed.')


def check_mode(client_groups) -> str:
  """The group mode of a builder's `client_groups` (True: VECTORISED)."""
  if client_groups is True:
    return VECTORISED
  if client_groups not in MODES:
    raise ValueError(
        f'client_groups must be False, True, {VECTORISED!r} or '
        f'{SEQUENTIAL!r}, got {client_groups!r}.')
  return client_groups


def build_group_training(model_fn, client_groups, optimizer, client_start,
                         client_finish, build_client_update, input_spec, *,
                         client_weighting, loss_weight, full_gradient,
                         max_clients=None):
  """`train(inputs, weights, group) -> (ClientResult, metrics, uploads)` of
  one group, for the K-step client work's TFF computation.

  `client_start(inputs)` gives the clients' `(hparams, augmenting gradient,
  optimizer state)`, `client_finish(inputs, output)` one client's result,
  metrics and uploads from its `step_loop.ClientOutput`; the group's result
  is its clients' weighted mean update with their weight sum, its metrics
  and uploads their sums. Vectorised (`vectorised.build_group_update`)
  where `client_groups` allows and `vectorised.not_vectorisable` finds no
  reason against; else each client in turn with `build_client_update()`'s
  function, logging why once.
  """
  mode = check_mode(client_groups)
  reason = (vectorised.not_vectorisable(model_fn) if mode == VECTORISED
            else None)
  if mode == VECTORISED and reason is None:
    return _vectorised_training(
        model_fn, optimizer, client_start, client_finish,
        client_weighting=client_weighting, loss_weight=loss_weight,
        full_gradient=full_gradient, max_clients=max_clients)
  if reason is not None:
    logging.warning('Client groups train their clients one after another: '
                    '%s.', reason)

  def train(inputs, weights, group):
    client_update = build_client_update()

    @tf.function
    def train_group(inputs, weights, group):
      hparams, augment, start = client_start(inputs)

      def weighted(data):
        output = client_update(optimizer, hparams, inputs[keys.NUM_LOCAL_STEPS],
                               weights, data, augment, start)
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
                         max_clients):
  """`build_group_training`'s vectorised `train`."""

  def train(inputs, weights, group):
    trainable = tuple(weights.trainable)
    if max_clients is None:
      size = lambda t: int(np.prod(np.shape(t), dtype=np.int64))
      state = optimizer.initialize(
          tuple(tf.TensorSpec(t.shape, t.dtype) for t in trainable))
      chunk = vectorised.default_max_clients(
          sum(size(t) for t in trainable),
          sum(size(t) for t in tf.nest.flatten(state)))
    else:
      chunk = max_clients
    group_update = vectorised.build_group_update(
        model_fn, client_weighting=client_weighting, loss_weight=loss_weight,
        full_gradient=full_gradient, max_clients=chunk)

    @tf.function
    def train_group(inputs, weights, group):
      hparams, augment, start = client_start(inputs)

      def reduce_fn(outputs):
        present = {k: v for k, v in outputs._asdict().items()
                   if v is not None}

        def one(fields):
          output = step_loop.ClientOutput(**{
              **{k: None for k in step_loop.ClientOutput._fields},
              **fields, 'metrics': group_update.zero_metrics()})
          result, metrics, uploads = client_finish(inputs, output)
          weight = result.update_weight
          # Identities: pfor cannot return a tensor made outside its loop.
          return tf.nest.map_structure(tf.identity, (
              tf.nest.map_structure(lambda u: weight * u, result.update),
              weight, metrics, uploads))

        per_client = tf.vectorized_map(one, present)
        return tf.nest.map_structure(lambda t: tf.reduce_sum(t, 0),
                                     per_client)

      sums, model_metrics, _ = group_update(
          optimizer, hparams, inputs[keys.NUM_LOCAL_STEPS], weights, group,
          augment, start, reduce_fn)
      update_sum, weight, metrics, uploads = sums
      metrics = collections.OrderedDict(metrics)
      for name, value in model_metrics.items():
        metrics[name] = tf.nest.map_structure(tf.add, metrics[name], value)
      return _group_result(update_sum, weight, metrics, uploads)

    return train_group(inputs, weights, group)

  return train
