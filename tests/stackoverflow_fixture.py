"""Tiny Stack Overflow and Wikipedia sources in their own on-disk formats.

Stack Overflow: `<cache_dir>/stackoverflow.sqlite`, TFF's SqlClientData
database of `tf.Example`s with the fields TFF's loader parses. Wikipedia: a
prepared TFDS `wikipedia/20201201.en` directory (TFRecord shard, features and
dataset info) that `tfds.load(..., download=False)` reads like the real one.
"""

import os

import tensorflow as tf

from tasks.common.fixtures import write_wikipedia  # pylint: disable=unused-import
from tasks.stackoverflow_wiki import data
from tests import tff_sqlite


def _post(text):
  def feature(value):
    if isinstance(value, int):
      return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
    return tf.train.Feature(
        bytes_list=tf.train.BytesList(value=[value.encode()]))
  fields = dict(creation_date='2010-01-01', score=1, tags='python',
                title='a title', tokens=text, type='question')
  return tf.train.Example(features=tf.train.Features(
      feature={k: feature(v) for k, v in fields.items()})).SerializeToString()


def write_stackoverflow(cache_dir, clients):
  """`clients`: {(split, client_id): [post text, ...]}; returns the db path."""
  return tff_sqlite.write(
      os.path.join(cache_dir, data.STACKOVERFLOW_FILE),
      {key: [_post(text) for text in texts] for key, texts in clients.items()})
