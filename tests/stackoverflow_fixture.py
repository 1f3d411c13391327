"""Tiny Stack Overflow and Wikipedia sources in their own on-disk formats.

Stack Overflow: `<cache_dir>/stackoverflow.sqlite`, TFF's SqlClientData
database of `tf.Example`s with the fields TFF's loader parses. Wikipedia: a
prepared TFDS `wikipedia/20201201.en` directory (TFRecord shard, features and
dataset info) that `tfds.load(..., download=False)` reads like the real one.
"""

import os

import tensorflow as tf
import tensorflow_datasets as tfds

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


def write_wikipedia(data_dir, articles):
  """`articles`: [(title, text), ...] as TFDS's prepared 'train' split."""
  builder = tfds.builder(data.WIKIPEDIA, data_dir=data_dir)
  os.makedirs(builder.data_dir, exist_ok=True)
  template = tfds.core.ShardedFileTemplate(
      data_dir=builder.data_dir, dataset_name='wikipedia', split='train',
      filetype_suffix='tfrecord',
      template='{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}')
  with tf.io.TFRecordWriter(
      os.fspath(template.sharded_filepath(shard_index=0, num_shards=1))) as w:
    for title, text in articles:
      w.write(builder.info.features.serialize_example(
          {'title': title, 'text': text}))
  builder.info.set_splits(tfds.core.SplitDict([tfds.core.SplitInfo(
      name='train', shard_lengths=[len(articles)], num_bytes=0,
      filename_template=template)]))
  builder.info.write_to_directory(builder.data_dir)
  return builder.data_dir
