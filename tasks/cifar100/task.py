"""The CIFAR-100 task: 100-class images, TFF's 500-client label split.

Models (seeds 001 §4.1 and 003 App. B Table 5; seed 001's sizes were lost
in its extraction, seed 003 gives them): Conv 3x3 32 ReLU, max-pool 2x2,
Conv 3x3 64 ReLU, max-pool 2x2, Dense 512 ReLU, Dense 100 softmax, with
unpadded convolutions, on

* `cnn`: 28x28 crops, as seed 003 §B.1's text says (890,404 parameters);
* `cnn32`: the whole 32x32 image (1,250,852 parameters): the network seed
  001 Table 1's 40.0 Mb model (32-bit floats) and seed 003 Table 4's CIFAR
  FLOPs are counted for (`tests/test_flops.py`). Its training images are
  flipped, not cropped.

Training images are randomly cropped and flipped (`data.preprocess_train`),
evaluation images centre-cropped; both standardised per image.
"""

import collections
from typing import Optional

import tensorflow as tf

from tasks.common import flops
from tasks.common import keras_models
from tasks.common import sources
from tasks.cifar100 import data
from tff_mixed.task import Task

MODELS = ('cnn', 'cnn32')
# Each model's input: the crop its images are cut to.
INPUT_SHAPES = {'cnn': data.CROP_SHAPE, 'cnn32': (32, 32, 3)}
# What a binary's --data_dir is.
DATA_HELP = "TFF's cache directory holding cifar100.sqlite (default ~/.tff)."


def keras_model(model: str = 'cnn') -> tf.keras.Model:
  if model not in MODELS:
    raise ValueError(f'model must be one of {MODELS}, got {model!r}.')
  layers = tf.keras.layers
  return tf.keras.Sequential([
      layers.InputLayer(input_shape=INPUT_SHAPES[model]),
      layers.Conv2D(32, 3, activation='relu'), layers.MaxPooling2D(2),
      layers.Conv2D(64, 3, activation='relu'), layers.MaxPooling2D(2),
      layers.Flatten(), layers.Dense(512, activation='relu'),
      layers.Dense(data.NUM_CLASSES, activation='softmax'),
  ])


def input_spec(model: str = 'cnn') -> collections.OrderedDict:
  return collections.OrderedDict(
      x=tf.TensorSpec([None, *INPUT_SHAPES[model]], tf.float32),
      y=tf.TensorSpec([None], tf.int64))


def model_fn_for(model: str = 'cnn'):
  keras_model(model)  # Checks the name now.
  return keras_models.sparse_classifier(lambda: keras_model(model),
                                        input_spec(model))


def create_task(data_dir: Optional[str] = None, *, model: str = 'cnn',
                batch_size: int = 32, max_train_clients: Optional[int] = None,
                download: bool = True, seed: int = 0,
                flops_convention: str = flops.OURS) -> Task:
  """The task; `data_dir` is TFF's cache directory (default `~/.tff`).

  `seed` seeds the training crops and flips (`data.client_seed`);
  `flops_convention` is how `Task.flops_per_example` counts
  (`tasks.common.flops`).
  """
  model_fn = model_fn_for(model)
  crop = INPUT_SHAPES[model]
  train, test = data.load(data_dir, download=download)
  # The papers use all 500; a smaller run draws its clients from `seed`.
  ids = sources.choose_clients(train.client_ids, max_train_clients,
                               seed=seed, name='CIFAR-100')
  return Task(
      name='cifar100',
      model_fn=model_fn,
      train_client_ids=ids,
      train_dataset_fn=lambda cid: data.preprocess_train(
          train.create_tf_dataset_for_client(cid), batch_size,
          data.client_seed(seed, cid), crop_shape=crop),
      eval_dataset_fn=lambda: data.preprocess_eval(
          test.create_tf_dataset_from_all_clients(), 256, crop_shape=crop),
      train_batch_size=batch_size,
      flops_per_example=flops.flops_per_example(keras_model(model),
                                                flops_convention),
  )


# How long each paper preset takes on a 2-core CPU: the model's steps
# alone (bench/benchmark_round_cost.py; docs/benchmark_tasks.md).
DURATIONS = {
    'paper_001': 'at least 54 hours',
    'paper_003': 'at least 1.3 hours',
}

# Flag values of each paper's setting (`tasks.common.benchmark`); see docs/benchmark_tasks.md, "What the presets set".
# paper_001: §4.1 and Table 1 (500 clients, 25 a round, K = 50, gamma =
#   0.01 from Table 1's two unlabelled columns). §4.1 gives no batch size
#   and its crop size was lost: B = 32 and `cnn32` on the whole 32x32
#   images, the model of Table 1's 40.0 Mb (1,250,852 parameters; a 28x28
#   crop gives 28.5 Mb). 10,000 rounds; Table 2's 0.31 s minibatch.
#   Clients weighted by examples processed (the seed does not say).
# paper_003: App. B.1 (5 a round, B = 32), FedGBO with SGDm at K = 10:
#   Table 8's {eta, beta} = {0.1, 0.9}; 5,000 rounds; `cnn` on 28x28 crops
#   as §B.1's text says (Table 4's FLOPs are `cnn32`'s: docs/
#   benchmark_tasks.md). Clients averaged uniformly (FedGBO's default:
#   §2's server averages the client models). FLOPs counted as seed 003
#   counts them.
PRESETS = {
    'paper_001': dict(model='cnn32', algorithm='fedavg', batch_size=32,
                      clients_per_round=25, num_local_steps=50,
                      client_learning_rate=0.01, rounds=10000,
                      eval_every=100, minibatch_seconds=0.31),
    'paper_003': dict(model='cnn', algorithm='fed_gbo', optimizer='sgdm',
                      client_learning_rate=0.1, beta=0.9, batch_size=32,
                      clients_per_round=5, num_local_steps=10, rounds=5000,
                      eval_every=50, flops_convention='seed_003'),
    'cpu_small': dict(model='cnn', algorithm='fedavg',
                      client_learning_rate=0.05, rounds=5, clients_per_round=2,
                      num_local_steps=2, eval_every=1, checkpoint_every=5,
                      max_train_clients=4, batch_size=8),
}
