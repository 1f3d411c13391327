"""Adam as seed 000 writes it (App. B, Algorithm 3), as a `tff.learning`
optimizer; `tff_mixed.optimizers.build_seed000_adam` is its builder."""

import collections

import tensorflow as tf
import tensorflow_federated as tff

from tff_mixed import checks
from tff_mixed import keys

LEARNING_RATE = keys.LEARNING_RATE


class Seed000Adam(tff.learning.optimizers.Optimizer):
  """Adam as seed 000 writes it (App. B, Algorithm 3); see `build_seed000_adam`."""

  def __init__(self, learning_rate: float, beta_1: float, beta_2: float,
               epsilon: float):
    self._hparams = collections.OrderedDict([
        (LEARNING_RATE, checks.check_number(
            learning_rate, 'learning_rate', allow_zero=True)),
        ('beta_1', checks.check_decay(beta_1, 'beta_1', allow_one=False)),
        ('beta_2', checks.check_decay(beta_2, 'beta_2', allow_one=False)),
        ('epsilon', checks.check_number(epsilon, 'epsilon',
                                        allow_zero=True))])

  def initialize(self, specs):
    zeros = lambda: [tf.zeros(s.shape, s.dtype) for s in tf.nest.flatten(specs)]
    state = collections.OrderedDict(self._hparams)
    state.update(step=0, m=zeros(), v=zeros())
    return state

  def next(self, state, weights, gradients):
    flat_weights = tf.nest.flatten(weights)
    flat_gradients = [tf.convert_to_tensor(g)
                      for g in tf.nest.flatten(gradients)]
    step = state['step'] + 1
    t = tf.cast(step, tf.float64)
    beta_1 = tf.cast(state['beta_1'], tf.float64)
    beta_2 = tf.cast(state['beta_2'], tf.float64)
    # eta_t = alpha sqrt(1 - b2^t) / (1 - b1^t)               (line 11)
    rate = (tf.cast(state[LEARNING_RATE], tf.float64)
            * tf.sqrt(1.0 - tf.pow(beta_2, t)) / (1.0 - tf.pow(beta_1, t)))
    new_m, new_v, new_weights = [], [], []
    for w, g, m, v in zip(flat_weights, flat_gradients, state['m'],
                          state['v']):
      cast = lambda x, like=g: tf.cast(x, like.dtype)
      m = cast(beta_1) * m + (1.0 - cast(beta_1)) * g          # line 9
      v = cast(beta_2) * v + (1.0 - cast(beta_2)) * tf.square(g)  # line 10
      # x_{t+1} = x_t - eta_t m_t / sqrt(v_t + eps)            (line 12)
      new_weights.append(w - cast(rate) * m / tf.sqrt(
          v + cast(state['epsilon'])))
      new_m.append(m)
      new_v.append(v)
    state = collections.OrderedDict(state)
    state.update(step=step, m=new_m, v=new_v)
    return state, tf.nest.pack_sequence_as(weights, new_weights)

  def get_hparams(self, state):
    return collections.OrderedDict((k, state[k]) for k in self._hparams)

  def set_hparams(self, state, hparams):
    state = collections.OrderedDict(state)
    state.update((k, hparams[k]) for k in self._hparams)
    return state


def build_seed000_adam(learning_rate: float, beta_1: float = 0.9,
                       beta_2: float = 0.999,
                       epsilon: float = 1e-8) -> Seed000Adam:
  """Seed 000's server Adam (App. B, Algorithm 3) as a `tff.learning` optimizer.

    m_t = b1 m_{t-1} + (1 - b1) q_t,   v_t = b2 v_{t-1} + (1 - b2) q_t^2,
    eta_t = alpha sqrt(1 - b2^t) / (1 - b1^t),
    x_{t+1} = x_t - eta_t m_t / sqrt(v_t + eps),

  m_0 = v_0 = 0, with the paper's b1 = 0.9, b2 = 0.999, eps = 1e-8 (App. B,
  after Kingma & Ba). It differs from `tff.learning.optimizers.build_adam`
  only in where eps sits: inside the square root here, outside there
  (`m / (sqrt(v) + eps)`). The difference shows where v is small, e.g. the
  first rounds of a sparse model such as Stack Overflow's logistic
  regression.
  """
  return Seed000Adam(learning_rate, beta_1, beta_2, epsilon)
