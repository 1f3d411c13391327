"""The SyntheticSeq next-token task: data, the model that mirrors the
generator, and full-batch evaluation on the union of the clients' data.

The model (seed 002 Listing 4.1): Embedding(|V|, E) -> tanh RNN(H) without
bias -> Dense(|V|) without bias, trained on next-token cross-entropy
(every position of a sequence predicts the following token; the thesis
does not name its loss). Every client is one full batch of its sequences.
"""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tasks.synthetic_seq import data


def create_keras_model(config: data.SyntheticSeqConfig) -> tf.keras.Model:
  return tf.keras.Sequential([
      tf.keras.layers.InputLayer(input_shape=(config.sequence_length - 1,),
                                 dtype=tf.int32),
      tf.keras.layers.Embedding(config.vocab_size, config.embedding_dim),
      tf.keras.layers.SimpleRNN(config.hidden_dim, activation='tanh',
                                use_bias=False, return_sequences=True),
      tf.keras.layers.Dense(config.vocab_size, use_bias=False),
  ])


def loss_fn():
  return tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def input_spec(config: data.SyntheticSeqConfig):
  length = config.sequence_length - 1
  return collections.OrderedDict(
      x=tf.TensorSpec([None, length], tf.int32),
      y=tf.TensorSpec([None, length], tf.int32))


def model_fn_for(config: data.SyntheticSeqConfig):
  def model_fn():
    return tff.learning.models.from_keras_model(
        create_keras_model(config), loss=loss_fn(),
        input_spec=input_spec(config))
  return model_fn


def initial_weights(config: data.SyntheticSeqConfig, seed: int = 0):
  """The trainable weights every run starts from (Keras's initialisers,
  seeded), in `model.trainable_weights` order."""
  tf.keras.utils.set_random_seed(seed)
  return [w.numpy() for w in create_keras_model(config).trainable_weights]


def sequence_loss(weights, x, y) -> tf.Tensor:
  """The model's mean next-token cross-entropy, in plain TensorFlow.

  `weights` are the trainable weights in `model.trainable_weights` order
  (embedding, RNN kernel, RNN recurrent kernel, output kernel). This is the
  Keras model's computation without Keras, for eager code that runs beside
  TFF's graph-mode models (Keras does not allow models of both kinds).
  """
  embedding, kernel, recurrent, output = weights
  inputs = tf.gather(embedding, x)  # (batch, time, E)
  hidden = tf.zeros([tf.shape(x)[0], tf.shape(recurrent)[0]], kernel.dtype)
  states = []
  for t in range(x.shape[1]):
    hidden = tf.tanh(inputs[:, t] @ kernel + hidden @ recurrent)
    states.append(hidden)
  logits = tf.stack(states, axis=1) @ output
  return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=y, logits=logits))


def examples(sequences: np.ndarray) -> collections.OrderedDict:
  """Inputs are the first length - 1 tokens, labels the last length - 1."""
  return collections.OrderedDict(x=sequences[:, :-1].astype(np.int32),
                                 y=sequences[:, 1:].astype(np.int32))


def full_batch(sequences: np.ndarray) -> tf.data.Dataset:
  return tf.data.Dataset.from_tensor_slices(examples(sequences)).batch(
      len(sequences))
