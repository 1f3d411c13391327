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
  target = tmp_path / 'cache' / 'db.sqlite'
  url = _serve(tmp_path, os.urandom(1 << 20), truncate=True)
  with pytest.raises(lzma.LZMAError, match='ended before'):
    sources.fetch_lzma(url, str(target))
  assert os.listdir(target.parent) == []


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
