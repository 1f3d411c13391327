"""Client groups: many simulated clients in one TFF client value (fast mode).

TFF's runtime costs a few milliseconds per client per round (a dataset
serialised and shipped, several calls on the worker), far more than a small
model's K steps. pfl-research avoids this by training a worker's clients one
after another in one process and summing their updates locally; this module
does the same on TFF's engine, and goes further: a group's clients train all
at once where the model allows (`tff_mixed.templates.vectorised`: their K
steps as one program over weights stacked on a client axis), one after
another otherwise, saying why once (`build_group_training`).

A *group* is one TFF client value: a dataset of one element, its tensors
`OrderedDict(examples=every example of its clients' batches, one batch after
another, one client after another (the model's input structure, each
`[N, ...]`); batch_sizes=each batch's size; client_batch_counts=each
client's number of batches)` (TFF's learning processes take sequences at
CLIENTS). Shipping two such groups of the benchmark workload's 200 clients
to a worker and reading them costs ~15 ms, where the clients' 200 datasets
cost ~115 ms (BENCHMARKS.md, "Vectorised client groups"). `group_arrays`
builds groups from clients held as arrays without any `tf.data` (what
`Task.train_arrays_fn` gives); `group_datasets` from client datasets,
reading each group in one `tf.data` pass on the driver.

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
import dataclasses
import functools
from typing import Any, Optional

from absl import logging
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed import aggregators
from tff_mixed import keys
from tff_mixed.templates import step_loop
from tff_mixed.templates import vectorised

EXAMPLES = vectorised.EXAMPLES
BATCH_SIZES = vectorised.BATCH_SIZES
COUNTS = vectorised.COUNTS
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


def examples_spec(input_spec):
  """The spec of a group's `examples`: `input_spec`, any batch size."""
  return tf.nest.map_structure(
      lambda s: tf.TensorSpec([None] + s.shape[1:].as_list(), s.dtype),
      input_spec)


def group_type(input_spec) -> tff.SequenceType:
  """The TFF type of a group for a model's `input_spec`: a sequence of one
  element, every example of its clients' batches, the batches' sizes and
  each client's batch count."""
  return tff.SequenceType(tff.StructWithPythonType([
      (EXAMPLES, tff.types.tensorflow_to_type(examples_spec(input_spec))),
      (BATCH_SIZES, tff.TensorType(np.int64, [None])),
      (COUNTS, tff.TensorType(np.int64, [None])),
  ], collections.OrderedDict))


def is_group_type(data_type: tff.types.Type) -> bool:
  """Whether `data_type` (a client data type, maybe federated) is a group."""
  if isinstance(data_type, tff.FederatedType):
    data_type = data_type.member
  if not isinstance(data_type, tff.SequenceType):
    return False
  element = data_type.element
  return (isinstance(element, tff.StructType)
          and [n for n, _ in tff.structure.iter_elements(element)]
          == [EXAMPLES, BATCH_SIZES, COUNTS])


def unpack(group):
  """A group's tensors (`OrderedDict`), inside a TF computation."""
  return group.get_single_element()


def group_contents(group) -> collections.OrderedDict:
  """A group's arrays, eagerly (for a look at what a group holds)."""
  return tf.nest.map_structure(lambda t: t.numpy(), unpack(group))


def takes_groups(process) -> bool:
  """Whether a process's `next` takes client groups (built with
  `client_groups`) rather than one dataset per client: what the driver
  checks a run's `client_groups` against."""
  signature = getattr(process.next, 'type_signature', None)
  return signature is not None and is_group_type(signature.parameter[1])


def _num_batches(dataset: tf.data.Dataset) -> int:
  count = int(dataset.cardinality())
  if count == tf.data.INFINITE_CARDINALITY:
    raise ValueError('A client dataset is infinite; client groups need finite '
                     'client datasets (or build with client_groups=None).')
  if count == tf.data.UNKNOWN_CARDINALITY:  # E.g. after filter(): count.
    count = int(dataset.reduce(np.int64(0), lambda n, _: n + 1))
  return count


def _check_num_groups(num_groups) -> None:
  if isinstance(num_groups, bool) or not isinstance(
      num_groups, (int, np.integer)) or num_groups < 1:
    raise ValueError(f'num_groups must be an int >= 1, got {num_groups!r}.')


def _chunks(num_clients: int, num_groups: int) -> list[np.ndarray]:
  """Client i goes to group `i * num_groups // num_clients` (contiguous,
  sizes differing by at most one)."""
  return np.array_split(np.arange(num_clients),
                        min(num_groups, num_clients))


def _group(examples, batch_sizes, counts) -> tf.data.Dataset:
  return tf.data.Dataset.from_tensors(collections.OrderedDict([
      (EXAMPLES, examples),
      (BATCH_SIZES, np.asarray(batch_sizes, np.int64).reshape(-1)),
      (COUNTS, np.asarray(counts, np.int64).reshape(-1)),
  ]))


def group_arrays(clients: Sequence[Any], batch_size: int, num_groups: int
                 ) -> list[tf.data.Dataset]:
  """Groups of clients held as arrays, without `tf.data`.

  Each client is a structure of arrays (the model's input structure), each
  `[n_i, ...]`, its examples in the order it trains on them, batched by
  `batch_size` (the last batch short) as `dataset.batch(batch_size)` would.
  Clients are split into at most `num_groups` groups as `group_datasets`
  splits them.
  """
  _check_num_groups(num_groups)
  if isinstance(batch_size, bool) or not isinstance(
      batch_size, (int, np.integer)) or batch_size < 1:
    raise ValueError(f'batch_size must be an int >= 1, got {batch_size!r}.')
  clients = list(clients)
  groups = []
  for chunk in (_chunks(len(clients), num_groups) if clients else []):
    members = [tf.nest.map_structure(np.asarray, clients[i]) for i in chunk]
    sizes, counts = [], []
    for member in members:
      n = len(tf.nest.flatten(member)[0])
      full, rest = divmod(n, batch_size)
      sizes.extend([batch_size] * full + ([rest] if rest else []))
      counts.append(full + (1 if rest else 0))
    examples = tf.nest.map_structure(
        lambda *parts: np.concatenate(parts, 0), *members)
    groups.append(_group(examples, sizes, counts))
  return groups


def group_datasets(datasets: Sequence[tf.data.Dataset], num_groups: int
                   ) -> list[tf.data.Dataset]:
  """Groups of clients given as batched datasets.

  Client i goes to group `i * num_groups // len(datasets)` (contiguous,
  sizes differing by at most one). Each group's datasets are read on the
  driver in one `tf.data` pass (every batch of every client, one client
  after another); batches keep their sizes.
  """
  _check_num_groups(num_groups)
  datasets = list(datasets)
  groups = []
  for chunk in (_chunks(len(datasets), num_groups) if datasets else []):
    members = [datasets[i] for i in chunk]
    counts = np.array([_num_batches(d) for d in members], np.int64)
    # One client after another (`choose_from_datasets` would do too, and
    # logs a line at INFO each call).
    batches = functools.reduce(lambda a, b: a.concatenate(b), members)
    examples, sizes = _read_batches(batches)
    groups.append(_group(examples, sizes, counts))
  return groups


def _read_batches(batches: tf.data.Dataset):
  """`(examples, batch sizes)` of a dataset of batches, in one pass (a
  ragged batch of every batch: its values the examples, its row lengths
  the batch sizes; dense when the batches have a fixed size)."""
  spec = batches.element_spec
  ragged = batches.map(lambda *b: tuple(tf.nest.flatten(b))).ragged_batch(
      np.iinfo(np.int32).max)

  def nothing(s):  # An empty value of `s`, for an empty group.
    if isinstance(s, tf.RaggedTensorSpec):
      return tf.RaggedTensor.from_row_lengths(
          tf.zeros([0] + s.shape[2:].as_list(), s.dtype),
          tf.zeros([0], s.row_splits_dtype))
    return tf.zeros([0] + s.shape[1:].as_list(), s.dtype)

  empty = tuple(nothing(s) for s in ragged.element_spec)
  everything = ragged.concatenate(tf.data.Dataset.from_tensors(empty)).take(
      1).get_single_element()
  parts, sizes = [], None
  for value in everything:
    if not isinstance(value, tf.RaggedTensor):
      value = tf.RaggedTensor.from_tensor(value)
    parts.append(value.flat_values.numpy())
    sizes = value.row_lengths().numpy()
  return tf.nest.pack_sequence_as(spec, parts), sizes


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
  group = unpack(group)
  buffer = step_loop.BufferedBatches(group[EXAMPLES], group[BATCH_SIZES],
                                     input_spec)
  counts = group[COUNTS]
  start = tf.constant(0, tf.int64)
  for i in tf.range(tf.shape(counts)[0]):
    count = counts[i]
    value = client_fn(buffer.view(start, count))
    totals = tf.nest.map_structure(tf.add, totals, value)
    start += count
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


def build_group_training(model_fn, client_groups, optimizer, client_start,
                         client_finish, build_client_update, input_spec, *,
                         client_weighting, loss_weight, full_gradient,
                         max_clients=None):
  """`train(inputs, weights, group) -> (ClientResult, metrics, uploads)` of
  one group, for the K-step client work's TFF computation.

  `client_start(inputs)` gives what the clients start from
  (`k_step_client_work.ClientStart`), `client_finish(inputs, output)` one
  client's result,
  metrics and uploads from its `step_loop.ClientOutput`; the group's result
  is its clients' weighted mean update with their weight sum, its metrics
  and uploads their sums. Vectorised (`vectorised.build_group_update`)
  where `client_groups.mode` allows and `vectorised.not_vectorisable` finds no
  reason against; else each client in turn with `build_client_update()`'s
  function, logging why once.
  """
  mode = client_groups.mode
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
      start = client_start(inputs)

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
          optimizer, start.hparams, inputs[keys.NUM_LOCAL_STEPS], weights,
          group, start.augmenting_gradient, start.optimizer_state, reduce_fn,
          start.step_gradient)
      update_sum, weight, metrics, uploads = sums
      metrics = collections.OrderedDict(metrics)
      for name, value in model_metrics.items():
        metrics[name] = tf.nest.map_structure(tf.add, metrics[name], value)
      return _group_result(update_sum, weight, metrics, uploads)

    return train_group(inputs, weights, group)

  return train
