r"""Small datasets in each source's own on-disk format, for offline runs.

The benchmark tasks read TFF's SQLite client data (FEMNIST, Shakespeare,
CIFAR-100, Stack Overflow with its word and tag counts) and LEAF's Sent140
JSON. None can be downloaded on an offline machine, so this module writes
tiny random stand-ins in exactly those formats: the tests read them through
the real loaders, and a smoke run of any binary can too:

  python -m tasks.common.fixtures --output_dir=/tmp/fixtures
  python -m tasks.femnist.train --preset=cpu_small \
      --data_dir=/tmp/fixtures/tff --output_dir=/tmp/femnist_small

Layout under `output_dir`: `tff/` (TFF's cache directory: `emnist_all.sqlite`,
`shakespeare.sqlite`, `cifar100.sqlite`, `stackoverflow.sqlite`,
`datasets/stackoverflow.word_count`, `datasets/stackoverflow.tag_count`) and
`sent140/` (LEAF's `train/` and `test/` JSON files). The contents are random
(labels carry a little signal so that a few rounds lower the loss); only the
formats are real.
"""

import json
import os
import sqlite3
from collections.abc import Mapping, Sequence

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

from tasks.common import command

TFF_DIR = 'tff'
SENT140_DIR = 'sent140'

# The words and tags of the Stack Overflow fixture, most frequent first.
WORDS = ('the', 'python', 'list', 'error', 'java', 'class', 'function',
         'string', 'array', 'loop')
TAGS = ('python', 'java', 'javascript', 'c++', 'android', 'html')


# ----------------------------------------------------------- TFF's SQLite
def write_sql_client_data(
    path: str, clients: Mapping[tuple[str, str], Sequence[bytes]]) -> str:
  """Writes TFF's `SqlClientData` database: tables
  `examples(split_name, client_id, serialized_example_proto)` and
  `client_metadata(client_id, split_name, num_examples)`.

  Args:
    path: The database file to create.
    clients: `{(split, client_id): [serialized tf.Example, ...]}`.
  """
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with sqlite3.connect(path) as db:
    db.execute('CREATE TABLE examples (split_name TEXT, client_id TEXT, '
               'serialized_example_proto BLOB)')
    db.execute('CREATE TABLE client_metadata (client_id TEXT, '
               'split_name TEXT, num_examples INTEGER)')
    for (split, cid), examples in clients.items():
      db.executemany('INSERT INTO examples VALUES (?, ?, ?)',
                     [(split, cid, e) for e in examples])
      db.execute('INSERT INTO client_metadata VALUES (?, ?, ?)',
                 (cid, split, len(examples)))
  return path


def _example(**features) -> bytes:
  """A serialized `tf.Example` of int, float and bytes lists."""
  def feature(value):
    value = np.asarray(value)
    if value.dtype.kind in 'iub':
      return tf.train.Feature(int64_list=tf.train.Int64List(
          value=value.ravel().tolist()))
    if value.dtype.kind == 'f':
      return tf.train.Feature(float_list=tf.train.FloatList(
          value=value.ravel().tolist()))
    return tf.train.Feature(bytes_list=tf.train.BytesList(
        value=[str(value).encode()]))
  return tf.train.Example(features=tf.train.Features(feature={
      k: feature(v) for k, v in features.items()})).SerializeToString()


def _splits(rng, num_clients, per_client, make, splits=('train', 'test')):
  clients = {}
  for split in splits:
    for c in range(num_clients):
      n = int(rng.integers(per_client // 2, per_client + 1))
      clients[(split, f'{split}_{c:03d}')] = [make(rng) for _ in range(n)]
  return clients


def write_emnist(cache_dir: str, *, num_clients: int = 6,
                 per_client: int = 12, seed: int = 0) -> str:
  """`emnist_all.sqlite` with splits `all_train` / `all_test`: 28x28 float
  `pixels` (1 is background, as in TFF's) and int `label` in [0, 62)."""
  def make(rng):
    label = int(rng.integers(62))
    pixels = np.ones((28, 28), np.float32)
    pixels[label % 28, :] = 0.0  # A stroke whose row depends on the label.
    pixels -= 0.1 * rng.random((28, 28), dtype=np.float32)
    return _example(pixels=pixels, label=label)
  rng = np.random.default_rng(seed)
  clients = _splits(rng, num_clients, per_client, make,
                    splits=('all_train', 'all_test'))
  # The digits-only splits TFF's loader can also read.
  clients.update({('digits_only_' + s[4:], c): e
                  for (s, c), e in list(clients.items())})
  return write_sql_client_data(os.path.join(cache_dir, 'emnist_all.sqlite'),
                               clients)


_LINES = ('To be, or not to be: that is the question.',
          'All the world\'s a stage, and all the men and women merely '
          'players.', 'What light through yonder window breaks?',
          'Now is the winter of our discontent.')


def write_shakespeare(cache_dir: str, *, num_clients: int = 6,
                      per_client: int = 6, seed: int = 0) -> str:
  """`shakespeare.sqlite` with splits `train` / `test`: string `snippets`."""
  def make(rng):
    return _example(snippets=' '.join(
        _LINES[i] for i in rng.integers(len(_LINES), size=3)))
  return write_sql_client_data(
      os.path.join(cache_dir, 'shakespeare.sqlite'),
      _splits(np.random.default_rng(seed), num_clients, per_client, make))


def write_leaf_shakespeare(leaf_dir: str, *, num_clients: int = 6,
                           seed: int = 0, window: int = 80) -> str:
  """LEAF's Shakespeare `train/` and `test/` JSON files (what LEAF's
  `preprocess.sh -t sample -tf 0.8` writes): every `window`-character
  window of a speaker's text (LEAF's 80, which `tasks.shakespeare.leaf`
  reads) with the character after it, the first 80% of a speaker's samples
  for training, the rest for testing. Speakers have different amounts of
  text."""
  rng = np.random.default_rng(seed)
  splits = {'train': {}, 'test': {}}
  for c in range(num_clients):
    text = ' '.join(_LINES[i] for i in rng.integers(len(_LINES),
                                                     size=3 + c))
    samples = [(text[i:i + window], text[i + window])
               for i in range(len(text) - window)]
    cut = int(0.8 * len(samples))
    for split, part in (('train', samples[:cut]), ('test', samples[cut:])):
      splits[split][f'SPEAKER_{c:02d}'] = part
  for split, users in splits.items():
    os.makedirs(os.path.join(leaf_dir, split), exist_ok=True)
    with open(os.path.join(leaf_dir, split, f'all_data_{split}.json'),
              'w') as f:
      json.dump({'users': list(users),
                 'num_samples': [len(v) for v in users.values()],
                 'user_data': {u: {'x': [x for x, _ in v],
                                   'y': [y for _, y in v]}
                               for u, v in users.items()}}, f)
  return leaf_dir


def write_shakespeare_both(data_dir: str) -> str:
  """TFF's database and LEAF's files in one directory (their layouts do not
  meet): `--data_dir` of either kind of model."""
  write_shakespeare(data_dir)
  return write_leaf_shakespeare(data_dir)


def write_cifar100(cache_dir: str, *, num_clients: int = 6,
                   per_client: int = 10, seed: int = 0) -> str:
  """`cifar100.sqlite` with splits `train` / `test`: 32x32x3 int `image`,
  int `label` in [0, 100) and `coarse_label` = label // 5."""
  def make(rng):
    label = int(rng.integers(100))
    image = rng.integers(0, 64, size=(32, 32, 3))
    image[:, :, label % 3] += 4 * (label % 48)  # Label-dependent colour.
    return _example(image=image, label=label, coarse_label=label // 5)
  return write_sql_client_data(
      os.path.join(cache_dir, 'cifar100.sqlite'),
      _splits(np.random.default_rng(seed), num_clients, per_client, make))


def write_stackoverflow(cache_dir: str, *, num_clients: int = 6,
                        per_client: int = 8, seed: int = 0) -> str:
  """`stackoverflow.sqlite` (splits `train` / `heldout` / `test`, TFF's
  post fields) and the word and tag counts TFF's `load_word_counts` /
  `load_tag_counts` read once extracted (`datasets/stackoverflow.word_count`:
  `word count` lines; `datasets/stackoverflow.tag_count`: a JSON object)."""
  def make(rng):
    tags = sorted(set(rng.choice(TAGS, size=int(rng.integers(1, 3)))))
    words = [*rng.choice(WORDS, size=6), *tags, 'unknownword']
    return _example(creation_date='2010-01-01', score=1, tags='|'.join(tags),
                    title=' '.join(rng.choice(WORDS, size=3)),
                    tokens=' '.join(words), type='question')
  path = write_sql_client_data(
      os.path.join(cache_dir, 'stackoverflow.sqlite'),
      _splits(np.random.default_rng(seed), num_clients, per_client, make,
              splits=('train', 'heldout', 'test')))
  counts = os.path.join(cache_dir, 'datasets')
  os.makedirs(counts, exist_ok=True)
  with open(os.path.join(counts, 'stackoverflow.word_count'), 'w') as f:
    f.writelines(f'{w} {1000 - i}\n' for i, w in enumerate(WORDS))
  with open(os.path.join(counts, 'stackoverflow.tag_count'), 'w') as f:
    json.dump({t: 500 - i for i, t in enumerate(TAGS)}, f)
  return path


# ------------------------------------------------------------ LEAF Sent140
_HAPPY = ('love', 'great', 'happy', 'fun', 'thanks')
_SAD = ('hate', 'sad', 'bad', 'tired', 'sick')
_NEUTRAL = ('today', 'work', 'the', 'a', 'going', 'home')


def write_sent140(leaf_dir: str, *, num_clients: int = 8,
                  per_client: int = 14, seed: int = 0) -> str:
  """LEAF's Sent140 `train/` and `test/` JSON files (what LEAF's
  `preprocess.sh -t sample` writes): `users`, `num_samples` and
  `user_data[user] = {x: [[id, date, query, user, text], ...], y: [0|1]}`."""
  rng = np.random.default_rng(seed)
  for split in ('train', 'test'):
    users, num_samples, user_data = [], [], {}
    for c in range(num_clients):
      user = f'user_{c:03d}'
      xs, ys = [], []
      # At least 10 tweets: seed 003 drops users with fewer.
      for i in range(int(rng.integers(min(10, per_client),
                                      per_client + 1))):
        y = int(rng.integers(2))
        words = [*rng.choice(_HAPPY if y else _SAD, size=2),
                 *rng.choice(_NEUTRAL, size=3)]
        xs.append([str(1000 * c + i), 'Mon Apr 06 22:19:45 PDT 2009',
                   'NO_QUERY', user, ' '.join(rng.permutation(words))])
        ys.append(y)
      users.append(user)
      num_samples.append(len(xs))
      user_data[user] = {'x': xs, 'y': ys}
    os.makedirs(os.path.join(leaf_dir, split), exist_ok=True)
    with open(os.path.join(leaf_dir, split, f'all_data_{split}.json'),
              'w') as f:
      json.dump({'users': users, 'num_samples': num_samples,
                 'user_data': user_data}, f)
  return leaf_dir


# ------------------------------------------- the mixed-FL tasks' sources
CELEBA_SPLITS = ('split_by_clients_train', 'split_by_clients_test')


def celeba_example(rng: np.random.Generator, smiling: bool) -> bytes:
  """A CelebA `tf.Example`: an 84x84x3 int `image` and one int feature per
  attribute of TFF's loader (`smiling` as given, the others random)."""
  from tensorflow_federated.python.simulation.datasets import celeba  # pylint: disable=g-import-not-at-top
  attributes = {name: int(smiling) if name == 'smiling' else
                int(rng.integers(0, 2)) for name in celeba.ATTRIBUTE_NAMES}
  image = rng.integers(0, 256, size=84 * 84 * 3)
  return _example(image=image, **attributes)


def write_celeba(cache_dir: str, *, num_clients: int = 15,
                 num_eval_clients: int = 3, per_client: int = 4,
                 seed: int = 0) -> str:
  """`celeba.sqlite` as TFF's loader reads it (splits `split_by_clients_*`)."""
  rng = np.random.default_rng(seed)
  clients = {}
  for split, count in zip(CELEBA_SPLITS, (num_clients, num_eval_clients)):
    for c in range(count):
      clients[(split, f'{split[-5:]}_{c:03d}')] = [
          celeba_example(rng, rng.random() < 0.5) for _ in range(per_client)]
  return write_sql_client_data(os.path.join(cache_dir, 'celeba.sqlite'),
                               clients)


def write_wikipedia(data_dir: str, articles: Sequence[tuple[str, str]]) -> str:
  """`articles` ((title, text) pairs) as the prepared TFDS dataset
  `wikipedia/20201201.en` (its `train` split) that `tfds.load(...,
  download=False)` reads like the real one; returns its directory."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  builder = tfds.builder('wikipedia/20201201.en', data_dir=data_dir)
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


def random_articles(num_articles: int = 150,
                    seed: int = 0) -> list[tuple[str, str]]:
  rng = np.random.default_rng(seed)
  return [(f'Article {i}', ' '.join(_LINES[j] for j in rng.integers(
      len(_LINES), size=4))) for i in range(num_articles)]


def movielens_ratings(num_users: int = 40,
                      seed: int = 0) -> list[tuple[int, int, int, int]]:
  """Users with 4..12 time-ordered ratings of movies 1..60 (no repeats)."""
  rng = np.random.default_rng(seed)
  rows = []
  for user in range(1, num_users + 1):
    movies = rng.choice(60, size=rng.integers(4, 13), replace=False) + 1
    rows += [(user, int(m), int(rng.integers(1, 6)), 1000 + 10 * i)
             for i, m in enumerate(movies)]
  return rows


def write_movielens(data_dir: str,
                    rows: Sequence[tuple[int, int, int, int]]) -> str:
  """MovieLens 1M's `ratings.dat` (`UserID::MovieID::Rating::Timestamp`)."""
  os.makedirs(data_dir, exist_ok=True)
  path = os.path.join(data_dir, 'ratings.dat')
  with open(path, 'w') as f:
    f.writelines('::'.join(map(str, row)) + '\n' for row in rows)
  return path


def write_all(output_dir: str) -> dict[str, str]:
  """Every fixture under `output_dir`; returns the `--data_dir`s: TFF's
  cache directory (`cache_dir`) and Sent140's (`sent140`)."""
  tff_dir = os.path.join(output_dir, TFF_DIR)
  write_emnist(tff_dir)
  write_shakespeare_both(tff_dir)  # LEAF's files beside TFF's database.
  write_cifar100(tff_dir)
  write_stackoverflow(tff_dir)
  return {'cache_dir': tff_dir,
          'sent140': write_sent140(os.path.join(output_dir, SENT140_DIR))}


def main(argv):
  command.check_no_arguments(argv)
  if not flags.FLAGS.output_dir:
    raise app.UsageError('--output_dir is required.')
  if os.path.exists(flags.FLAGS.output_dir) and os.listdir(
      flags.FLAGS.output_dir):
    raise app.UsageError(f'--output_dir={flags.FLAGS.output_dir} is not empty.')
  paths = write_all(flags.FLAGS.output_dir)
  print(f'--data_dir={paths["cache_dir"]} for tasks.femnist, '
        'tasks.shakespeare, tasks.cifar100 and tasks.stackoverflow_tags\n'
        f'--data_dir={paths["sent140"]} for tasks.sent140')


if __name__ == '__main__':
  # Defined here, not on import: tests import this module beside binaries
  # that have an --output_dir of their own.
  flags.DEFINE_string('output_dir', None, 'Where the fixtures go.')
  app.run(main)
