"""Client groups as data: many simulated clients' batches in one TFF client
value (fast mode, `tff_mixed.templates.client_groups`).

A *group* is one TFF client value: a dataset of one element, its tensors
`OrderedDict(examples=every example of its clients' batches, one batch after
another, one client after another (the model's input structure, each
`[N, ...]`); batch_sizes=each batch's size; client_batch_counts=each
client's number of batches)` (TFF's learning processes take sequences at
CLIENTS). `group_arrays` builds groups from clients held as arrays without
any `tf.data` (what `Task.train_arrays_fn` gives); `group_datasets` from
client datasets, reading each group in one `tf.data` pass on the driver.

This is the data side only, below `tff_mixed.task.Task` (which builds a
round's groups): how a group trains is `client_groups`'.
"""

import collections
import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

# A group's parts.
EXAMPLES, BATCH_SIZES, COUNTS = 'examples', 'batch_sizes', 'client_batch_counts'


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


def chunks(num_clients: int, num_groups: int) -> list[np.ndarray]:
  """Client i goes to group `i * num_groups // num_clients` (contiguous,
  sizes differing by at most one); no group for no clients."""
  _check_num_groups(num_groups)
  if not num_clients:
    return []
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
  for chunk in chunks(len(clients), num_groups):
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
  for chunk in chunks(len(datasets), num_groups):
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
