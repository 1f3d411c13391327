"""Faults a long run meets. A write the system refuses (a full disk, a
file-size limit) is one line naming the file, and what was written before
stays as it was; a damaged checkpoint is moved aside; a resume from round 0
or over a cut metrics.csv is handled; bad arguments are one line."""

import contextlib
import dataclasses
import csv
import errno
import os
import resource
import shutil
import signal
import time

import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tasks.quadratic import task as quadratic_task
from tests import runs
from tff_mixed import algorithms
from tff_mixed import driver


@pytest.fixture(scope='module')
def quadratic_fed_avg():
  """The quadratic task (5 evaluation points) and FedAvg on it, K = 2,
  built once for the module."""
  quadratic = quadratic_task.create_quadratic_task(num_eval_points=5)
  sgd = tff.learning.optimizers.build_sgdm(learning_rate=0.1)
  return quadratic, algorithms.build_fed_avg(quadratic.model_fn, sgd,
                                             num_local_steps=2)


task = pytest.fixture(lambda quadratic_fed_avg: quadratic_fed_avg[0],
                      name='task')
process = pytest.fixture(lambda quadratic_fed_avg: quadratic_fed_avg[1],
                         name='process')


@contextlib.contextmanager
def _file_size_limit(num_bytes):
  """Files this process writes stop at `num_bytes` (Python ignores SIGXFSZ,
  so a write past it fails with EFBIG, as on a full disk with ENOSPC)."""
  soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
  resource.setrlimit(resource.RLIMIT_FSIZE, (num_bytes, hard))
  try:
    yield
  finally:
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def test_a_row_past_the_file_size_limit_leaves_metrics_csv_whole(tmp_path):
  """metrics.csv ends with the round before, whole, when a row's append is
  refused (it was cut mid-row at the limit)."""
  path = str(tmp_path / 'metrics.csv')
  history = [{'round': 1, 'loss': 0.5}]
  driver.history.write_history(path, history)
  with open(path) as f:
    before = f.read()
  history.append({'round': 2, 'loss': 0.123456789})
  with _file_size_limit(len(before) + 4):
    with pytest.raises(OSError) as error:
      driver.history.append_history(path, history, ['round', 'loss'])
  assert error.value.errno == errno.EFBIG
  with open(path) as f:
    assert f.read() == before


def test_a_config_json_past_the_file_size_limit_names_it(
    task, process, tmp_path):
  out = str(tmp_path / 'run')
  with _file_size_limit(64):
    with pytest.raises(driver.WriteError, match=(
        f'^cannot write {out}/config.json: File too large; nothing of the run '
        r'was written\.$')):
      runs.experiment(task, process, out, rounds=1, clients_per_round=2)
  assert not os.path.exists(out)  # No empty directory, no lock left.


def test_a_checkpoint_past_the_file_size_limit_is_one_line(
    task, process, tmp_path):
  out = str(tmp_path / 'run')
  run = lambda rounds: runs.experiment(
      task, process, out, rounds=rounds, clients_per_round=2,
      checkpoint_every=2, eval_every=0)
  # A checkpoint is far larger than config.json or a metrics.csv row.
  with _file_size_limit(16 * 1024):
    with pytest.raises(driver.WriteError) as error:
      run(4)
  message = str(error.value)
  assert message.startswith(
      f'cannot write {out}/checkpoints/round_2: File too large; no '
      'checkpoint was written yet.'), message
  assert '\n' not in message
  # The rows before the failure are whole; no checkpoint, no temporary one.
  with open(os.path.join(out, driver.METRICS_FILE)) as f:
    assert [r['round'] for r in csv.DictReader(f)] == ['1', '2']
  assert os.listdir(os.path.join(out, driver.CHECKPOINT_DIR)) == []
  assert not os.path.exists(os.path.join(out, driver.LOCK_FILE))
  # Without the limit the same command runs to the end from round 0.
  result = run(4)
  assert [int(r['round']) for r in result.history] == [1, 2, 3, 4]


def test_a_full_disk_writing_metrics_csv_is_one_line(
    task, process, tmp_path, monkeypatch):
  out = str(tmp_path / 'run')
  run = lambda: runs.experiment(
      task, process, out, rounds=3, clients_per_round=2, checkpoint_every=1,
      eval_every=0)
  append = driver.history.append_history

  def full_at_round_3(path, history, columns):
    if len(history) == 3:
      raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
    append(path, history, columns)

  monkeypatch.setattr(driver.history, 'append_history', full_at_round_3)
  with pytest.raises(driver.WriteError, match=(
      f'^cannot write {out}/metrics.csv: No space left on device; the '
      r'checkpoint of round 2 is kept; resume with the same command\.$')):
    run()
  monkeypatch.undo()
  assert [int(r['round']) for r in run().history] == [1, 2, 3]


@pytest.mark.parametrize('where', ['round 2', 'start', 'final flush'])
def test_a_full_disk_at_tensorboard_is_one_warning_and_the_run_goes_on(
    task, process, tmp_path, monkeypatch, capsys, where):
  """The event file is written every round, so a filling disk refuses it
  first: one warning line, no more events, every round still trained and
  in metrics.csv (whose own refused writes stop the run)."""
  out = str(tmp_path / 'run')
  # As TensorFlow words it: its function's name, the file, the reason, the
  # op; the warning says the reason.
  full = tf.errors.ResourceExhaustedError(
      None, None, '{{function_node __wrapped__WriteSummary_device_/job:'
      'localhost/replica:0/task:0/device:CPU:0}} '
      f'{out}/tensorboard/events.out; No space left on device '
      '[Op:WriteSummary]')
  summarize = driver.history.summarize

  def refused(writer, row):
    if where == 'round 2' and row['round'] == 2:
      raise full
    summarize(writer, row)

  def create_refused(directory):
    raise full

  def flush_refused(self):
    raise full

  if where == 'round 2':
    monkeypatch.setattr(driver.history, 'summarize', refused)
  elif where == 'start':
    monkeypatch.setattr(tf.summary, 'create_file_writer', create_refused)
  else:
    monkeypatch.setattr(type(tf.summary.create_file_writer(
        str(tmp_path / 'probe'))), 'flush', flush_refused)
  result = runs.experiment(
      task, process, out, rounds=3, clients_per_round=2, checkpoint_every=1,
      eval_every=0)
  assert [int(r['round']) for r in result.history] == [1, 2, 3]
  with open(os.path.join(out, driver.METRICS_FILE)) as f:
    assert [r['round'] for r in csv.DictReader(f)] == ['1', '2', '3']
  warnings = [line for line in capsys.readouterr().err.splitlines()
              if 'TensorBoard' in line]
  assert warnings == [
      f'Warning: TensorBoard events in {out}/tensorboard could not be '
      'written (No space left on device); metrics.csv has every round, and '
      'this run writes no more events.']


def test_ctrl_c_inside_a_checkpoint_save_names_the_saved_checkpoint(
    task, process, tmp_path, monkeypatch):
  """A Ctrl-C that lands once TFF has renamed round 2's checkpoint into
  place (but before the driver notes it) names round 2's, which a resume
  takes, and the round after it as the one interrupted."""
  out = str(tmp_path / 'run')
  save = driver.checkpoints.save

  def interrupted_after(manager, state, round_num, directory, kept):
    save(manager, state, round_num, directory, kept)
    if round_num == 2:
      raise KeyboardInterrupt

  monkeypatch.setattr(driver.checkpoints, 'save', interrupted_after)
  run = lambda: runs.experiment(
      task, process, out, rounds=3, clients_per_round=2, checkpoint_every=2,
      eval_every=0)
  with pytest.raises(driver.RunInterrupted, match=(
      r'^interrupted in round 3; resume with the same command \(from the '
      r'checkpoint of round 2\)\.$')):
    run()
  monkeypatch.undo()
  assert run().resumed_from == 2


def test_config_and_metrics_follow_the_umask_as_the_other_files_do(
    task, process, tmp_path):
  out = tmp_path / 'run'
  runs.experiment(task, process, out, rounds=1, clients_per_round=2,
                  eval_every=0)
  mask = os.umask(0o022)
  os.umask(mask)
  for name in (driver.CONFIG_FILE, driver.METRICS_FILE):
    assert oct(os.stat(out / name).st_mode & 0o777) == oct(0o666 & ~mask)


def test_a_plot_that_cannot_be_written_is_a_warning_on_a_complete_run(
    tmp_path, monkeypatch, capsys):
  from tasks.common import binary  # pylint: disable=g-import-not-at-top
  from tasks.common import reports  # pylint: disable=g-import-not-at-top
  from tasks.common import run_spec  # pylint: disable=g-import-not-at-top
  from tasks.common import training_flags  # pylint: disable=g-import-not-at-top

  def too_large(history, path, title):
    raise OSError(errno.EFBIG, os.strerror(errno.EFBIG), path)

  monkeypatch.setattr(reports, 'plot_history', too_large)
  algorithm, run, execution = training_flags.config_from_values(
      rounds=2, clients_per_round=2, num_local_steps=2, client_groups=0,
      progress=False, output_dir=str(tmp_path / 'run'))
  spec = run_spec.RunSpec('quadratic', algorithm=algorithm, run=run,
                          execution=execution)
  result = binary.run_task(spec)
  assert len(result.history) == 2
  printed = capsys.readouterr()
  assert (f'Warning: {tmp_path}/run/metrics.png could not be written (File '
          'too large); the run is complete (metrics.csv).') in printed.err
  assert 'plot: not written' in printed.out


def test_a_bit_flipped_anywhere_in_the_newest_checkpoint_never_blocks_resume(
    task, process, tmp_path, capsys):
  """Over flips spread across `saved_model.pb`: the resume either loads the
  checkpoint (a harmless flip) or moves it aside and resumes from the one
  before; it never stops with a traceback or a 'does not fit' error."""
  out = str(tmp_path / 'run')
  run = lambda rounds: runs.experiment(
      task, process, out, rounds=rounds, clients_per_round=2,
      checkpoint_every=1, eval_every=0)
  run(2)
  checkpoints = os.path.join(out, driver.CHECKPOINT_DIR)
  newest = os.path.join(checkpoints, 'round_2', 'saved_model.pb')
  with open(newest, 'rb') as f:
    original = f.read()
  manager = driver.checkpoints.state_manager(checkpoints)
  structure = process.initialize()
  outcomes = {}
  for offset in range(0, len(original), max(1, len(original) // 60)):
    flipped = bytearray(original)
    flipped[offset] ^= 0x10
    os.makedirs(os.path.dirname(newest), exist_ok=True)
    with open(newest, 'wb') as f:
      f.write(flipped)
    _, version = driver.load_latest_good(manager, checkpoints, structure)
    outcomes[offset] = version
    if version == 1:  # Moved aside: put the original back for the next flip.
      assert 'does not load' in capsys.readouterr().err
      aside = os.path.join(checkpoints, 'round_2.corrupt')
      os.rename(aside, os.path.join(checkpoints, 'round_2'))
  assert set(outcomes.values()) <= {1, 2}, outcomes
  assert 1 in outcomes.values()  # Some flips did damage it.


def test_a_resume_from_round_0_rewrites_tensorboard_and_a_cut_metrics_csv_is_refused(
    task, process, tmp_path):
  out = tmp_path / 'run'
  run = lambda rounds: runs.experiment(
      task, process, out, rounds=rounds, clients_per_round=2,
      checkpoint_every=2, eval_every=0)
  run(1)  # A checkpoint at round 1 (the last), then kill its trace:
  for entry in os.listdir(out / driver.CHECKPOINT_DIR):  # (a kill before it)
    shutil.rmtree(out / driver.CHECKPOINT_DIR / entry)
  run(2)  # Starts from round 0 again.
  events = os.listdir(out / driver.TENSORBOARD_DIR)
  assert len(events) == 1, events  # Not a second event file beside the first.
  steps = [e.step for e in tf.compat.v1.train.summary_iterator(
      str(out / driver.TENSORBOARD_DIR / events[0]))
           for v in e.summary.value if v.tag == driver.TRAIN_LOSS_KEY]
  assert steps == [1, 2]
  # metrics.csv cut at a line boundary (round 2's row gone) under round 2's
  # checkpoint: refused, naming what is there; nothing is rewritten.
  metrics = out / driver.METRICS_FILE
  cut = ''.join(metrics.read_text().splitlines(keepends=True)[:2])
  metrics.write_text(cut)
  with pytest.raises(driver.OutputDirError, match=(
      f'^{metrics} holds rounds 1 but the checkpoint is of round 2; ')):
    run(3)
  assert metrics.read_text() == cut
  metrics.write_text('')
  with pytest.raises(driver.OutputDirError, match='holds no rounds but'):
    run(3)


@pytest.mark.parametrize('arguments, error, match', [
    (dict(rounds=2.5), TypeError, r'^rounds must be an int, got 2\.5\.$'),
    (dict(eval_every=-1), ValueError, r'^eval_every must be >= 0, got -1\.$'),
    (dict(task=None), TypeError,
     r'^task must be a tff_mixed\.task\.Task, got NoneType\.$'),
])
def test_bad_arguments_are_one_line_and_write_nothing(
    task, process, tmp_path, arguments, error, match):
  kwargs = dict(task=task, process=process, rounds=2, clients_per_round=2,
                output_dir=str(tmp_path / 'run'), progress=False)
  kwargs.update(arguments)
  with pytest.raises(error, match=match):
    driver.run_experiment(kwargs.pop('task'), kwargs.pop('process'), **kwargs)
  assert not (tmp_path / 'run').exists()


def test_a_string_of_client_ids_is_refused(task):
  with pytest.raises(TypeError, match="train_client_ids must be a sequence "
                     "of client ids, got the string 'abc'"):
    dataclasses.replace(task, train_client_ids='abc')


def test_sigterm_is_one_line_and_exit_143(monkeypatch, capsys):
  """A scheduler's SIGTERM stops a binary as Ctrl-C does, saying so."""
  from tasks.common import command  # pylint: disable=g-import-not-at-top

  def exit_now(code):
    raise SystemExit(code)

  monkeypatch.setattr(command, '_exit_now', exit_now)
  monkeypatch.setattr(command, 'quiet_logs', lambda: None)

  def main(argv):
    del argv
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(60)  # The handler raises before this ends.

  previous = signal.getsignal(signal.SIGTERM)
  try:
    with pytest.raises(SystemExit) as exit_:
      command._one_line_errors(main)(['prog'])  # pylint: disable=protected-access
  finally:
    signal.signal(signal.SIGTERM, previous)
  assert exit_.value.code == 143
  assert capsys.readouterr().err == (
      'terminated (SIGTERM); resume with the same command.\n')


def test_a_bad_client_first_sampled_mid_run_is_one_line(
    task, process, tmp_path):
  """A bad record in a client of round 2 only (not of round 1, which is
  checked before the run starts): the round fails with one line naming the
  round, the task and the client, round 1's checkpoint is kept, and
  without the bad record the same command resumes."""
  first = set(task.cohort_ids(0, 1, 2))
  bad = next(c for c in task.cohort_ids(0, 2, 2) if c not in first)

  def bad_records(client_id):
    data = task.train_dataset_fn(client_id)
    return data.apply(tf.data.experimental.assert_cardinality(
        10_000)) if client_id == bad else data

  out = str(tmp_path / 'run')
  run = lambda bad_task: runs.experiment(
      bad_task, process, out, rounds=3, clients_per_round=2,
      checkpoint_every=1, eval_every=0)
  with pytest.raises(driver.DataError, match=(
      f"^round 2: task quadratic: the data of client '{bad}' does not read "
      r'\(Input dataset was expected to contain 10000 elements but contained '
      r'only \d+ elements?\.\); the checkpoint of round 1 is kept; resume '
      r'with the same command\.$')):
    run(dataclasses.replace(task, train_dataset_fn=bad_records))
  result = run(task)
  assert result.resumed_from == 1
  assert [int(r['round']) for r in result.history] == [1, 2, 3]


def test_data_that_does_not_read_is_one_line_before_anything_is_written(
    task, process, tmp_path):
  def bad_records(client_id):  # Reads its first batches, then fails.
    return task.train_dataset_fn(client_id).apply(
        tf.data.experimental.assert_cardinality(10_000))

  run = lambda bad_task: runs.experiment(
      bad_task, process, tmp_path / 'run', rounds=2, clients_per_round=2)
  with pytest.raises(driver.DataError, match=(
      r"^task quadratic: the data of client '[^']+' does not read \(Input "
      r'dataset was expected to contain 10000 elements')):
    run(dataclasses.replace(task, train_dataset_fn=bad_records))
  assert not (tmp_path / 'run').exists()
  with pytest.raises(driver.DataError,
                     match=r'^task quadratic: the evaluation data is empty\.$'):
    run(dataclasses.replace(
        task, eval_dataset_fn=lambda: task.eval_dataset_fn().take(0)))
  assert not (tmp_path / 'run').exists()
