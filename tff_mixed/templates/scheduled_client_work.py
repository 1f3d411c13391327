"""K and the client learning rate following `tff_mixed.schedules`.

`with_schedules` wraps a K-step client work (any whose state has
`num_local_steps` and `optimizer_hparams`, as `build_k_step_client_work`'s
does) the way TFF's `fed_avg_with_optimizer_schedule` moves a client
learning rate with the round: the schedules' states live in the wrapper's
part of the state, not in what clients receive, and after each round the
wrapper advances them with the round's `first_step_loss` (seed 001's loss
estimate) and writes the next K (seed 000's decaying K) and learning rate
(its decaying-rate baseline) into the inner state. A resumed run continues
a schedule exactly.
"""

import collections
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed import keys
from tff_mixed import schedules
from tff_mixed.templates import common
from tff_mixed.templates import composers

ROUND_NUM = 'round_num'
SCHEDULES = 'schedules'


class Schedules:
  """K's and the learning rate's schedules over a K-step client-work state.

  The state (an `OrderedDict` with `num_local_steps` and
  `optimizer_hparams`) gains `round_num` and `schedules`; `initialize` and
  `advance` run inside TensorFlow computations. Shared by `with_schedules`
  and the selected-rows process, whose client side is not a
  `ClientWorkProcess`.
  """

  def __init__(self, num_local_steps: schedules.ScheduleOrSteps,
               learning_rate: Optional[schedules.ScheduleOrValue],
               hparam_keys):
    self._map = collections.OrderedDict([(keys.NUM_LOCAL_STEPS,
                                          schedules.as_schedule(
                                              num_local_steps,
                                              'num_local_steps',
                                              integer=True))])
    if learning_rate is not None:
      if keys.LEARNING_RATE not in hparam_keys:
        raise ValueError(
            f'learning_rate was given, but the client optimizer has no '
            f'{keys.LEARNING_RATE!r} hyper-parameter.')
      self._map[keys.LEARNING_RATE] = schedules.as_schedule(
          learning_rate, 'learning_rate')

  def _with_values(self, state, initial=False):
    """`state` with K and the learning rate its schedules give.

    A constant sets its value only initially, so that a value set by hand
    with `set_hparams` stays.
    """
    state = collections.OrderedDict(state)
    values = collections.OrderedDict(
        (key, schedule.value(state[SCHEDULES][key]))
        for key, schedule in self._map.items()
        if initial or not isinstance(schedule, schedules.Constant))
    if keys.NUM_LOCAL_STEPS in values:
      state[keys.NUM_LOCAL_STEPS] = schedules.num_steps(
          values[keys.NUM_LOCAL_STEPS])
    if keys.LEARNING_RATE in values:
      scheduled = collections.OrderedDict(state[keys.OPTIMIZER_HPARAMS])
      dtype = getattr(scheduled[keys.LEARNING_RATE], 'dtype', tf.float32)
      scheduled[keys.LEARNING_RATE] = tf.cast(
          values[keys.LEARNING_RATE], dtype)
      state[keys.OPTIMIZER_HPARAMS] = scheduled
    return state

  def initialize(self, state):
    """`state` with the schedules' states and their first values."""
    state = collections.OrderedDict(state)
    state[ROUND_NUM] = np.int32(0)
    state[SCHEDULES] = collections.OrderedDict(
        (key, schedule.initialize()) for key, schedule in self._map.items())
    return self._with_values(state, initial=True)

  def advance(self, state, new_state, first_step_loss):
    """`new_state` (the round's result of `state`) for the next round."""
    new_state = collections.OrderedDict(new_state)
    new_state[ROUND_NUM] = state[ROUND_NUM] + 1
    new_state[SCHEDULES] = collections.OrderedDict(
        (key, schedule.next(state[SCHEDULES][key], state[ROUND_NUM],
                            first_step_loss))
        for key, schedule in self._map.items())
    return self._with_values(new_state)


def with_schedules(
    client_work: tff.learning.templates.ClientWorkProcess,
    *,
    num_local_steps: schedules.ScheduleOrSteps,
    learning_rate: Optional[schedules.ScheduleOrValue] = None,
) -> tff.learning.templates.ClientWorkProcess:
  """`client_work` whose K and learning rate follow schedules.

  State: the inner state's keys, then `round_num` (rounds completed) and
  `schedules` (`OrderedDict(num_local_steps=..., learning_rate=...)`, the
  schedules' states; a constant has a one-value state too). `set_hparams`
  replaces the whole state: a K or learning rate set by hand stays when it
  is constant and lasts one round when it follows a schedule. The inner
  client work's measurements (and uploads, for a
  `composers.UploadingClientWork`) are passed on unchanged.

  Args:
    client_work: A K-step `ClientWorkProcess`.
    num_local_steps: K: an int >= 1 or a `tff_mixed.schedules.Schedule`
      (its values become `max(ceil(v), 1)` steps).
    learning_rate: None (keep the optimizer's), a number or a schedule for
      the client optimizer's `learning_rate` hyper-parameter.

  Raises:
    TypeError, ValueError: For a bad schedule, or a `learning_rate` for an
      optimizer without that hyper-parameter.
  """
  inner_type = client_work.initialize.type_signature.result.member
  inner_keys = [name for name, _ in tff.structure.iter_elements(inner_type)]
  for key in (keys.NUM_LOCAL_STEPS, keys.OPTIMIZER_HPARAMS):
    if key not in inner_keys:
      raise ValueError(f'with_schedules needs a client work whose state has '
                       f'{key!r}; this one has {inner_keys}.')
  hparam_keys = [name for name, _ in tff.structure.iter_elements(
      inner_type[keys.OPTIMIZER_HPARAMS])]
  scheduled = Schedules(num_local_steps, learning_rate, hparam_keys)

  @tff.tensorflow.computation(inner_type)
  def initial_state(inner):
    return scheduled.initialize(inner)

  @tff.federated_computation
  def init_fn():
    return tff.federated_map(initial_state, client_work.initialize())

  state_type = init_fn.type_signature.result.member

  @tff.tensorflow.computation(state_type)
  def inner_state(state):
    return collections.OrderedDict((key, state[key]) for key in inner_keys)

  measurements_type = client_work.next.type_signature.result.measurements.member

  @tff.tensorflow.computation(state_type, inner_type, measurements_type)
  def advance(state, new_inner, measurements):
    """The inner state of the round, the schedules advanced, next K and lr."""
    return scheduled.advance(
        state, new_inner, measurements[keys.FIRST_STEP_LOSS])

  uploading = isinstance(client_work, composers.UploadingClientWork)
  inner_next = (client_work.next_with_uploads if uploading
                else client_work.next)

  @tff.federated_computation(
      tff.FederatedType(state_type, tff.SERVER),
      client_work.next.type_signature.parameter[1],
      client_work.next.type_signature.parameter[2],
  )
  def next_fn(state, weights, data):
    output = inner_next(tff.federated_map(inner_state, state), weights, data)
    new_state = tff.federated_map(
        advance, (state, output.state, output.measurements))
    if uploading:  # The inner uploads, passed on.
      return collections.OrderedDict(
          state=new_state, result=output.result,
          measurements=output.measurements,
          **{composers.UPLOADS: getattr(output, composers.UPLOADS)})
    return tff.templates.MeasuredProcessOutput(
        new_state, output.result, output.measurements)

  get_hparams_fn, set_hparams_fn = common.whole_state_hparams(state_type)
  process = (composers.UploadingClientWork if uploading
             else tff.learning.templates.ClientWorkProcess)
  return process(init_fn, next_fn, get_hparams_fn=get_hparams_fn,
                 set_hparams_fn=set_hparams_fn)
