"""A server optimizer whose learning rate follows a `tff_mixed.schedules` schedule.

TFF's `build_apply_optimizer_finalizer` applies the server optimizer with
the learning rate it was built with, forever. Seed 000's FedSGD runs
(FEMNIST, Shakespeare) decay the server learning rate every round
(eta_t = eta_0 d^t, App. B Tables 4-5; its Stack Overflow FedAdam keeps
eta = 0.3) and its Theorem 2 couples eta_t to K_t. `build_scheduled_finalizer` wraps TFF's
finalizer: the schedule's state and the round number sit beside the
optimizer's state (so they are checkpointed with it and a resumed run
continues exactly), and each round first writes eta_t into the optimizer's
`learning_rate` hyper-parameter, then runs TFF's finalizer, then advances
the schedule.
"""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed import schedules
from tff_mixed.templates import common

OPTIMIZER = 'optimizer'
ROUND_NUM = 'round_num'
SCHEDULE = 'learning_rate_schedule'
LEARNING_RATE = 'learning_rate'


def build_scheduled_finalizer(
    optimizer: tff.learning.optimizers.Optimizer,
    model_weights_type: tff.Type,
    learning_rate: schedules.Schedule,
) -> tff.learning.templates.FinalizerProcess:
  """TFF's apply-optimizer finalizer with eta_t from `learning_rate`.

  Round t (0-based) applies the optimizer with `learning_rate` = eta_t, the
  schedule's value for round t. State: `OrderedDict(optimizer=<TFF's
  finalizer state, eta_t already in it>, round_num=t,
  learning_rate_schedule=<schedule state>)`; `get_hparams` / `set_hparams`
  read and replace the whole state, so a rate set by hand lasts one round.

  Args:
    optimizer: A `tff.learning.optimizers.Optimizer` with a `learning_rate`
      hyper-parameter.
    model_weights_type: The `tff.learning.models.ModelWeights` type.
    learning_rate: A schedule of the round only (the server sees no client
      loss, so `loss_ratio` and `on_plateau` are refused).

  Raises:
    TypeError: If `learning_rate` is not a `tff_mixed.schedules.Schedule`.
    ValueError: If the schedule reads the loss, or the optimizer has no
      `learning_rate` hyper-parameter.
  """
  if not isinstance(learning_rate, schedules.Schedule):
    raise TypeError('the server learning rate must be a '
                    f'tff_mixed.schedules.Schedule, got {learning_rate!r}.')
  if learning_rate.uses_loss:
    raise ValueError(
        f'the server learning rate cannot follow {type(learning_rate).__name__}'
        ': it reads the client loss, which the server step does not see; use '
        'a schedule of the round (constant, exponential, inverse_time, power, '
        'theorem2).')
  inner = tff.learning.templates.build_apply_optimizer_finalizer(
      optimizer, model_weights_type)
  inner_state_type = inner.initialize.type_signature.result.member

  @tff.tensorflow.computation(inner_state_type)
  def _keys(state):
    return optimizer.get_hparams(state)

  if LEARNING_RATE not in [n for n, _ in tff.structure.iter_elements(
      _keys.type_signature.result)]:
    raise ValueError(
        'a server learning-rate schedule needs a server optimizer with a '
        f'{LEARNING_RATE!r} hyper-parameter; this one has '
        f'{_keys.type_signature.result}.')

  def with_rate(state):
    inner_state = state[OPTIMIZER]
    hparams = collections.OrderedDict(optimizer.get_hparams(inner_state))
    dtype = getattr(hparams[LEARNING_RATE], 'dtype', tf.float32)
    hparams[LEARNING_RATE] = tf.cast(
        learning_rate.value(state[SCHEDULE]), dtype)
    return optimizer.set_hparams(inner_state, hparams)

  @tff.tensorflow.computation(inner_state_type)
  def initial_state(inner_state):
    state = collections.OrderedDict([
        (OPTIMIZER, inner_state), (ROUND_NUM, np.int32(0)),
        (SCHEDULE, learning_rate.initialize())])
    state[OPTIMIZER] = with_rate(state)
    return state

  @tff.federated_computation
  def init_fn():
    return tff.federated_map(initial_state, inner.initialize())

  state_type = init_fn.type_signature.result.member

  @tff.tensorflow.computation(state_type)
  def optimizer_state(state):
    return state[OPTIMIZER]

  @tff.tensorflow.computation(state_type, inner_state_type)
  def advance(state, new_inner):
    nan = tf.constant(np.nan, tf.float64)
    new_state = collections.OrderedDict([
        (OPTIMIZER, new_inner), (ROUND_NUM, state[ROUND_NUM] + 1),
        (SCHEDULE, learning_rate.next(state[SCHEDULE], state[ROUND_NUM],
                                      nan))])
    new_state[OPTIMIZER] = with_rate(new_state)
    return new_state

  @tff.federated_computation(
      tff.FederatedType(state_type, tff.SERVER),
      inner.next.type_signature.parameter[1],
      inner.next.type_signature.parameter[2],
  )
  def next_fn(state, weights, update):
    output = inner.next(tff.federated_map(optimizer_state, state), weights,
                        update)
    return tff.templates.MeasuredProcessOutput(
        tff.federated_map(advance, (state, output.state)), output.result,
        output.measurements)

  get_hparams_fn, set_hparams_fn = common.whole_state_hparams(state_type)
  return tff.learning.templates.FinalizerProcess(
      init_fn, next_fn, get_hparams_fn=get_hparams_fn,
      set_hparams_fn=set_hparams_fn)
