"""The output directory's lock: exactly one holder, also when several runs
start together on a lock a killed run left behind."""

import errno
import json
import os
import threading
import time

import pytest

from tff_mixed import driver


def _take_and_hold(out: str, start, outcomes) -> None:
  """Tries the lock when `start` lets it; while holding it, checks that no
  other holder has marked the directory."""
  start.wait()
  try:
    release = driver.lock_output_dir(out)
  except driver.OutputDirError as e:
    outcomes.append(('refused', str(e)))
    return
  mark = os.path.join(out, f'holder.{threading.get_ident()}')
  with open(mark, 'w'):
    pass
  time.sleep(0.05)
  holders = [n for n in os.listdir(out) if n.startswith('holder.')]
  os.remove(mark)
  release()
  outcomes.append(('held', len(holders)))


# Takers are threads of this process: the kernel's flock excludes open file
# descriptions, not processes, so they contend as separate runs would (and
# a fork of a process running TFF's gRPC aborts).
@pytest.mark.parametrize('stale', [False, True], ids=['fresh', 'stale'])
def test_of_four_takers_exactly_one_holds_the_lock(tmp_path, stale):
  for trial in range(15):
    out = str(tmp_path / f'run{trial}')
    os.makedirs(out)
    if stale:  # The lock file a killed run leaves: its pid, no holder.
      with open(os.path.join(out, driver.LOCK_FILE), 'w') as f:
        json.dump({'pid': 2**22 + trial, 'host': os.uname().nodename,
                   'started': 'then'}, f)
    start, outcomes = threading.Barrier(4), []
    takers = [threading.Thread(target=_take_and_hold,
                               args=(out, start, outcomes)) for _ in range(4)]
    for taker in takers:
      taker.start()
    for taker in takers:
      taker.join()
    held = [n for kind, n in outcomes if kind == 'held']
    # Every holder was alone while it held the lock; at least one held it
    # (a taker that came after the first had released may hold it too).
    assert held and all(n == 1 for n in held), (trial, outcomes)
    refused = [m for kind, m in outcomes if kind == 'refused']
    assert all('is in use by pid' in m for m in refused), refused
    assert os.listdir(out) == []  # Released, no lock file left.


def test_release_twice_is_harmless_and_a_read_only_directory_is_one_line(
    tmp_path, monkeypatch):
  out = str(tmp_path / 'run')
  release = driver.lock_output_dir(out)
  release()
  release()
  assert os.listdir(out) == []

  def read_only(path, *args, **kwargs):
    raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)

  # An existing directory on a read-only filesystem (root can write into a
  # chmod 500 directory, so the filesystem's error is injected).
  monkeypatch.setattr(os, 'open', read_only)
  with pytest.raises(driver.OutputDirError,
                     match=f'^output_dir {out} is not writable: '
                     'Read-only file system.$'):
    driver.lock_output_dir(out)
