"""The MovieLens dual encoder, its hinge loss and the spreadout regulariser.

Seed 004 §5.3 and App. C.2.3 use the dual encoder of Ning et al. (2021); the
facts below are from that work's description and public code:

* one N x d movie embedding table (d = 16) shared by both towers;
* left tower: the mean of the context movies' embeddings (padding masked),
  then a Dense(d, ReLU) context layer; right tower: the label's embedding;
* similarity: cosine (both sides L2-normalised);
* client loss: squared hinge on the positive pair,
  mean_b max(0, margin - cos(left_b, right_b))^2 with margin 0.9;
* spreadout regulariser over the whole table:
  ||offdiag(E^ E^T)||_F with E^ the row-normalised table. We compute it from
  the d x d matrix E^T E^ (||E^ E^T||_F^2 = ||E^T E^||_F^2, minus the
  diagonal), O(N d^2) instead of the N^2 d of the pairwise form;
* recall@10: the label is among the 10 table rows most similar to the left
  embedding (all rows ranked, context movies included). Evaluation only:
  training does not score the whole table (a client may hold only some rows),
  so the training metric reads 0.
"""

import collections

import tensorflow as tf
import tensorflow_federated as tff

from tasks.movielens import data

EMBEDDING_DIM = 16
MARGIN = 0.9
SPREADOUT_WEIGHT = 0.001
RECALL_K = 10
TABLE = 0  # Index of the embedding table in `trainable_variables`.


def spreadout(table: tf.Tensor) -> tf.Tensor:
  """||offdiag(E^ E^T)||_F for the row-normalised table E^ (zero rows stay 0)."""
  normalised = tf.math.l2_normalize(table, axis=1)
  gram = tf.matmul(normalised, normalised, transpose_a=True)  # d x d.
  diagonal = tf.reduce_sum(tf.square(normalised), axis=1)  # (e_i . e_i).
  off_diagonal = tf.reduce_sum(tf.square(gram)) - tf.reduce_sum(
      tf.square(diagonal))
  return tf.sqrt(tf.maximum(off_diagonal, 1e-12))


def input_spec(context_length: int = data.CONTEXT_LENGTH):
  return collections.OrderedDict(
      context=tf.TensorSpec([None, context_length], tf.int32),
      label=tf.TensorSpec([None], tf.int32))


class DualEncoder(tff.learning.models.VariableModel):
  """Bag-of-words context tower and embedding-lookup label tower.

  `trainable_variables` are `[table (N x d), context kernel (d x d), context
  bias (d)]`; the table is first (`TABLE`). `spreadout_weight` > 0 adds the
  regulariser to the loss: the baseline, where every client computes it.
  """

  def __init__(self, num_movies: int = data.NUM_MOVIES,
               dim: int = EMBEDDING_DIM,
               context_length: int = data.CONTEXT_LENGTH, *,
               margin: float = MARGIN, spreadout_weight: float = 0.0,
               recall_k: int = RECALL_K, seed: int = 0):
    self._num_movies, self._context_length = num_movies, context_length
    self._margin, self._spreadout_weight = margin, spreadout_weight
    self._recall_k = recall_k
    self._table = tf.Variable(
        tf.random.stateless_uniform([num_movies, dim], [seed, 1], -0.05, 0.05),
        name='movie_embeddings')
    limit = (6.0 / (2 * dim)) ** 0.5  # Glorot uniform.
    self._kernel = tf.Variable(
        tf.random.stateless_uniform([dim, dim], [seed, 2], -limit, limit),
        name='context_kernel')
    self._bias = tf.Variable(tf.zeros([dim]), name='context_bias')
    self._loss_sum = tf.Variable(0.0, trainable=False)
    self._hits = tf.Variable(0.0, trainable=False)
    self._scored = tf.Variable(0.0, trainable=False)
    self._count = tf.Variable(0, dtype=tf.int64, trainable=False)

  @property
  def recall_name(self) -> str:
    return f'recall_at_{self._recall_k}'

  @property
  def trainable_variables(self):
    return [self._table, self._kernel, self._bias]

  @property
  def non_trainable_variables(self):
    return []

  @property
  def local_variables(self):
    return [self._loss_sum, self._hits, self._scored, self._count]

  @property
  def input_spec(self):
    return input_spec(self._context_length)

  def _towers(self, batch):
    context = batch['context']
    mask = tf.cast(context >= 0, tf.float32)[..., tf.newaxis]
    movies = tf.gather(self._table, tf.maximum(context, 0)) * mask
    bag = tf.math.divide_no_nan(tf.reduce_sum(movies, axis=1),
                                tf.reduce_sum(mask, axis=1))
    left = tf.nn.relu(tf.matmul(bag, self._kernel) + self._bias)
    right = tf.gather(self._table, batch['label'])
    return (tf.math.l2_normalize(left, axis=1),
            tf.math.l2_normalize(right, axis=1))

  @tf.function(autograph=False)
  def predict_on_batch(self, x, training=True):
    del training
    left, right = self._towers(x)
    return tf.reduce_sum(left * right, axis=1)

  @tf.function(autograph=False)
  def forward_pass(self, batch_input, training=True):
    left, right = self._towers(batch_input)
    cosine = tf.reduce_sum(left * right, axis=1)
    loss = tf.reduce_mean(tf.square(tf.nn.relu(self._margin - cosine)))
    if self._spreadout_weight:
      loss += self._spreadout_weight * spreadout(self._table)
    n = tf.shape(cosine, out_type=tf.int64)[0]
    if not training:
      scores = tf.matmul(left, tf.math.l2_normalize(self._table, axis=1),
                         transpose_b=True)
      label_score = tf.gather(scores, batch_input['label'], batch_dims=1)
      better = tf.reduce_sum(
          tf.cast(scores > label_score[:, tf.newaxis], tf.int32), axis=1)
      self._hits.assign_add(
          tf.reduce_sum(tf.cast(better < self._recall_k, tf.float32)))
      self._scored.assign_add(tf.cast(n, tf.float32))
    self._loss_sum.assign_add(loss * tf.cast(n, tf.float32))
    self._count.assign_add(n)
    return tff.learning.models.BatchOutput(
        loss=loss, predictions=cosine, num_examples=n)

  @tf.function(autograph=False)
  def report_local_unfinalized_metrics(self):
    return collections.OrderedDict(
        loss=[self._loss_sum.read_value(), tf.cast(self._count, tf.float32)],
        **{self.recall_name: [self._hits.read_value(),
                              self._scored.read_value()]},
        num_examples=[self._count.read_value()],
    )

  def metric_finalizers(self):
    ratio = tf.function(lambda v: tf.math.divide_no_nan(v[0], v[1]),
                        autograph=False)
    return collections.OrderedDict(
        loss=ratio, **{self.recall_name: ratio},
        num_examples=tf.function(lambda v: v[0], autograph=False))

  @tf.function(autograph=False)
  def reset_metrics(self):
    for v in self.local_variables:
      v.assign(tf.zeros_like(v))


def model_fn_for(num_movies: int = data.NUM_MOVIES, dim: int = EMBEDDING_DIM,
                 context_length: int = data.CONTEXT_LENGTH, *,
                 spreadout_weight: float = 0.0, seed: int = 0):
  """No-arg `DualEncoder` builder (`spreadout_weight` > 0: the baseline)."""
  return lambda: DualEncoder(num_movies, dim, context_length,
                             spreadout_weight=spreadout_weight, seed=seed)


def spreadout_loss_fn(weight: float = SPREADOUT_WEIGHT):
  """The data-free central loss for `build_mixed_fl`:
  `weight * spreadout(table)`, computed only at the server."""

  def central_loss_fn(model, unused_batch):
    return weight * spreadout(model.trainable_variables[TABLE])

  return central_loss_fn
