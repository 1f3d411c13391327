"""Loading real datasets that may be missing: one-line errors, never a trace."""

import glob
import json
import lzma
import os
import sys
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, Optional, TypeVar

import numpy as np

T = TypeVar('T')

_CHUNK_BYTES = 1 << 20


class DataUnavailableError(RuntimeError):
  """A dataset is missing and could not be fetched; the message says how."""


class BadDataError(DataUnavailableError):
  """The data is there but does not read as its source's format (a bad
  record, a file that is not the source's); the message names where."""


def exit_with(error: BaseException) -> NoReturn:
  """A binary's exit for a data error: its one line, and for missing data
  the offline way out (every binary with real data takes
  `--use_synthetic_data`)."""
  missing = isinstance(error, DataUnavailableError) and not isinstance(
      error, BadDataError)
  hint = (' Without the data, --use_synthetic_data runs the binary on small '
          'random stand-ins.' if missing else '')
  sys.exit(f'Error: {error}{hint}')


def first_line(error: BaseException) -> str:
  text = str(error)
  return text.splitlines()[0] if text else type(error).__name__


def fetch_lzma(url: str, path: str) -> None:
  """Downloads `url` (xz/LZMA) decompressed to `path`, all or nothing.

  TFF's own loader decompresses straight into the final file, so an
  interrupted download leaves a truncated database that later runs take for
  complete. Here the data goes to `path + '.partial'` and is renamed only
  once the compressed stream has ended.

  Raises:
    OSError: If the download fails (urllib errors are OSErrors).
    lzma.LZMAError: If the data is not LZMA or ends early.
  """
  created = _missing_directories(os.path.dirname(os.path.abspath(path)))
  if created:
    os.makedirs(created[0])
  partial = path + '.partial'
  decompressor = lzma.LZMADecompressor()
  try:
    with urllib.request.urlopen(url) as source, open(partial, 'wb') as out:
      while chunk := source.read(_CHUNK_BYTES):
        out.write(decompressor.decompress(chunk))
    if not decompressor.eof:
      raise lzma.LZMAError(f'{url} ended before its compressed stream did')
    os.replace(partial, path)
  finally:
    if os.path.exists(partial):
      os.remove(partial)
    if not os.path.exists(path):  # Failed: no empty cache folder left.
      for directory in created:  # Deepest first.
        try:
          os.rmdir(directory)
        except OSError:
          break


def _missing_directories(directory: str) -> list[str]:
  """`directory` and its ancestors, as far as they do not exist, deepest
  first."""
  missing = []
  while not os.path.isdir(directory):
    missing.append(directory)
    parent = os.path.dirname(directory)
    if parent == directory:
      break
    directory = parent
  return missing


def load_tff_database(name: str, url: str, path: str,
                      loader: Callable[[], T], *, download: bool) -> T:
  """Runs `loader`, a TFF loader reading the database `url` decompresses to.

  A missing database is first fetched here with `fetch_lzma` (when
  `download` is set), so the loader only ever sees a complete file.

  Raises:
    DataUnavailableError: If `path` is missing and `download` is False, the
      download fails, or the file there is not a database the loader reads;
      one line naming `url` and `path`.
  """
  file_name = os.path.basename(path)
  fetch_by_hand = (f'download {url}, decompress it (xz) and put {file_name} '
                   f'at {path}')
  if not os.path.exists(path):
    if not download:
      raise DataUnavailableError(
          f'{name}: {path} not found; {fetch_by_hand}, or allow the download.')
    try:
      fetch_lzma(url, path)
    except (OSError, lzma.LZMAError, EOFError) as e:
      raise DataUnavailableError(
          f'{name}: could not download {url} ({first_line(e)}); '
          f'{fetch_by_hand}.') from e
  try:
    return loader()
  except Exception as e:  # pylint: disable=broad-except
    raise BadDataError(
        f'{name}: {path} is not a readable TFF database ({first_line(e)}); '
        f'delete it and allow the download, or {fetch_by_hand}.') from e


def tff_cache_dir(cache_dir: Optional[str] = None) -> str:
  """TFF's dataset cache directory (`~/.tff` unless given)."""
  return cache_dir or os.path.join(os.path.expanduser('~'), '.tff')


def read_leaf_split(name: str, data_dir: str, split: str, make: str,
                    record_fn: Callable[[str, str, int, Any, Any], Any], *,
                    what: str = 'record') -> dict[str, list]:
  """`{user: [record_fn(path, user, index, x, y), ...]}` of every LEAF JSON
  file in `<data_dir>/<split>/` (what LEAF's `preprocess.sh` writes: each
  file `{"users": [...], "num_samples": [...], "user_data": {user: {"x":
  [...], "y": [...]}}}`), a user's records over every file in order.

  `record_fn` checks and converts one record, raising `BadDataError` (one
  line naming the file, the user and the index) for a bad one.

  Raises:
    DataUnavailableError: No files there (the message says to run `make`,
      LEAF's command), or none holds a record (`what` names one).
    BadDataError: A file is not LEAF's JSON, or `record_fn` refused a
      record.
  """
  pattern = os.path.join(data_dir, split, '*.json')
  paths = sorted(glob.glob(pattern))
  if not paths:
    raise DataUnavailableError(
        f'{name}: no {pattern}; run {make} and pass its data/ directory as '
        '--data_dir.')
  users = {}
  for path in paths:
    try:
      with open(path) as f:
        content = json.load(f)
      for user in content['users']:
        data = content['user_data'][user]
        if len(data['x']) != len(data['y']):
          raise ValueError(f'user {user!r} has {len(data["x"])} x and '
                           f'{len(data["y"])} y')
        records = users.setdefault(user, [])
        for index, (x, y) in enumerate(zip(data['x'], data['y'])):
          records.append(record_fn(path, user, index, x, y))
    except DataUnavailableError:
      raise
    except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
      raise BadDataError(
          f'{name}: {path} is not LEAF JSON ({first_line(e)}).') from e
  if not any(users.values()):
    raise DataUnavailableError(f'{name}: {pattern} holds no {what}.')
  return users


# How a task takes `max_clients` of a source's training clients.
RANDOM, LARGEST = 'random', 'largest'


def warn_if_fewer(name: str, max_clients: Optional[int], available: int
                  ) -> None:
  """One line when a run asks for more training clients than `name`'s data
  has (it trains on all of them), e.g. seed 000's 1,000 Shakespeare parts
  where LEAF's files hold 660 at its sequence length."""
  if max_clients is not None and max_clients > available:
    print(f'Warning: {name}: --max_train_clients={max_clients}, but the data '
          f'has {available} training clients; training on all {available}.',
          file=sys.stderr)


def choose_clients(client_ids: Sequence[str], max_clients: Optional[int], *,
                   how: str = RANDOM, seed: int = 0,
                   size_fn: Optional[Callable[[str], int]] = None,
                   name: str = 'the task') -> list[str]:
  """`max_clients` of `client_ids` (all if None or more than there are,
  said in one line naming `name`: `warn_if_fewer`), sorted: a uniformly
  random subset drawn from `seed` (`RANDOM`: a paper that says only how
  many it took), or the `max_clients` with the largest `size_fn(id)`, ties
  by id (`LARGEST`: seed 000's Shakespeare takes the clients with the most
  samples)."""
  ids = sorted(client_ids)
  warn_if_fewer(name, max_clients, len(ids))
  if max_clients is None or max_clients >= len(ids):
    return ids
  if how == LARGEST:
    if size_fn is None:
      raise ValueError('choosing the largest clients needs size_fn.')
    sizes = {c: size_fn(c) for c in ids}
    return sorted(sorted(ids, key=lambda c: (-sizes[c], c))[:max_clients])
  if how != RANDOM:
    raise ValueError(f'how must be {RANDOM!r} or {LARGEST!r}, got {how!r}.')
  # Its own stream of the run seed (the sampling and shuffles use others).
  rng = np.random.default_rng([seed, _CHOICE_STREAM])
  return [ids[i] for i in sorted(rng.choice(len(ids), max_clients,
                                            replace=False))]


_CHOICE_STREAM = 0x636c69  # 'cli'


def tff_client_data(name: str, file_name: str, loader: Callable[[str], T],
                    cache_dir: Optional[str], *, download: bool) -> T:
  """`loader(cache_dir)`, a TFF dataset loader of
  `https://storage.googleapis.com/tff-datasets-public/<file_name>.lzma`,
  through `load_tff_database` (one-line errors, atomic download)."""
  cache_dir = tff_cache_dir(cache_dir)
  return load_tff_database(
      name, f'{TFF_DATASETS_URL}/{file_name}.lzma',
      os.path.join(cache_dir, file_name), lambda: loader(cache_dir),
      download=download)


TFF_DATASETS_URL = 'https://storage.googleapis.com/tff-datasets-public'


def no_shuffle_spec(batch_size: int, max_elements: Optional[int] = None):
  """A `tff.simulation.baselines.ClientSpec` for TFF's preprocessing
  functions that keeps the data's order (their shuffles take no seed, so a
  run would not repeat from its seed)."""
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  return tff.simulation.baselines.ClientSpec(
      num_epochs=1, batch_size=batch_size, max_elements=max_elements,
      shuffle_buffer_size=1)
