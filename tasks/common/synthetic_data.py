"""`--use_synthetic_data`: a binary's data directories pointed at small
random stand-ins in each source's format (`tasks.common.fixtures` writes
them), written once and shared by every run that asks."""

import os
import sys

from absl import app

from tasks.common import fixtures

USE_SYNTHETIC_DATA_HELP = (
    'Train on a small random stand-in written in the real source\'s format '
    '(tasks.common.fixtures) and read through the real loader: tries the binary '
    'offline, without the data, with --preset=cpu_small (the files hold a '
    'few clients). The results mean nothing.')

# What each task's binary reads: data-directory flag -> writer of that
# directory (into a given directory).
_SYNTHETIC = {
    'celeba': {'cache_dir': fixtures.write_celeba},
    'stackoverflow_wiki': {
        'cache_dir': lambda d: fixtures.write_stackoverflow(d, num_clients=24),
        'data_dir': lambda d: fixtures.write_wikipedia(
            d, fixtures.random_articles())},
    'movielens': {'data_dir': lambda d: fixtures.write_movielens(
        d, fixtures.movielens_ratings())},
    'femnist': {'data_dir': fixtures.write_emnist},
    'shakespeare': {'data_dir': fixtures.write_shakespeare_both},
    'cifar100': {'data_dir': fixtures.write_cifar100},
    'stackoverflow_tags': {'data_dir': fixtures.write_stackoverflow},
    'sent140': {'data_dir': fixtures.write_sent140},
}


def _synthetic_root() -> str:
  """Where `synthetic_data` writes: per version of the writers
  (`tasks.common.fixtures`) and of what this module asks of them."""
  import hashlib  # pylint: disable=g-import-not-at-top
  import tempfile  # pylint: disable=g-import-not-at-top
  digest = hashlib.sha256()
  for path in (fixtures.__file__, __file__):
    with open(path, 'rb') as f:
      digest.update(f.read())
  return os.path.join(tempfile.gettempdir(), 'tff_mixed_synthetic_data',
                      digest.hexdigest()[:12])


def synthetic_data(task_name: str) -> dict[str, str]:
  """`task_name`'s synthetic data (see `USE_SYNTHETIC_DATA_HELP`): data-dir
  flag name -> directory. Written once under the system's temporary
  directory (the same files every time: fixed seeds), atomically, so runs
  and resumed runs share them; a changed writer (`tasks.common.fixtures`,
  or this module) writes anew."""
  root = _synthetic_root()
  paths = {}
  for flag, write in _SYNTHETIC[task_name].items():
    path = os.path.join(root, f'{task_name}_{flag}')
    if not os.path.isdir(path):
      partial = f'{path}.partial{os.getpid()}'
      write(partial)
      try:
        os.replace(partial, path)
      except OSError:  # Another run wrote it first.
        import shutil  # pylint: disable=g-import-not-at-top
        shutil.rmtree(partial, ignore_errors=True)
    paths[flag] = path
  return paths


def synthetic_data_flags(task_name: str) -> tuple[str, ...]:
  """The data-directory flags `--use_synthetic_data` sets for a task."""
  return tuple(_SYNTHETIC.get(task_name, ()))


def use_synthetic_data(task_name: str, values) -> None:
  """With `--use_synthetic_data`, points the binary's data-directory flags
  (in absl's `values`) at `task_name`'s synthetic data and says so; a data
  directory given as well is a usage error."""
  if not values.use_synthetic_data:
    return
  given = [f'--{flag}' for flag in _SYNTHETIC[task_name]
           if values[flag].present]
  if given:
    raise app.UsageError(f'--use_synthetic_data replaces {", ".join(given)}; '
                         'give one or the other.')
  for flag, path in synthetic_data(task_name).items():
    values[flag].value = path
  print(f'Warning: --use_synthetic_data: {task_name} trains on small random '
        'data in its source\'s format; the results mean nothing.',
        file=sys.stderr)
