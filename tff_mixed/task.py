"""The task object every training binary hands to the driver."""

import dataclasses
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Optional, Union

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed import checks
from tff_mixed import group_data

try:  # `Dataset.unbatch` without its densifying map (see `reshuffled`).
  from tensorflow.python.data.ops.unbatch_op import _UnbatchDataset  # pylint: disable=g-direct-tensorflow-import
except ImportError:  # Another TensorFlow: the public one.
  _UnbatchDataset = None

ModelFn = Callable[[], tff.learning.models.VariableModel]
# (rng, number of clients) -> client ids. The default samples uniformly
# without replacement; a task may sample from its own distribution.
ClientSampler = Callable[[np.random.Generator, int], Sequence[str]]

# `Task.client_shuffle`: each client's examples reshuffled every round from
# (seed, round, client id), or kept in `train_dataset_fn`'s order.
PER_ROUND, NO_SHUFFLE = 'per_round', 'none'
CLIENT_SHUFFLES = (PER_ROUND, NO_SHUFFLE)


def client_seed(seed: int, round_num: int, client_id: str) -> int:
  """The shuffle seed of `client_id` in round `round_num` of run `seed`: a
  function of the three only (not of the cohort or the process), so faithful
  mode, fast mode, several workers and a resumed run shuffle alike."""
  key = zlib.crc32(str(client_id).encode('utf-8'))
  state = np.random.SeedSequence([seed, round_num, key]).generate_state(2)
  return int(state[0]) << 31 | int(state[1]) >> 1  # A non-negative int64.


def reshuffled(dataset: tf.data.Dataset, batch_size: int,
               seed: int) -> tf.data.Dataset:
  """`dataset`'s examples in a new order, batched again by `batch_size`.

  A full shuffle (the buffer holds the client's examples, as TFF's baselines
  shuffle a client), so a client with more than K·B examples trains on a
  different K·B of them each round. The batches keep their sizes (B, ..., B,
  the remainder) and the dataset its cardinality, which fast mode reads.
  Built on the driver in about as long as the dataset itself (no function
  is traced: `Dataset.unbatch` would trace a densifying map, ~4 ms a client
  a round; its dataset op is used directly where TensorFlow has it).
  """
  batches = int(dataset.cardinality())
  if batches == tf.data.INFINITE_CARDINALITY:
    raise ValueError('A client dataset is infinite; per-round shuffling needs '
                     "finite client datasets (or client_shuffle='none').")
  examples = (_UnbatchDataset(dataset) if _UnbatchDataset is not None
              else dataset.unbatch())
  buffer = batch_size * batches if batches >= 0 else 2**16
  drop = tf.nest.flatten(dataset.element_spec)[0].shape[0] is not None
  shuffled = examples.shuffle(
      max(buffer, 1), seed=seed, reshuffle_each_iteration=False).batch(
          batch_size, drop_remainder=drop)
  if batches >= 0:
    shuffled = shuffled.apply(tf.data.experimental.assert_cardinality(batches))
  return shuffled


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
    validation_dataset_fn: Optional no-arg callable -> batched validation
      data (or a mapping of them): examples held out of the training
      clients' data, evaluated with the test data and logged as
      `validation/<metric>`, for what tunes or decays on validation data
      (`--k_monitor=validation/loss`, seed 001 §3.5) while the test data
      stays for the reported numbers.
    client_sampler: Optional custom sampler (see `ClientSampler`).
    flops_per_example: Optional forward plus backward FLOPs of one training
      example; binaries use it to measure client FLOPs per round (seed 003
      Eq. 22).
    flops_per_step: Optional `batch size -> FLOPs` of one client step, for
      a model whose step is not B x `flops_per_example` (MovieLens's dual
      encoder: a batch's in-batch softmax, and the spreadout over the
      whole table); takes the place of `flops_per_example`.
    train_batch_size: B, the batch size `train_dataset_fn` batches with
      (read from its element spec when that fixes it). Per-round shuffling
      batches the reshuffled examples by it.
    client_shuffle: 'per_round' (the default): every round, each sampled
      client's examples are reshuffled from (run seed, round, client id)
      before batching and cycling to K steps, as the seeds sample minibatches
      (seed 000 Alg. 2, seed 001 §3, seed 003 Alg. 1); 'none': the order of
      `train_dataset_fn` every round (the NumPy-checked tests' fixed order).
    train_arrays_fn: Optional client id -> the client's examples as a
      structure of arrays (the model's input structure, each `[n, ...]`),
      in `train_dataset_fn`'s order, for a task whose clients are arrays in
      memory: `train_dataset_fn(cid)` must be them batched by
      `train_batch_size`. Per-round shuffling then permutes the arrays at
      the source, for free (without it `reshuffled` reorders the batched
      dataset: about 1 ms a client a round on the driver, and an
      unbatch-shuffle-batch on the worker), and fast mode builds a round's
      client groups from them without any `tf.data` (`cohort_groups`).
    data_source: Optional: where the training clients' data is read from
      (a file), named with the client when its data does not read.
    rebuild: Optional picklable no-arg callable that builds this task again
      in another process (the task registry's runs set it). With it, a
      runtime whose workers are other processes (Ray's actors) sends them a
      round's client ids, not the clients' data: each worker builds its
      clients' data itself (`NamedCohort`), from where the data lives.
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
  flops_per_step: Optional[Callable[[tf.Tensor], tf.Tensor]] = None
  validation_dataset_fn: Optional[
      Callable[[], Union[tf.data.Dataset, Mapping[str, tf.data.Dataset]]]
  ] = None
  train_batch_size: Optional[int] = None
  client_shuffle: str = PER_ROUND
  train_arrays_fn: Optional[Callable[[str], object]] = None
  data_source: Optional[str] = None
  rebuild: Optional[Callable[[], 'Task']] = None

  def __post_init__(self):
    if isinstance(self.train_client_ids, (str, bytes)):
      raise TypeError(
          f'Task {self.name!r}: train_client_ids must be a sequence of client '
          f'ids, got the string {self.train_client_ids!r}.')
    if not self.train_client_ids:
      raise ValueError(f'Task {self.name!r} has no training clients.')
    if self.client_shuffle not in CLIENT_SHUFFLES:
      raise ValueError(f'Task {self.name!r}: client_shuffle must be one of '
                       f'{CLIENT_SHUFFLES}, got {self.client_shuffle!r}.')
    if self.train_batch_size is not None and (
        isinstance(self.train_batch_size, bool)
        or not isinstance(self.train_batch_size, (int, np.integer))
        or self.train_batch_size < 1):
      raise ValueError(f'Task {self.name!r}: train_batch_size must be an int '
                       f'>= 1, got {self.train_batch_size!r}.')
    checks.check_dataset_fn(self.train_dataset_fn, 'train_dataset_fn',
                            argument='a client id')
    for name in ('eval_dataset_fn', 'validation_dataset_fn'):
      if getattr(self, name) is not None:
        checks.check_dataset_fn(
            getattr(self, name), name,
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
    if self.train_arrays_fn is not None:
      self._check_arrays(element_spec)
    elif self.client_shuffle == PER_ROUND:
      self._check_reshufflable(element_spec)

  def _check_arrays(self, element_spec) -> None:
    """`train_arrays_fn` gives what `train_dataset_fn` batches."""
    if self.train_batch_size is None:
      raise ValueError(f'Task {self.name!r}: train_arrays_fn needs '
                       'train_batch_size (the batch size of train_dataset_fn).')
    arrays = self.train_arrays_fn(self.train_client_ids[0])
    specs = tf.nest.map_structure(
        lambda a: tf.TensorSpec([None] + list(np.shape(a)[1:]),
                                tf.as_dtype(np.asarray(a).dtype)), arrays)
    expected = tf.nest.map_structure(
        lambda s: tf.TensorSpec([None] + s.shape[1:].as_list(), s.dtype),
        element_spec)
    try:
      tf.nest.assert_same_structure(specs, expected)
      same = all(a == b for a, b in zip(tf.nest.flatten(specs),
                                        tf.nest.flatten(expected)))
    except (TypeError, ValueError):
      same = False
    if not same:
      raise ValueError(
          f'Task {self.name!r}: train_arrays_fn gives {specs}, but '
          f'train_dataset_fn batches of {element_spec}.')

  def _check_reshufflable(self, element_spec) -> None:
    specs = tf.nest.flatten(element_spec)
    if not all(type(s) is tf.TensorSpec and s.shape.rank for s in specs):  # pylint: disable=unidiomatic-typecheck
      raise ValueError(
          f"Task {self.name!r}: client_shuffle='per_round' reshuffles "
          'examples across batches, which needs dense batched tensors; the '
          f"client data is {element_spec}. Pass client_shuffle='none' and "
          'shuffle in train_dataset_fn.')
    static = specs[0].shape[0]
    if self.train_batch_size is None and static is None:
      raise ValueError(
          f"Task {self.name!r}: client_shuffle='per_round' (the default) "
          'rebatches each client\'s reshuffled examples, so it needs '
          'train_batch_size (the batch size of train_dataset_fn); or pass '
          "client_shuffle='none' to keep the datasets' order.")
    if static is not None and self.train_batch_size not in (None, static):
      raise ValueError(
          f'Task {self.name!r}: train_batch_size={self.train_batch_size} but '
          f'the client batches have a fixed size of {static}.')
    if self.train_batch_size is None:
      object.__setattr__(self, 'train_batch_size', int(static))

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

    `np.random.default_rng([seed, round_num])` samples it and each client's
    examples are reshuffled from (seed, round, client id) (`client_dataset`),
    so a resumed run (or `tff_mixed.program.TaskDataSource`) sees the data
    an uninterrupted one does.
    """
    return list(self.named_cohort(seed, round_num, num_clients))

  def cohort_ids(self, seed: int, round_num: int,
                 num_clients: int) -> list[str]:
    """The ids of round `round_num`'s cohort of run `seed`."""
    return self.sample_clients(np.random.default_rng([seed, round_num]),
                               num_clients)

  def client_dataset(self, client_id: str, seed: int,
                     round_num: int) -> tf.data.Dataset:
    """`client_id`'s training data in round `round_num` of run `seed`:
    reshuffled by `client_seed(seed, round_num, client_id)` unless
    `client_shuffle='none'`."""
    if self.client_shuffle == NO_SHUFFLE:
      return self.train_dataset_fn(client_id)
    if self.train_arrays_fn is not None:
      return tf.data.Dataset.from_tensor_slices(
          self.client_arrays(client_id, seed, round_num)).batch(
              self.train_batch_size)
    shuffle_seed = client_seed(seed, round_num, client_id)
    return reshuffled(self.train_dataset_fn(client_id), self.train_batch_size,
                      shuffle_seed)

  def client_arrays(self, client_id: str, seed: int, round_num: int):
    """`client_id`'s examples as arrays (`train_arrays_fn`) in the order
    `client_dataset` batches them: permuted by `client_seed(seed,
    round_num, client_id)` unless `client_shuffle='none'`."""
    arrays = self.train_arrays_fn(client_id)
    if self.client_shuffle == NO_SHUFFLE:
      return arrays
    n = len(tf.nest.flatten(arrays)[0])
    order = np.random.default_rng(
        client_seed(seed, round_num, client_id)).permutation(n)
    return tf.nest.map_structure(lambda a: np.asarray(a)[order], arrays)

  def cohort_groups(self, seed: int, round_num: int, num_clients: int,
                    num_groups: int) -> list[tf.data.Dataset]:
    """Round `round_num`'s cohort (as `cohort` draws it) as at most
    `num_groups` client groups (fast mode): from the clients' arrays when
    the task has `train_arrays_fn` (no `tf.data` on the driver), else from
    their datasets."""
    return list(self.named_cohort(seed, round_num, num_clients, num_groups))

  def named_cohort(self, seed: int, round_num: int, num_clients: int,
                   num_groups: Optional[int] = None) -> 'NamedCohort':
    """Round `round_num`'s cohort (`cohort`, or with `num_groups`
    `cohort_groups`) as its clients' ids: each item is built when read."""
    ids = self.cohort_ids(seed, round_num, num_clients)
    if num_groups is None:
      members = [(cid,) for cid in ids]
    else:
      members = [tuple(ids[i] for i in chunk)
                 for chunk in group_data.chunks(len(ids), num_groups)]
    return NamedCohort(self, seed, round_num, tuple(members),
                       num_groups is not None)

  def client_data(self, members: Sequence[str], seed: int, round_num: int,
                  grouped: bool) -> tf.data.Dataset:
    """One item of round `round_num`'s client data: the dataset of client
    `members[0]` (`client_dataset`), or with `grouped` the group of the
    clients `members` (fast mode: from their arrays when the task has
    `train_arrays_fn`, else from their datasets)."""
    if not grouped:
      (client_id,) = members
      return self.client_dataset(client_id, seed, round_num)
    if self.train_arrays_fn is None:
      return group_data.group_datasets(
          [self.client_dataset(c, seed, round_num) for c in members], 1)[0]
    return group_data.group_arrays(
        [self.client_arrays(c, seed, round_num) for c in members],
        self.train_batch_size, 1)[0]


@dataclasses.dataclass(frozen=True, eq=False)
class NamedCohort(Sequence):
  """A round's client data named rather than built: each item (a client,
  or in fast mode a group of clients) as its clients' ids, built by
  `task.client_data` when read.

  Read as a sequence it is the round's datasets (`Task.cohort` or
  `Task.cohort_groups`). The Ray runtime reads it as it is: each actor gets
  its share's ids and builds their data with its own copy of the task
  (`Task.rebuild`), so no client's data leaves the driver.
  """

  task: Task
  seed: int
  round_num: int
  members: tuple[tuple[str, ...], ...]
  grouped: bool

  def __len__(self) -> int:
    return len(self.members)

  def __getitem__(self, index):
    if isinstance(index, slice):
      return [self[i] for i in range(*index.indices(len(self)))]
    return self.task.client_data(self.members[index], self.seed,
                                 self.round_num, self.grouped)
