"""Pieces every builder shares: argument checks, optimizers, weights, aggregators.

What TFF already gives (`compose_learning_process`, `build_broadcast_process`,
`build_apply_optimizer_finalizer`) is used as it is; these helpers only add
one-line errors naming the argument, and the few conversions between TFF's
types that every builder needs.
"""

import collections
import functools
from collections.abc import Callable
from typing import Any, Optional, Union

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed import aggregators
from tff_mixed import keys
from tff_mixed.templates import client_groups as groups

ModelFn = Callable[[], tff.learning.models.VariableModel]
Optimizer = tff.learning.optimizers.Optimizer
OptimizerFn = Union[Optimizer, Callable[[], Optimizer]]
Aggregator = Union[
    tff.aggregators.WeightedAggregationFactory,
    tff.aggregators.UnweightedAggregationFactory,
]
LEARNING_RATE = keys.LEARNING_RATE
CLIENT_WORK = keys.CLIENT_WORK
SERVER = keys.SERVER


# ---------------------------------------------------------------- optimizers
def resolve_optimizer(optimizer_fn: OptimizerFn, name: str) -> Optimizer:
  """Returns a `tff.learning.optimizers.Optimizer` from an instance or factory.

  Raises:
    TypeError: Naming `name` if it is neither (e.g. a Keras optimizer).
  """
  optimizer = optimizer_fn
  if not isinstance(optimizer, Optimizer) and callable(optimizer):
    optimizer = optimizer()
  if not isinstance(optimizer, Optimizer):
    raise TypeError(
        f'{name} must be a tff.learning.optimizers.Optimizer or a no-arg '
        f'callable returning one, got {type(optimizer).__name__}.'
    )
  return optimizer


def resolve_optional_optimizer(optimizer_fn, name: str,
                               default_learning_rate: float) -> Optimizer:
  """`resolve_optimizer`, or SGD at `default_learning_rate` when None."""
  if optimizer_fn is None:
    return tff.learning.optimizers.build_sgdm(
        learning_rate=default_learning_rate)
  return resolve_optimizer(optimizer_fn, name)


def hparams_of(optimizer: Optimizer) -> collections.OrderedDict:
  """The optimizer's hyper-parameters (they do not depend on the weights)."""
  return optimizer.get_hparams(
      optimizer.initialize(tf.TensorSpec((), tf.float32)))


def learning_rate_of(optimizer: Optimizer, name: str) -> float:
  """The optimizer's `learning_rate` hyper-parameter; raises naming `name`."""
  hparams = hparams_of(optimizer)
  if LEARNING_RATE not in hparams:
    raise ValueError(f'{name} has no {LEARNING_RATE!r} hyper-parameter.')
  return float(hparams[LEARNING_RATE])


def check_plain_sgd(optimizer: Optimizer, name: str, why: str) -> None:
  """Raises naming `name` unless `optimizer` is SGD without momentum.

  Detected from its hyper-parameters (`tff.learning`'s `build_sgdm` with
  `momentum` None or 0 has exactly a learning rate) and checked on two
  successive steps (SGD with momentum takes its first step as SGD does).
  """
  hparams = hparams_of(optimizer)
  learning_rate = learning_rate_of(optimizer, name)
  spec = tf.TensorSpec((), tf.float32)
  state = optimizer.initialize(spec)
  state, first = optimizer.next(state, tf.constant(0.0), tf.constant(1.0))
  _, second = optimizer.next(state, first, tf.constant(2.0))
  if (set(hparams) != {LEARNING_RATE}
      or not np.isclose(float(first), -learning_rate)
      or not np.isclose(float(second) - float(first), -2 * learning_rate)):
    raise ValueError(
        f'{name} must be plain SGD (tff.learning.optimizers.build_sgdm '
        f'without momentum): {why}.')


# --------------------------------------------------------------- model weights
def initial_model_weights_computation(model_fn: ModelFn) -> tff.Computation:
  """A `tff.tensorflow.computation` returning the model's initial weights."""
  if not callable(model_fn):
    raise TypeError(f'model_fn must be callable, got {type(model_fn).__name__}.')

  @tff.tensorflow.computation
  def initial_model_weights():
    model = model_fn()
    if not isinstance(model, tff.learning.models.VariableModel):
      raise TypeError(
          'model_fn must return a tff.learning.models.VariableModel, got '
          f'{type(model).__name__}.'
      )
    return tff.learning.models.ModelWeights.from_model(model)

  return initial_model_weights


def num_trainable_parameters(weights_type: tff.types.Type) -> int:
  """|x|: the number of trainable parameters in a model weights type."""
  return sum(int(np.prod(t.shape, dtype=np.int64))
             for t in weights_type.trainable)


def model_weights_accessors(
    state_type: tff.types.Type, weights_type: tff.types.Type,
    key: str = 'global_model_weights',
) -> tuple[tff.Computation, tff.Computation]:
  """`get_model_weights` / `set_model_weights` of a state keeping them at `key`."""

  @tff.tensorflow.computation(state_type)
  def get_model_weights(state):
    return state[key]

  @tff.tensorflow.computation(state_type, weights_type)
  def set_model_weights(state, weights):
    state = collections.OrderedDict(state)
    state[key] = weights
    return state

  return get_model_weights, set_model_weights


def client_work_hparams(
    state_type: tff.types.Type,
    get_client_work_hparams: Optional[tff.Computation] = None,
    set_client_work_hparams: Optional[tff.Computation] = None,
    *,
    server_hparams=None,
) -> tuple[tff.Computation, tff.Computation]:
  """`get_hparams` / `set_hparams` of a learning-process state: its
  `client_work` part as `OrderedDict(client_work=...)`, through the client
  work's own accessors when given (else the whole `client_work` state), and
  with `server_hparams`, a server step's `(get, set)` TensorFlow functions
  of its `server` state, that part under `server` too."""
  client_work_type = state_type[CLIENT_WORK]
  if get_client_work_hparams is None:
    get_client_work_hparams, set_client_work_hparams = whole_state_hparams(
        client_work_type)

  @tff.tensorflow.computation(state_type)
  def get_hparams(state):
    hparams = collections.OrderedDict(
        client_work=get_client_work_hparams(state[CLIENT_WORK]))
    if server_hparams is not None:
      hparams[SERVER] = server_hparams[0](state[SERVER])
    return hparams

  hparams_type = get_hparams.type_signature.result

  @tff.tensorflow.computation(state_type, hparams_type)
  def set_hparams(state, hparams):
    state = collections.OrderedDict(state)
    state[CLIENT_WORK] = set_client_work_hparams(
        state[CLIENT_WORK], hparams[CLIENT_WORK])
    if server_hparams is not None:
      state[SERVER] = server_hparams[1](state[SERVER], hparams[SERVER])
    return state

  return get_hparams, set_hparams


def whole_state_hparams(state_type) -> tuple[tff.Computation, tff.Computation]:
  """`get_hparams` / `set_hparams` that read and replace a whole state."""

  @tff.tensorflow.computation(state_type)
  def get_hparams(state):
    return state

  @tff.tensorflow.computation(state_type, state_type)
  def set_hparams(state, hparams):
    del state
    return hparams

  return get_hparams, set_hparams


# ------------------------------------------------------------------ aggregators
def build_model_aggregator(
    model_aggregator, update_type: tff.types.Type, *,
    client_groups: Optional[groups.ClientGroups] = None,
    clips_updates: bool = False,
) -> tff.templates.AggregationProcess:
  """Creates the update aggregator; default: weighted mean, 0/0 -> 0.

  With `client_groups`, only a plain weighted mean or
  `tff_mixed.aggregators.gaussian_fixed` is accepted (see
  `client_groups.check_aggregator`). `clips_updates`: the client work clips
  every update (`client_extensions.for_aggregator`), which `gaussian_fixed`
  needs.
  """
  if (isinstance(model_aggregator, aggregators.GaussianFixedClipFactory)
      and not clips_updates):
    raise ValueError(
        'model_aggregator tff_mixed.aggregators.gaussian_fixed needs a client '
        'work that clips every update; this builder has none (use '
        'build_fed_avg or build_mixed_fl).')
  if groups.checked(client_groups):
    groups.check_aggregator(model_aggregator)
  if model_aggregator is None:
    model_aggregator = tff.aggregators.MeanFactory(no_nan_division=True)
  if isinstance(model_aggregator, tff.aggregators.WeightedAggregationFactory):
    return model_aggregator.create(update_type, tff.TensorType(np.float32))
  if isinstance(model_aggregator, tff.aggregators.UnweightedAggregationFactory):
    # Client weights are ignored (an empty client's update is zero).
    weighted = tff.aggregators.as_weighted_aggregator(model_aggregator)
    return weighted.create(update_type, tff.TensorType(np.float32))
  raise TypeError(
      'model_aggregator must be a tff.aggregators factory, got '
      f'{type(model_aggregator).__name__}.'
  )


def names_autograph(builder: Callable[..., Any]) -> Callable[..., Any]:
  """`builder`, whose error for a traced function that branches or loops
  on a tensor in Python says that tff_mixed traces without AutoGraph
  (TensorFlow's own suggests AutoGraph, which is off here on purpose)."""

  @functools.wraps(builder)
  def build(*args, **kwargs):
    try:
      return builder(*args, **kwargs)
    except tf.errors.OperatorNotAllowedInGraphError as e:
      what = str(e).split('. ')[0]
      raise TypeError(
          f'{builder.__name__}: {what} in a function it traces (a client '
          'extension, loss, model or optimizer). tff_mixed traces them '
          'without AutoGraph, as TFF traces its TensorFlow computations: '
          'branch with tf.cond and loop with '
          'tff_mixed.templates.step_loop.loop or fold.') from e

  return build
