"""Seed 000 §3's one-dimensional quadratic problem, exactly as specified.

Client z in [1, 3] holds one example z and has loss f(x; z) = z x^2 / 2 - x
(minimiser 1/z). Clients are selected with (un-normalised) probability
p(z) = z^(-1/2), batch size 1, initial model x_0 = 0.4. The true objective is
f(x) = E_p[f(x; z)], minimised at x* = E_p[1] / E_p[z] ~= 0.523.

With K local SGD steps at learning rate gamma, client z moves x to
1/z + (1 - gamma z)^K (x - 1/z), so FedAvg's expected update vanishes at the
surrogate minimiser (seed 000 Eq. 4-6 in one dimension)

  x*(gamma, K) = E_p[phi(z) / z] / E_p[phi(z)],  phi(z) = 1 - (1 - gamma z)^K,

which equals x* when K = 1 and moves away from it as K grows.
"""

import collections
import math
from typing import Optional

import numpy as np
from scipy import integrate
import tensorflow as tf
import tensorflow_federated as tff

from tasks.common import flag_table
from tasks.common import task_runs
from tasks.common.built_task import BuiltTask
from tff_mixed.task import Task

Z_LOW, Z_HIGH = 1.0, 3.0
INITIAL_X = 0.4


def _expect(fn) -> float:
  """E_p[fn(z)] for p(z) proportional to z^(-1/2) on [Z_LOW, Z_HIGH]."""
  weighted, _ = integrate.quad(lambda z: fn(z) / math.sqrt(z), Z_LOW, Z_HIGH)
  return weighted / (2.0 * (math.sqrt(Z_HIGH) - math.sqrt(Z_LOW)))


def true_minimiser() -> float:
  """x* = E_p[1] / E_p[z] in closed form: 3 (sqrt3 - 1) / (3 sqrt3 - 1)."""
  return 3.0 * (math.sqrt(Z_HIGH) - 1.0) / (Z_HIGH * math.sqrt(Z_HIGH) - 1.0)


def surrogate_minimiser(learning_rate: float, num_local_steps: int) -> float:
  """x*(gamma, K): the fixed point of FedAvg with K steps at rate gamma."""
  phi = lambda z: 1.0 - (1.0 - learning_rate * z) ** num_local_steps
  return _expect(lambda z: phi(z) / z) / _expect(phi)


def sample_z(rng: np.random.Generator, n: int) -> np.ndarray:
  """Inverse-CDF draws: sqrt(z) is uniform on [1, sqrt(3)]."""
  u = rng.uniform(size=n)
  root = math.sqrt(Z_LOW) + u * (math.sqrt(Z_HIGH) - math.sqrt(Z_LOW))
  return root**2


def z_quantiles(n: int) -> np.ndarray:
  """n deterministic z values at the mid-quantiles of p (for evaluation)."""
  u = (np.arange(n) + 0.5) / n
  return (math.sqrt(Z_LOW) + u * (math.sqrt(Z_HIGH) - math.sqrt(Z_LOW))) ** 2


class QuadraticModel(tff.learning.models.VariableModel):
  """The scalar model x with loss mean_b(z_b x^2 / 2 - x).

  Metrics: `loss` (mean over examples) and `x` (the model value, averaged
  over examples, so it is x itself in evaluation).
  """

  def __init__(self, initial_x: float = INITIAL_X):
    self._x = tf.Variable(initial_x, dtype=tf.float32, name='x')
    self._loss_sum = tf.Variable(0.0, trainable=False)
    self._x_sum = tf.Variable(0.0, trainable=False)
    self._count = tf.Variable(0, dtype=tf.int64, trainable=False)

  @property
  def trainable_variables(self):
    return [self._x]

  @property
  def non_trainable_variables(self):
    return []

  @property
  def local_variables(self):
    return [self._loss_sum, self._x_sum, self._count]

  @property
  def input_spec(self):
    return collections.OrderedDict(z=tf.TensorSpec([None], tf.float32))

  @tf.function(autograph=False)
  def predict_on_batch(self, x, training=True):
    del training
    return tf.fill(tf.shape(x['z']), self._x)

  @tf.function(autograph=False)
  def forward_pass(self, batch_input, training=True):
    z = batch_input['z']
    per_example = 0.5 * z * self._x * self._x - self._x
    n = tf.shape(z, out_type=tf.int64)[0]
    self._loss_sum.assign_add(tf.reduce_sum(per_example))
    self._x_sum.assign_add(tf.cast(n, tf.float32) * self._x)
    self._count.assign_add(n)
    return tff.learning.models.BatchOutput(
        loss=tf.reduce_mean(per_example),
        predictions=tf.fill(tf.shape(z), self._x),
        num_examples=n,
    )

  @tf.function(autograph=False)
  def report_local_unfinalized_metrics(self):
    count = tf.cast(self._count, tf.float32)
    return collections.OrderedDict(
        loss=[self._loss_sum.read_value(), count],
        x=[self._x_sum.read_value(), count],
        num_examples=[self._count.read_value()],
    )

  def metric_finalizers(self):
    ratio = tf.function(lambda v: tf.math.divide_no_nan(v[0], v[1]),
                        autograph=False)
    return collections.OrderedDict(
        loss=ratio, x=ratio, num_examples=tf.function(lambda v: v[0], autograph=False)
    )

  @tf.function(autograph=False)
  def reset_metrics(self):
    for v in self.local_variables:
      v.assign(tf.zeros_like(v))


def client_id(z: float) -> str:
  return repr(float(z))


def client_dataset(cid: str) -> tf.data.Dataset:
  """Client z's one example, as a single batch of size 1."""
  return tf.data.Dataset.from_tensors(
      collections.OrderedDict(z=tf.constant([float(cid)], tf.float32))
  )


def create_quadratic_task(
    initial_x: float = INITIAL_X, num_eval_points: Optional[int] = 1000
) -> Task:
  """The seed 000 §3 task; the evaluation loss approximates the true f(x)."""

  def sampler(rng, num_clients):
    return [client_id(z) for z in sample_z(rng, num_clients)]

  eval_fn = None
  if num_eval_points:
    eval_z = z_quantiles(num_eval_points).astype(np.float32)
    eval_fn = lambda: tf.data.Dataset.from_tensors(
        collections.OrderedDict(z=eval_z)
    )
  return Task(
      name='quadratic',
      model_fn=lambda: QuadraticModel(initial_x),
      # Representative ids; training cohorts come from `sampler`.
      train_client_ids=[client_id(z) for z in (Z_LOW, 2.0, Z_HIGH)],
      train_dataset_fn=client_dataset,
      eval_dataset_fn=eval_fn,
      client_sampler=sampler,
      client_shuffle='none',  # One example a client.
  )


def build(algorithm, run, *, initial_x: float = INITIAL_X) -> BuiltTask:
  """The quadratic task of a run (`tasks.common.task_registry`)."""
  del algorithm, run  # The same task for every algorithm and seed.
  return BuiltTask(create_quadratic_task(initial_x=initial_x))


def _define_flags(table: flag_table.Table) -> None:
  """The binary's own flags (the task's arguments), in `table`."""
  table.define(flag_table.FLOAT, 'initial_x', INITIAL_X, 'Initial model x_0.')


# The binary's defaults (`tasks.common.task_runs`): seed 000 §3's.
RUNS = task_runs.Runs(
    define_flags=_define_flags,
    preset_help='cpu_small: flags you did not set become a 300-round run; '
                'paper: the flags\' defaults, seed 000 §3\'s 3,000 rounds.',
    training_defaults=dict(rounds=3000, clients_per_round=10,
                           num_local_steps=10, client_learning_rate=0.1),
    presets={
        'paper': {},  # The flags' defaults are seed 000 §3's.
        'cpu_small': dict(rounds=300, eval_every=10, checkpoint_every=100),
    },
    preset_durations={'paper': 'about 13 minutes for 3,000 rounds'})
