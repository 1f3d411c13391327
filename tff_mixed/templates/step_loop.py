"""The step loop: optimizer steps on a loss, one per batch.

There are two step loops in tff_mixed. `take_steps` here walks one model's
batches with a `GradientTape` and steps its optimizer: clients run it on
their data through `build_k_step_update` (K steps, cycling the data; seed
000, Algorithm 2), and the mixed-FL server on the central loss through
`tff_mixed.templates.mixed_fl_step.build_central_update`. The other is
`tff_mixed.templates.vectorised`'s, by necessity: it steps a group's
clients at once over stacked weights (`tf.vectorized_map` of each client's
gradient and optimizer step), which one model's loop cannot express; it
keeps this loop's per-client semantics (exactly K steps, batches cycled, an
empty client takes none, a non-finite one is dropped), and the tests hold
the two to the same models. The other tapes in tff_mixed compute gradients
and take no step (`full_gradient_sum`).

All of it is plain TensorFlow, testable without TFF. Its loops are explicit
(`loop`, `fold`: `tf.while_loop`s) and every `tf.function` in tff_mixed is
traced without AutoGraph (`autograph=False`), as TFF traces a
`tff.tensorflow.computation`: converting the functions a process calls
took 4.2 s of a digits binary's ~13 s after its imports, paid again by
every new process (1.1 s is left: TFF's own `tf.function`s). Functions called inside them (client work
parts, losses, optimizers) are traced as written: Python `if`/`for` on a
tensor is an error there; use `tf.cond`, `loop` or `fold`.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed.templates import client_batches

# `(model, batch) -> (loss, examples in the batch as int64)`.
LossFn = Callable[[tff.learning.models.VariableModel, Any],
                  tuple[tf.Tensor, tf.Tensor]]


def dense_gradients(tape: tf.GradientTape, target: tf.Tensor,
                    variables: tuple[tf.Variable, ...]) -> tuple[tf.Tensor, ...]:
  """`tape.gradient` as dense tensors, zeros for unconnected variables.

  Embedding lookups give `tf.IndexedSlices`, which do not scale, add or
  select (`tf.where`) like tensors; every consumer here wants tensors.
  """
  gradients = tape.gradient(
      target, variables, unconnected_gradients=tf.UnconnectedGradients.ZERO)
  return tuple(tf.convert_to_tensor(g) for g in gradients)


def batch_size(output: tff.learning.models.BatchOutput) -> tf.Tensor:
  """The examples of a forward pass (int64)."""
  if output.num_examples is None:
    return tf.shape(output.predictions, out_type=tf.int64)[0]
  return tf.cast(output.num_examples, tf.int64)


def model_loss(model: tff.learning.models.VariableModel, batch):
  """The model's own training loss and batch size (updates its metrics)."""
  output = model.forward_pass(batch, training=True)
  return output.loss, batch_size(output)


# Client weighting by |D_i|, the client's whole dataset (seed 000 Alg. 1
# line 7, seed 002 Alg. 1), beside TFF's `ClientWeighting.NUM_EXAMPLES`
# (examples processed in the K steps) and `UNIFORM`.
DATASET_SIZE = 'dataset_size'
WEIGHTINGS = (tff.learning.ClientWeighting.NUM_EXAMPLES,
              tff.learning.ClientWeighting.UNIFORM, DATASET_SIZE)


def dataset_size(data) -> tf.Tensor:
  """|D|: the examples of every batch of `data` (a dataset or a client's
  `client_batches.BufferedBatches` view), counted by the first dimension
  of the batch's first tensor (int64). A dataset is read once more to
  count them."""
  count = lambda n, batch: n + tf.shape(
      tf.nest.flatten(batch)[0], out_type=tf.int64)[0]
  return fold(count, tf.constant(0, tf.int64), data)


def loop(count, body, state):
  """`state = body(i, state)` for `i` = 0, ..., `count` - 1 (int64), in one
  `tf.while_loop`; `state` keeps its structure, dtypes and shapes."""
  count = tf.cast(count, tf.int64)
  _, state = tf.while_loop(
      lambda i, _: i < count, lambda i, s: (i + 1, body(i, s)),
      (tf.constant(0, tf.int64), state))
  return state


def fold(fn, initial, batches):
  """`fn(...fn(fn(initial, b0), b1)..., bn)` over a dataset or
  `client_batches.BufferedBatches`, in a `tf.function`.

  Loops, not `Dataset.reduce`: reduce costs ~19 ms a call on this kind of
  machine whatever the number of steps; an iterator loop a fraction of that,
  an index loop over buffered tensors (client groups) almost nothing.
  """
  if isinstance(batches, client_batches.BufferedBatches):
    return loop(batches.length, lambda i, s: fn(s, batches.batch(i)), initial)
  iterator = iter(batches)

  def next_batch(more, state):
    del more
    batch = iterator.get_next_as_optional()
    more = batch.has_value()
    state = tf.cond(more, lambda: fn(state, batch.get_value()), lambda: state)
    return more, state

  _, state = tf.while_loop(lambda more, _: more, next_batch,
                           (tf.constant(True), initial))
  return state


class Steps(NamedTuple):
  """What `take_steps` returns.

  Attributes:
    num_examples: Examples over the steps (int64).
    num_steps: Steps taken (int32).
    optimizer_state: The optimizer's state after the steps.
    first_gradient: The first step's `loss_weight * grad(loss)` at the
      initial weights (zeros if no step was taken); tuple of tensors. None
      unless asked for (`take_steps(first_gradient=True)`).
    first_loss: The first batch's loss at the initial weights (float32).
    loss_sum: The sum of the steps' losses (float32).
  """
  num_examples: tf.Tensor
  num_steps: tf.Tensor
  optimizer_state: Any
  first_gradient: tuple[tf.Tensor, ...]
  first_loss: tf.Tensor
  loss_sum: tf.Tensor


def applied_gradient(gradient, augmenting_gradient, step_gradient, x, x_0):
  """What a client step applies: `gradient + augmenting_gradient +
  step_gradient(x, x_0)` (None adds nothing), lists of tensors of one
  client; both step loops (this one, `vectorised`'s per client) use it."""
  applied = list(gradient)
  if augmenting_gradient is not None:
    applied = [g + a for g, a in zip(applied, augmenting_gradient)]
  if step_gradient is not None:
    applied = [g + t for g, t in zip(applied, step_gradient(x, x_0))]
  return applied


def take_steps(model, variables, optimizer, optimizer_state, batches, *,
               loss_fn: LossFn = model_loss, loss_weight: float = 1.0,
               augmenting_gradient=None, step_gradient=None,
               first_gradient: bool = False) -> Steps:
  """One optimizer step per element of `batches`, updating `variables`.

  Each step applies `loss_weight * grad(loss) + augmenting_gradient +
  step_gradient(x, x_0)`: the second (Gradient Transfer's) has the structure
  of `variables`, the third (FedProx's mu (x - x_0)) is a function of the
  current and the starting values of `variables`; None adds nothing. With
  `first_gradient`, the first step's gradient is kept (`Steps`); without,
  the loop does not carry it (a step costs ~25% less on a small model in
  process: each value a loop carries is four graph nodes a step). Call
  inside a `tf.function`.
  """
  variables = tuple(variables)
  augment = (None if augmenting_gradient is None
             else tuple(tf.nest.flatten(augmenting_gradient)))
  start = (None if step_gradient is None
           else tuple(tf.identity(v) for v in variables))

  keep_first = first_gradient

  def step(carry, batch):
    num_examples, num_steps, state, first_gradient, first_loss, loss_sum = (
        carry)
    with tf.GradientTape() as tape:
      loss, examples = loss_fn(model, batch)
    gradients = dense_gradients(tape, loss, variables)
    if loss_weight != 1.0:
      gradients = tuple(loss_weight * g for g in gradients)
    # tf.equal, not ==: in TFF's graph mode == on tensors is identity.
    is_first = tf.equal(num_steps, 0)
    if keep_first:
      first_gradient = tuple(
          tf.where(is_first, g, f) for g, f in zip(gradients, first_gradient))
    loss = tf.cast(loss, tf.float32)
    first_loss = tf.where(is_first, loss, first_loss)
    gradients = tuple(applied_gradient(gradients, augment, step_gradient,
                                       variables, start))
    state, updated = optimizer.next(state, variables, gradients)
    for variable, value in zip(variables, updated):
      variable.assign(value)
    return (num_examples + examples, num_steps + 1, state, first_gradient,
            first_loss, loss_sum + loss)

  carry = (tf.constant(0, tf.int64), tf.constant(0, tf.int32),
           optimizer_state,
           tuple(tf.zeros_like(v) for v in variables) if keep_first else (),
           tf.constant(0.0, tf.float32), tf.constant(0.0, tf.float32))
  steps = Steps(*fold(step, carry, batches))
  return steps if keep_first else steps._replace(first_gradient=None)


def full_gradient_sum(model, variables, data, *, loss_weight: float = 1.0):
  """`(sum over examples of loss_weight * grad(loss), examples)` at the
  current weights: one pass over `data`, no step (Mimelite's full-batch
  gradient; each batch's mean gradient weighted by its size)."""

  def accumulate(totals, batch):
    gradient_sum, examples = totals
    with tf.GradientTape() as tape:
      loss, size = model_loss(model, batch)
    gradients = dense_gradients(tape, loss, variables)
    return (tuple(s + tf.cast(size, s.dtype) * loss_weight * g
                  for s, g in zip(gradient_sum, gradients)),
            examples + size)

  totals = (tuple(tf.zeros_like(v) for v in variables),
            tf.constant(0, tf.int64))
  return fold(accumulate, totals, data)


def _reset_metrics(model) -> tf.Tensor:
  """`model.reset_metrics()`, as a `tf.cond` branch (returns a 0)."""
  model.reset_metrics()
  return tf.constant(0)


def all_finite(structure) -> tf.Tensor:
  """Whether every element of every tensor of `structure` is finite."""
  return tf.reduce_all(
      [tf.reduce_all(tf.math.is_finite(t)) for t in tf.nest.flatten(structure)]
  )


class ClientOutput(NamedTuple):
  """What `build_k_step_update`'s function returns for one client.

  Attributes:
    result: `tff.learning.templates.ClientResult` (update, update_weight).
    metrics: The model's unfinalized metrics (reset if the update is dropped).
    sgd_steps: Steps taken (int32): K, or 0 for a client without data.
    first_gradient: With `first_gradient=True`, the first step's
      `loss_weight * grad(loss)` at the initial weights (zeros if no step or
      the update is dropped); else None.
    first_loss: The loss of the first batch at the initial weights, which
      the first step computes anyway (0 if no step or the update is dropped).
    num_examples: Examples processed over the K steps (int64).
    optimizer_state: The client optimizer's state after the K steps.
    full_gradient: With `full_gradient=True`, the mean over the client's
      examples of `loss_weight * grad(loss)` at the initial weights, one pass
      over the data before training (zeros if the client has no data or the
      update is dropped); else None.
    full_gradient_examples: The examples that pass read (int64), or None.
  """
  result: tff.learning.templates.ClientResult
  metrics: Any
  sgd_steps: tf.Tensor
  first_gradient: Any
  first_loss: tf.Tensor
  num_examples: Any = None
  optimizer_state: Any = None
  full_gradient: Any = None
  full_gradient_examples: Any = None


def check_weighting(client_weighting) -> None:
  """Raises ValueError unless `client_weighting` is one of `WEIGHTINGS`."""
  if not any(client_weighting == w for w in WEIGHTINGS):
    raise ValueError(
        'client_weighting must be tff.learning.ClientWeighting.NUM_EXAMPLES, '
        'UNIFORM or tff_mixed.templates.DATASET_SIZE, got '
        f'{client_weighting!r}.')


def build_k_step_update(
    model_fn: Callable[[], tff.learning.models.VariableModel],
    *,
    client_weighting: tff.learning.ClientWeighting,
    loss_weight: float = 1.0,
    full_gradient: bool = False,
    first_gradient: bool = False,
) -> Callable[..., ClientOutput]:
  """Returns `client_update(optimizer, hparams, K, weights, data, aug,
  state, step_gradient)`.

  (`aug`, `state` and `step_gradient` default to None: `take_steps`'s
  augmenting gradient and step gradient, and the starting optimizer state.)

  `take_steps` on the first K batches of `data`, cycled when it holds fewer
  (an empty dataset takes no step); the returned `tf.function` returns a
  `ClientOutput`. The update is `initial_trainable - final_trainable`, the
  weight the number of examples processed (1 for `UNIFORM`, |D_i| for
  `DATASET_SIZE`), 0 for a
  client that took no step or whose update is not finite.

  The optimizer starts from `optimizer.initialize` or, when `state` is
  given, from that state (seed 003's global statistics); either way with
  `hparams` set. An optimizer whose `next` leaves its state unchanged
  applies frozen statistics (FedGBO, Mimelite). A dropped client reports
  its starting optimizer state; with `full_gradient`, a client whose full
  gradient is not finite is dropped too.

  Args:
    model_fn: No-arg callable returning a `tff.learning.models.VariableModel`.
    client_weighting: A `tff.learning.ClientWeighting` or `DATASET_SIZE`.
    loss_weight: Scales the client loss (mixed FL's federated weight w_f).
    full_gradient: Also compute the full-batch gradient at the initial
      weights before training (Mimelite); the model's metrics count only
      the training steps.
    first_gradient: Also return the first step's gradient (Gradient
      Transfer's `FirstGradientMean`).
  """
  check_weighting(client_weighting)
  model = model_fn()
  weights = tff.learning.models.ModelWeights.from_model(model)

  @tf.function(autograph=False)
  def client_update(
      optimizer, hparams, num_local_steps, initial_weights, data,
      augmenting_gradient=None, initial_optimizer_state=None,
      step_gradient=None,
  ):
    tf.nest.map_structure(lambda v, t: v.assign(t), weights, initial_weights)
    model.reset_metrics()  # One client's metrics (clients may share a call).
    trainable = tuple(tf.nest.flatten(weights.trainable))
    specs = tuple(tf.TensorSpec(v.shape, v.dtype) for v in trainable)
    if initial_optimizer_state is None:
      initial_optimizer_state = optimizer.initialize(specs)
    initial_optimizer_state = optimizer.set_hparams(
        initial_optimizer_state, hparams)

    gradient_sum = examples_read = None
    if full_gradient:
      gradient_sum, examples_read = full_gradient_sum(
          model, trainable, data, loss_weight=loss_weight)
      model.reset_metrics()

    steps = take_steps(
        model, trainable, optimizer, initial_optimizer_state,
        client_batches.cycle(data, num_local_steps),
        loss_weight=loss_weight, augmenting_gradient=augmenting_gradient,
        step_gradient=step_gradient, first_gradient=first_gradient)
    update = tf.nest.map_structure(
        tf.subtract, initial_weights.trainable, weights.trainable
    )
    usable = tf.logical_and(all_finite(update), steps.num_steps > 0)
    if full_gradient:
      usable = tf.logical_and(usable, all_finite(gradient_sum))
    keep = lambda new, old: tf.where(usable, new, old)
    optimizer_state = tf.nest.map_structure(
        keep, steps.optimizer_state, initial_optimizer_state)
    update = tf.nest.map_structure(
        lambda u: keep(u, tf.zeros_like(u)), update)
    if client_weighting == tff.learning.ClientWeighting.NUM_EXAMPLES:
      weight = tf.cast(steps.num_examples, tf.float32)
    elif client_weighting == DATASET_SIZE:
      weight = tf.cast(dataset_size(data), tf.float32)
    else:
      weight = tf.constant(1.0, tf.float32)
    weight = keep(weight, 0.0)
    kept_first_gradient = None
    if first_gradient:
      kept_first_gradient = [keep(g, tf.zeros_like(g))
                             for g in steps.first_gradient]
    first_loss = keep(steps.first_loss, 0.0)
    mean_full_gradient = None
    if full_gradient:
      mean_full_gradient = [
          keep(tf.math.divide_no_nan(s, tf.cast(examples_read, s.dtype)),
               tf.zeros_like(s))
          for s in gradient_sum]
    # The metrics of a client whose update is dropped are dropped too.
    tf.cond(usable, lambda: tf.constant(0), lambda: _reset_metrics(model))
    return ClientOutput(
        tff.learning.templates.ClientResult(update=update, update_weight=weight),
        model.report_local_unfinalized_metrics(),
        steps.num_steps,
        kept_first_gradient,
        first_loss,
        steps.num_examples,
        optimizer_state,
        mean_full_gradient,
        examples_read,
    )

  return client_update


# What moved to `tff_mixed.templates.client_batches` (2026-11-27): a
# client's batches as tensors.
_MOVED = ('BufferedBatches', 'cycle')


def __getattr__(name):
  if name in _MOVED:
    raise AttributeError(
        f'tff_mixed.templates.step_loop.{name} moved to '
        f'tff_mixed.templates.client_batches.{name} (CHANGELOG.md, '
        '2026-11-27).')
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
