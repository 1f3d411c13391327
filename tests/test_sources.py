"""Downloading a TFF database all-or-nothing, and the one-line errors."""

import lzma
import os

import pytest

from tasks.common import sources


def _serve(tmp_path, payload, truncate=False):
  """A file:// URL of `payload` xz-compressed (cut short if `truncate`)."""
  compressed = lzma.compress(payload)
  if truncate:
    compressed = compressed[:len(compressed) // 2]
  path = tmp_path / 'served' / 'db.sqlite.lzma'
  path.parent.mkdir(exist_ok=True)
  path.write_bytes(compressed)
  return path.as_uri()


def test_fetch_lzma_decompresses_to_the_path(tmp_path):
  payload = os.urandom(3 << 20)  # Several chunks.
  target = tmp_path / 'cache' / 'db.sqlite'
  sources.fetch_lzma(_serve(tmp_path, payload), str(target))
  assert target.read_bytes() == payload
  assert os.listdir(target.parent) == ['db.sqlite']


def test_truncated_download_leaves_nothing(tmp_path):
  """Neither a partial file nor the cache folders the download made; a
  folder that was there stays."""
  (tmp_path / 'existing').mkdir()
  url = _serve(tmp_path, os.urandom(1 << 20), truncate=True)
  for target in (tmp_path / 'existing' / 'db.sqlite',
                 tmp_path / 'new' / 'cache' / 'db.sqlite'):
    with pytest.raises(lzma.LZMAError, match='ended before'):
      sources.fetch_lzma(url, str(target))
  assert sorted(os.listdir(tmp_path)) == ['existing', 'served']
  assert os.listdir(tmp_path / 'existing') == []
  with pytest.raises(OSError):  # No server at all.
    sources.fetch_lzma((tmp_path / 'nowhere.lzma').as_uri(),
                       str(tmp_path / 'new' / 'db.sqlite'))
  assert sorted(os.listdir(tmp_path)) == ['existing', 'served']


def test_a_binary_says_how_to_run_without_the_data():
  with pytest.raises(SystemExit) as exit_info:
    sources.exit_with(sources.DataUnavailableError('Demo: x not found.'))
  assert exit_info.value.code == (
      'Error: Demo: x not found. Without the data, --use_synthetic_data runs '
      'the binary on small random stand-ins.')
  for present in (sources.BadDataError('bad record 3'),
                  ValueError('bad record 3')):  # The data is there.
    with pytest.raises(SystemExit) as exit_info:
      sources.exit_with(present)
    assert exit_info.value.code == 'Error: bad record 3'


def test_load_downloads_once_then_reads(tmp_path):
  target = tmp_path / 'db.sqlite'
  url = _serve(tmp_path, b'database bytes')
  read = lambda: target.read_bytes()
  assert sources.load_tff_database('Demo', url, str(target), read,
                                   download=True) == b'database bytes'
  os.remove(tmp_path / 'served' / 'db.sqlite.lzma')  # No second download.
  assert sources.load_tff_database('Demo', url, str(target), read,
                                   download=True) == b'database bytes'


@pytest.mark.parametrize('case', ['missing', 'truncated', 'unreadable'])
def test_errors_are_one_line_naming_url_and_path(tmp_path, case):
  target = tmp_path / 'db.sqlite'
  url = _serve(tmp_path, b'x' * 1000, truncate=case == 'truncated')

  def loader():
    raise ValueError('file is not a database\nmore detail')

  if case == 'unreadable':
    target.write_bytes(b'garbage')
  with pytest.raises(sources.DataUnavailableError) as info:
    sources.load_tff_database('Demo', url, str(target), loader,
                              download=case != 'missing')
  message = str(info.value)
  assert '\n' not in message and url in message and str(target) in message
  expected = {'missing': 'not found', 'truncated': 'could not download',
              'unreadable': 'not a readable TFF database (file is not a '
                            'database)'}[case]
  assert message.startswith('Demo: ') and expected in message
  assert os.path.exists(target) == (case == 'unreadable')


def test_choose_clients(capsys):
  ids = [f'c{i:02d}' for i in range(20)][::-1]
  assert sources.choose_clients(ids, None) == sorted(ids)
  assert sources.choose_clients(ids, 20, name='X') == sorted(ids)
  assert capsys.readouterr().err == ''
  # More than the data has: all of them, said in one line (seed 000 asks for
  # 1,000 Shakespeare parts; LEAF's files hold 660).
  assert sources.choose_clients(ids, 25, name='Shakespeare (LEAF, d)') == (
      sorted(ids))
  assert capsys.readouterr().err == (
      'Warning: Shakespeare (LEAF, d): --max_train_clients=25, but the data '
      'has 20 training clients; training on all 20.\n')
  draws = [sources.choose_clients(ids, 5, seed=s) for s in (3, 3, 4)]
  assert draws[0] == draws[1] and draws[0] != draws[2]
  assert all(d == sorted(d) and len(set(d)) == 5 for d in draws)
  sizes = {c: int(c[1:]) % 7 for c in ids}  # 6 for c06 and c13, 5 ...
  assert sources.choose_clients(ids, 3, how=sources.LARGEST,
                                size_fn=sizes.get) == ['c05', 'c06', 'c13']
  with pytest.raises(ValueError, match='how must be'):
    sources.choose_clients(ids, 3, how='first')
