"""The initial model and the centralised evaluation of a run."""

import collections
from collections.abc import Mapping, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed import keys
from tff_mixed import models
from tff_mixed.driver.history import flatten_metrics
from tff_mixed.driver.history import metric_columns
from tff_mixed.templates import step_loop


def seeded_initial_weights(
    model_fn, seed: int
) -> tff.learning.models.ModelWeights:
  """Initial weights drawn from the model's own initializers under `seed`."""
  tf.keras.utils.set_random_seed(seed)
  model = model_fn()
  weights = tff.learning.models.ModelWeights.from_model(model)
  return tf.nest.map_structure(lambda v: v.numpy(), weights)


def build_evaluation(model_fn) -> tff.Computation:
  """A `tff.tensorflow.computation` (weights, dataset) -> finalized metrics.

  Centralised evaluation: the model's metrics over every batch, computed in
  one TF graph (Keras metric finalizers must run in graph mode).
  """
  with tf.Graph().as_default():
    model = model_fn()
    weights_type = tff.learning.models.weights_type_from_model(model)
    data_type = tff.SequenceType(tff.types.tensorflow_to_type(model.input_spec))

  @tff.tensorflow.computation(weights_type, data_type)
  def evaluate(model_weights, dataset):
    model = model_fn()
    weights = tff.learning.models.ModelWeights.from_model(model)

    # A tf.function orders the metric updates before the read.
    @tf.function(autograph=False)
    def run(model_weights, dataset):
      tf.nest.map_structure(lambda v, t: v.assign(t), weights, model_weights)

      def forward(count, batch):
        model.forward_pass(batch, training=False)
        return count + 1

      step_loop.fold(forward, tf.constant(0, tf.int64), dataset)
      return model.report_local_unfinalized_metrics()

    unfinalized = run(model_weights, dataset)
    return collections.OrderedDict(
        (name, finalizer(unfinalized[name]))
        for name, finalizer in models.metric_finalizers(model).items()
    )

  return evaluate


def evaluate_all(evaluate, model_weights, eval_data) -> dict[str, float]:
  """Flat metrics of `evaluate` on a dataset or on each of a name->dataset map
  (keys `<name>/<metric>`)."""
  if isinstance(eval_data, Mapping):
    results = {}
    for name, dataset in eval_data.items():
      metrics = flatten_metrics(evaluate(model_weights, dataset))
      results.update({keys.path(name, k): v for k, v in metrics.items()})
    return results
  return flatten_metrics(evaluate(model_weights, eval_data))


def metric_names(evaluate, eval_data) -> list[str]:
  """The `eval/...` columns `evaluate_all` writes."""
  names = metric_columns(evaluate.type_signature.result)
  if isinstance(eval_data, Mapping):
    names = [keys.path(data, name) for data in eval_data for name in names]
  return [keys.path(keys.EVAL, name) for name in names]


TRAIN_EVAL_BATCH = 256  # The batch the training clients' data is evaluated in.


def training_sample(client_ids: Sequence[str], clients: int,
                    seed: int) -> list[str]:
  """The training clients whose data the `train_eval/` columns evaluate
  the global model on: all of them if `clients` >= their number, else
  `clients` of them drawn without replacement from the run `seed` (a
  stream of its own, not a round's cohort), in `client_ids`' order: the
  same clients at every evaluation and after a resume."""
  if clients >= len(client_ids):
    return list(client_ids)
  # As `tasks.common.sources.choose_clients` draws a task's clients (which
  # the library cannot import), on a stream of its own.
  rng = np.random.default_rng([seed, 0, 1])
  chosen = np.sort(rng.choice(len(client_ids), clients, replace=False))
  return [client_ids[i] for i in chosen]


def _concatenated(datasets: list[tf.data.Dataset]) -> tf.data.Dataset:
  """The datasets one after another, concatenated pairwise (a tree of
  depth log n, not a chain of n)."""
  while len(datasets) > 1:
    pairs = [datasets[i:i + 2] for i in range(0, len(datasets), 2)]
    datasets = [p[0].concatenate(p[1]) if len(p) == 2 else p[0]
                for p in pairs]
  return datasets[0]


class Evaluation:
  """A task's evaluation data (and validation split, and training clients'
  data) with its compiled evaluation, or nothing.

  `run(weights)` gives the test metrics (the `eval/...` columns, without
  the prefix; an empty dict for a task without evaluation data),
  `run_validation(weights)` the `validation/...` columns and
  `run_train(weights)` the `train_eval/...` columns: the global model on
  the data of `train_clients` training clients (`training_sample` with
  `seed`; 0: none), every example of theirs counted once. `metric_names`
  lists every kind of column, or is None.
  """

  def __init__(self, task, train_clients: int = 0, seed: int = 0):
    self.data = task.eval_dataset_fn() if task.eval_dataset_fn else None
    self.validation = (task.validation_dataset_fn()
                       if task.validation_dataset_fn else None)
    # Rebatched: a client's small training batches (B = 8-32) take several
    # times as long to evaluate as the same examples in batches of 256.
    self.train = (_concatenated([
        task.train_dataset_fn(c) for c in training_sample(
            task.train_client_ids, train_clients, seed)]).unbatch().batch(
                TRAIN_EVAL_BATCH)
                  if train_clients else None)
    self._evaluate = (build_evaluation(task.model_fn) if any(
        d is not None for d in (self.data, self.validation, self.train))
                      else None)

  @property
  def metric_names(self):
    if self._evaluate is None:
      return None
    names = []
    if self.data is not None:
      names += metric_names(self._evaluate, self.data)
    for data, column in ((self.validation, keys.validation_column),
                         (self.train, keys.train_eval_column)):
      if data is not None:
        names += [column(n.split(keys.SEPARATOR, 1)[1])
                  for n in metric_names(self._evaluate, data)]
    return names

  def __bool__(self) -> bool:
    return self._evaluate is not None

  def run(self, model_weights) -> dict[str, float]:
    """The task's metrics of `model_weights`, without the `eval/` prefix."""
    if self.data is None:
      return {}
    return evaluate_all(self._evaluate, model_weights, self.data)

  def run_validation(self, model_weights) -> dict[str, float]:
    """The `validation/...` columns of `model_weights` (none without a
    validation split)."""
    return self._columns(model_weights, self.validation,
                         keys.validation_column)

  def run_train(self, model_weights) -> dict[str, float]:
    """The `train_eval/...` columns of `model_weights` (none without
    training clients to evaluate on)."""
    return self._columns(model_weights, self.train, keys.train_eval_column)

  def _columns(self, model_weights, data, column) -> dict[str, float]:
    if data is None:
      return {}
    return {column(k): v for k, v in evaluate_all(
        self._evaluate, model_weights, data).items()}
