"""Fault injection: every way a run used to go silently wrong now stops,
counts or refuses, with one line (issue 18).

In-process on the quadratic task unless a process boundary is the point
(exit codes, Ctrl-C, flags parsed by a binary).
"""

import collections
import csv
import dataclasses
import functools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tasks.quadratic import task as quadratic_task
from tff_mixed import algorithms
from tff_mixed import driver
from tff_mixed import schedules
from tests import binaries
from tests import runs

SGD = tff.learning.optimizers.build_sgdm


@pytest.fixture(scope='module')
def task():
  return quadratic_task.create_quadratic_task(num_eval_points=50)


@pytest.fixture(scope='module')
def process(task):
  return algorithms.build_fed_avg(
      task.model_fn, SGD(learning_rate=0.1), SGD(learning_rate=0.5),
      num_local_steps=3)


@pytest.fixture(scope='module')
def exploding_adam(task):
  """FedAdam whose clients step by 1e8: the updates (~1e24) are finite, so
  no client is dropped, but Adam's second moment (update^2) overflows."""
  return algorithms.build_fed_adam(
      task.model_fn, SGD(learning_rate=1e8), num_local_steps=3)


@pytest.fixture(scope='module')
def exploding_clients(task):
  """Every client's update overflows: every client is dropped."""
  return algorithms.build_fed_avg(
      task.model_fn, SGD(learning_rate=1e30), num_local_steps=3)


_experiment = functools.partial(
    runs.experiment, rounds=4, clients_per_round=3, seed=3, eval_every=2,
    checkpoint_every=1, config={'k': 3})


def _rows(output_dir):
  with open(os.path.join(output_dir, driver.METRICS_FILE), newline='') as f:
    return list(csv.DictReader(f))


def _versions(output_dir):
  return sorted(os.listdir(os.path.join(output_dir, driver.CHECKPOINT_DIR)))


# ------------------------------------------------------------ non-finite state
def test_check_finite_state_names_the_part_and_paths():
  state = collections.OrderedDict(
      global_model_weights=tff.learning.models.ModelWeights(
          trainable=[np.array([1.0, np.nan], np.float32)], non_trainable=[]),
      client_work=collections.OrderedDict(
          num_local_steps=np.int32(3),
          # on_plateau's best loss before it has seen one: not a fault.
          schedules=collections.OrderedDict(num_local_steps=collections.OrderedDict(
              best=np.float64(np.inf)))),
      server=collections.OrderedDict(
          server_optimizer=collections.OrderedDict(
              accumulator=[np.array([np.inf])]),
          central_optimizer_hparams=collections.OrderedDict(
              learning_rate=np.float32(np.nan)),
          merge_optimizer=collections.OrderedDict(learning_rate=1.0)))
  assert driver.non_finite_parts(state) == {
      'the global model': ['global_model_weights/trainable/0'],
      'the server optimizer': ['server/server_optimizer/accumulator/0'],
      'the central step': ['server/central_optimizer_hparams/learning_rate'],
  }
  with pytest.raises(driver.NonFiniteStateError) as error:
    driver.check_finite_state(state, 7)
  assert str(error.value) == (
      'round 7: the new state is not finite in the server optimizer '
      '(server/server_optimizer/accumulator/0), the central step '
      '(server/central_optimizer_hparams/learning_rate), the global model '
      '(global_model_weights/trainable/0).')
  state['global_model_weights'].trainable[0][1] = 0.0
  state['server']['server_optimizer']['accumulator'][0][0] = 0.0
  state['server']['central_optimizer_hparams']['learning_rate'] = 0.1
  driver.check_finite_state(state, 7)  # Finite now: no error.


def test_schedules_waiting_for_their_first_loss_are_not_a_fault(
    task, tmp_path):
  """on_plateau's best loss is +inf and loss_ratio's reference NaN until
  their windows fill (3 rounds here)."""
  process = algorithms.build_fed_avg(
      task.model_fn, SGD(learning_rate=0.1),
      num_local_steps=schedules.on_plateau(3, 0.5, 5, window=3),
      client_learning_rate=schedules.loss_ratio(0.1, 0.5, window=3))
  result = _experiment(task, process, tmp_path / 'run', rounds=2)
  assert [row['client_work/num_local_steps'] for row in result.history] == [
      3, 3]


def test_a_diverging_server_optimizer_stops_and_keeps_the_checkpoint(
    task, exploding_adam, tmp_path):
  with pytest.raises(driver.NonFiniteStateError) as error:
    _experiment(task, exploding_adam, tmp_path / 'run')
  message = str(error.value)
  assert message.startswith('round 1: the new state is not finite in the '
                            'server optimizer (finalizer/preconditioner/0)')
  assert 'no checkpoint was written yet' in message
  assert '--on_non_finite=skip' in message
  assert _versions(tmp_path / 'run') == []  # Nothing non-finite was saved.


class _Killed(Exception):
  pass


class _Faulty:
  """Delegates to a process, but in its `at`-th round (counted from this
  call) dies like a kill (`fault='kill'`) or returns a state whose server
  optimizer holds a NaN (`fault='nan'`)."""

  def __init__(self, process, at, fault):
    self._process, self._at, self._fault, self._rounds = (
        process, at, fault, 0)

  def __getattr__(self, name):
    return getattr(self._process, name)

  def next(self, state, data):
    self._rounds += 1
    if self._rounds == self._at and self._fault == 'kill':
      raise _Killed()
    if self._rounds == self._at and self._fault == 'swallowed_ctrl_c':
      _ctrl_c_inside_a_finalizer()
    output = self._process.next(state, data)
    if self._rounds == self._at and self._fault == 'nan':
      finalizer = dict(output.state.finalizer)
      finalizer['learning_rate'] = np.float32(np.nan)
      output = output._replace(  # pylint: disable=protected-access
          state=output.state._replace(finalizer=finalizer))
    return output


class _InterruptedWhileCollected:

  def __del__(self):
    signal.raise_signal(signal.SIGINT)  # Raises KeyboardInterrupt here.


def _ctrl_c_inside_a_finalizer():
  """A Ctrl-C that lands in a `__del__`: Python prints "Exception ignored"
  and goes on, as it does for TFF's `weakref.finalize` disposals."""
  _InterruptedWhileCollected()


def test_a_ctrl_c_swallowed_by_a_finalizer_still_stops_after_the_round(
    task, process, tmp_path, monkeypatch):
  """The run stops at the end of that round, its checkpoint written, and
  Python's SIGINT handler is back afterwards."""
  swallowed = []  # What Python reports as "Exception ignored in ...".
  monkeypatch.setattr(sys, 'unraisablehook',
                      lambda unraisable: swallowed.append(unraisable.exc_type))
  # A suite started in the background inherits SIGINT ignored.
  previous = signal.signal(signal.SIGINT, signal.default_int_handler)
  try:
    with pytest.raises(driver.RunInterrupted,
                       match=r'^interrupted in round 3; resume with the same '
                       r'command \(from the checkpoint of round 2\)\.$'):
      _experiment(task, _Faulty(process, 2, 'swallowed_ctrl_c'),
                  tmp_path / 'run', rounds=5)
    assert KeyboardInterrupt in swallowed
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
  finally:
    signal.signal(signal.SIGINT, previous)
  assert _versions(tmp_path / 'run') == ['round_1', 'round_2']
  assert not (tmp_path / 'run' / driver.LOCK_FILE).exists()


def test_the_stop_keeps_the_last_good_checkpoint_untouched(
    task, process, tmp_path):
  """Round 3 goes non-finite: the run stops, the round-2 checkpoint and
  the metrics are as they were, and the good run resumes from them."""
  out = tmp_path / 'run'
  good = _experiment(task, process, out, rounds=2)
  before = {name: os.path.getmtime(os.path.join(out, 'checkpoints', name))
            for name in _versions(out)}
  with pytest.raises(driver.NonFiniteStateError,
                     match=r'round 3: the new state is not finite in the '
                     r'server optimizer \(finalizer/learning_rate\)\. '
                     r'Stopped; the last checkpoint \(round 2\) is kept'):
    _experiment(task, _Faulty(process, 1, 'nan'), out, rounds=4)
  assert {name: os.path.getmtime(os.path.join(out, 'checkpoints', name))
          for name in _versions(out)} == before
  assert [r['round'] for r in _rows(out)] == ['1', '2']
  full = _experiment(task, process, tmp_path / 'full', rounds=4)
  resumed = _experiment(task, process, out, rounds=4)
  np.testing.assert_array_equal(
      process.get_model_weights(resumed.state).trainable,
      process.get_model_weights(full.state).trainable)
  del good


def test_a_checkpoint_of_another_state_structure_is_not_moved_aside(
    task, process, exploding_adam, tmp_path):
  out = tmp_path / 'run'
  _experiment(task, process, out, rounds=1)
  with pytest.raises(driver.OutputDirError,
                     match=f"checkpoint {out}/checkpoints/round_1 does not "
                     "fit this process's state"):
    _experiment(task, exploding_adam, out, rounds=2)
  assert _versions(out) == ['round_1']


def _crafted_checkpoint(path, state, marker):
  """A checkpoint in TFF's format (a SavedModel whose function returns the
  state, its values as variables under `_value`) whose function also
  writes `marker`: what loading it the way TFF does runs."""

  class Crafted(tf.Module):

    def __init__(self):
      super().__init__()
      self._value = tf.nest.map_structure(tf.Variable, state)

    @tf.function(input_signature=())
    def __call__(self):
      with tf.control_dependencies([tf.io.write_file(marker, 'ran')]):
        return tf.nest.map_structure(tf.identity, self._value)

  tf.saved_model.save(Crafted(), str(path), signatures={})


def test_a_crafted_checkpoint_runs_nothing_when_a_run_resumes(
    task, process, tmp_path):
  """Resume (and `tasks.evaluate` / `export`, through the same reader)
  reads a checkpoint's values as data: the crafted checkpoint's function,
  which TFF's own loading runs, never runs; its values are what resumes."""
  out = tmp_path / 'run'
  _experiment(task, process, out, rounds=1)
  state = process.initialize()
  checkpoint = out / 'checkpoints' / 'round_1'
  tf.io.gfile.rmtree(str(checkpoint))
  marker = tmp_path / 'marker'
  _crafted_checkpoint(checkpoint, state, str(marker))
  manager = driver.checkpoints.state_manager(str(out / 'checkpoints'))
  # TFF's own loading runs the crafted function (the test's premise) ...
  driver.checkpoints.run_sync(manager.load(1, state))
  assert marker.read_text() == 'ran'
  marker.unlink()
  # ... this library's does not, and gives the values stored.
  loaded, version = driver.load_latest_good(manager, str(out / 'checkpoints'),
                                            state)
  assert version == 1 and not marker.exists()
  for got, want in zip(tf.nest.flatten(loaded), tf.nest.flatten(state)):
    np.testing.assert_array_equal(got, want)
  assert type(loaded) is type(state)
  result = _experiment(task, process, out, rounds=2)
  assert result.resumed_from == 1 and not marker.exists()


def test_a_checkpoint_is_read_as_tff_reads_it(task, process, tmp_path):
  """The data-only reader gives what TFF's `FileProgramStateManager.load`
  gives for this library's checkpoints: the same structure, values and
  types, bit for bit."""
  out = tmp_path / 'run'
  result = _experiment(task, process, out, rounds=2)
  manager = driver.checkpoints.state_manager(str(out / 'checkpoints'))
  theirs = driver.checkpoints.run_sync(manager.load(2, process.initialize()))
  ours = driver.checkpoints.read(str(out / 'checkpoints' / 'round_2'),
                                 process.initialize())
  tf.nest.assert_same_structure(theirs, ours)
  for a, b in zip(tf.nest.flatten(theirs), tf.nest.flatten(ours)):
    assert type(a) is type(b) and np.shape(a) == np.shape(b)
    np.testing.assert_array_equal(a, b)
  for a, b in zip(tf.nest.flatten(ours), tf.nest.flatten(result.state)):
    np.testing.assert_array_equal(a, b)


def test_skip_undoes_non_finite_rounds_and_counts_them(
    task, exploding_adam, tmp_path, capsys):
  result = _experiment(task, exploding_adam, tmp_path / 'run', rounds=3,
                       on_non_finite='skip')
  assert [row[driver.SKIPPED_KEY] for row in result.history] == [1, 1, 1]
  initial = driver.seeded_initial_weights(task.model_fn, 3)
  np.testing.assert_array_equal(  # Every round undone: the initial model.
      exploding_adam.get_model_weights(result.state).trainable,
      initial.trainable)
  assert not driver.non_finite_parts(result.state)
  err = capsys.readouterr().err
  assert err.count('The round is undone.') == 3
  assert [r[driver.SKIPPED_KEY] for r in _rows(tmp_path / 'run')] == [
      '1', '1', '1']


def test_more_clients_a_round_than_the_task_has_is_one_line_before_any_output(
    task, process, tmp_path):
  two_clients = dataclasses.replace(
      task, client_sampler=None, train_client_ids=task.train_client_ids[:2])
  with pytest.raises(driver.CohortError, match=r"^clients_per_round=3 exceeds "
                     r"the 2 training clients of 'quadratic'\.$"):
    _experiment(two_clients, process, tmp_path / 'run')
  assert not (tmp_path / 'run').exists()


def test_on_non_finite_must_be_stop_or_skip(task, process, tmp_path):
  with pytest.raises(ValueError, match="on_non_finite must be one of"):
    _experiment(task, process, tmp_path / 'run', on_non_finite='ignore')
  assert not (tmp_path / 'run').exists()


# -------------------------------------------------------------- dropped clients
def test_a_round_of_dropped_clients_is_counted_not_perfect(
    task, exploding_clients, tmp_path, capsys):
  result = _experiment(task, exploding_clients, tmp_path / 'run', rounds=2)
  for row in result.history:
    assert row['client_work/clients/participating'] == 0
    assert row['client_work/clients/dropped_non_finite'] == 3
    assert row['client_work/clients/empty'] == 0
    # Not 0.0: no client trained, so there is no train loss.
    assert driver.TRAIN_LOSS_KEY not in row
  err = capsys.readouterr().err
  assert err.count('all clients dropped') == 2
  row = _rows(tmp_path / 'run')[0]
  assert row['client_work/clients/dropped_non_finite'] == '3'
  assert driver.TRAIN_LOSS_KEY not in row  # No column of zeros.


# ---------------------------------------------------------- one run per output
def test_a_second_run_into_a_locked_directory_is_refused(
    task, process, tmp_path):
  out = str(tmp_path / 'run')
  release = driver.lock_output_dir(out)  # A live run: this process.
  try:
    with pytest.raises(driver.OutputDirError) as error:
      _experiment(task, process, out)
    assert f'output_dir {out} is in use by pid {os.getpid()}' in str(
        error.value)
    assert os.listdir(out) == [driver.LOCK_FILE]  # Nothing written.
  finally:
    release()
  assert os.listdir(out) == []


def test_a_stale_lock_is_taken_over(task, process, tmp_path, capsys):
  dead = subprocess.Popen(['true'])
  dead.wait()
  out = tmp_path / 'run'
  out.mkdir()
  (out / driver.LOCK_FILE).write_text(json.dumps(
      {'pid': dead.pid, 'host': os.uname().nodename, 'started': 'then'}))
  _experiment(task, process, out, rounds=1)
  assert f'taking over the lock of pid {dead.pid}' in capsys.readouterr().err
  assert not (out / driver.LOCK_FILE).exists()  # Released at the end.


def test_concurrent_lockers_exactly_one_wins(tmp_path):
  out = str(tmp_path / 'run')
  start = threading.Barrier(8)
  outcomes = []

  def take():
    start.wait()
    try:
      outcomes.append(driver.lock_output_dir(out))
    except driver.OutputDirError as e:
      outcomes.append(str(e))

  threads = [threading.Thread(target=take) for _ in range(8)]
  for thread in threads:
    thread.start()
  for thread in threads:
    thread.join()
  winners = [o for o in outcomes if callable(o)]
  assert len(winners) == 1
  assert all('is in use by pid' in o for o in outcomes if not callable(o))
  winners[0]()
  assert os.listdir(out) == []  # No temporary files left either.


# ----------------------------------------------------------------- resume
def test_resume_skips_a_corrupt_newest_checkpoint(task, process, tmp_path,
                                                  capsys):
  full = _experiment(task, process, tmp_path / 'full', rounds=4)
  out = tmp_path / 'run'
  # Keeps rounds 1 (the first), 3, 4.
  _experiment(task, process, out, rounds=4)
  checkpoints = out / 'checkpoints'
  # The newest checkpoint truncated, the one before with a garbage
  # saved_model.pb, a stray empty newer one, and the temporary directory
  # of a checkpoint write a kill interrupted.
  for path in (checkpoints / 'round_4' / 'variables').glob('*.data*'):
    path.write_bytes(path.read_bytes()[:10])
  (checkpoints / 'round_3' / 'saved_model.pb').write_bytes(b'garbage')
  (checkpoints / 'round_9').mkdir()
  (checkpoints / 'round_5_temp4767').mkdir()
  capsys.readouterr()
  resumed = _experiment(task, process, out, rounds=4)
  err = capsys.readouterr().err
  for version in (9, 4, 3):
    assert f'checkpoint {checkpoints}/round_{version} does not load' in err
  assert sorted(os.listdir(checkpoints)) == [
      'round_1', 'round_3', 'round_3.corrupt', 'round_4', 'round_4.corrupt',
      'round_9.corrupt']
  np.testing.assert_array_equal(
      process.get_model_weights(resumed.state).trainable,
      process.get_model_weights(full.state).trainable)
  assert [r['round'] for r in _rows(out)] == ['1', '2', '3', '4']
  # TensorBoard holds each round once, as metrics.csv does.
  steps = collections.Counter()
  for path in tf.io.gfile.glob(str(out / 'tensorboard' / '*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        steps[(value.tag, event.step)] += 1
  assert steps and max(steps.values()) == 1
  assert {s for tag, s in steps if tag == 'eval/loss'} == {2, 4}


def test_fewer_rounds_than_the_directory_holds_is_an_error(
    task, process, tmp_path):
  _experiment(task, process, tmp_path / 'run', rounds=3)
  with pytest.raises(driver.OutputDirError) as error:
    _experiment(task, process, tmp_path / 'run', rounds=2)
  assert 'checkpointed at round 3, past rounds=2' in str(error.value)


def test_resumed_metrics_keep_integers_and_float32_short(
    task, process, tmp_path):
  """Counts as integers, float32 metrics in their shortest form (lr 0.1,
  not 0.10000000149011612), and read back on resume to the same values."""
  first = _experiment(task, process, tmp_path / 'run', rounds=2)
  resumed = _experiment(task, process, tmp_path / 'run', rounds=3)
  rows = _rows(tmp_path / 'run')
  assert [r['round'] for r in rows] == ['1', '2', '3']
  assert {r['client_work/sgd_steps'] for r in rows} == {'9'}
  assert rows[0]['sgd_steps_cumulative'] == '9'
  assert {r['client_work/client_learning_rate'] for r in rows} == {'0.1'}
  loss = first.history[0]['client_work/first_step_loss']
  assert rows[0]['client_work/first_step_loss'] == str(np.float32(loss))
  # Other floats (seconds) to 12 significant digits, not 17.
  for row in rows:
    for column in ('round_seconds', 'simulated_seconds_cumulative'):
      digits = row[column].replace('.', '').lstrip('0').split('e')[0]
      assert len(digits) <= 12, (column, row[column])
  assert driver.history.csv_value(9.279580800000002) == 9.2795808
  assert driver.history.csv_value(float(np.float32(0.1))) == '0.1'
  for before, after in zip(first.history, resumed.history):
    measured = ('round_seconds', 'simulated_seconds',
                'simulated_seconds_cumulative')
    assert ({k: v for k, v in after.items() if k not in measured} ==
            {k: v for k, v in before.items() if k not in measured})


def test_metrics_follow_every_round_and_a_torn_row_is_dropped(
    task, process, tmp_path):
  out = tmp_path / 'run'
  with pytest.raises(_Killed):  # Checkpoints every 2: round 2 only.
    _experiment(task, _Faulty(process, 4, 'kill'), out, rounds=4,
                checkpoint_every=2)
  assert [r['round'] for r in _rows(out)] == ['1', '2', '3']  # Not just 2.
  with open(out / driver.METRICS_FILE, 'a') as f:
    f.write('4,0.12')  # A kill in the middle of appending round 4's row.
  resumed = _experiment(task, process, out, rounds=4, checkpoint_every=2)
  full = _experiment(task, process, tmp_path / 'full', rounds=4,
                     checkpoint_every=2)
  assert [r['round'] for r in _rows(out)] == ['1', '2', '3', '4']
  same = (driver.TRAIN_LOSS_KEY, 'eval/loss', 'sgd_steps_cumulative')
  assert ([[r[k] for k in same] for r in _rows(out)]
          == [[r[k] for k in same] for r in _rows(tmp_path / 'full')])
  np.testing.assert_array_equal(
      process.get_model_weights(resumed.state).trainable,
      process.get_model_weights(full.state).trainable)


# ------------------------------------------------------- unusable directories
def _bad_dirs(tmp_path):
  a_file = tmp_path / 'a_file'
  a_file.write_text('x')
  corrupt_config = tmp_path / 'corrupt_config'
  corrupt_config.mkdir()
  (corrupt_config / driver.CONFIG_FILE).write_text('{"seed": ')
  return {
      '': 'output_dir is empty',
      str(a_file): f'output_dir {a_file} cannot be created',
      str(a_file / 'run'): f'output_dir {a_file}/run cannot be created',
      str(corrupt_config): f'{corrupt_config}/config.json is unreadable',
  }


def test_unusable_output_dirs_are_one_line_errors(task, process, tmp_path):
  for out, message in _bad_dirs(tmp_path).items():
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(driver.OutputDirError) as error:
      _experiment(task, process, out)
    assert str(error.value).startswith(message)
    assert '\n' not in str(error.value)
    assert sorted(os.listdir(tmp_path)) == before


def test_a_corrupt_metrics_file_is_a_one_line_error(task, process, tmp_path):
  out = tmp_path / 'run'
  _experiment(task, process, out, rounds=2)
  (out / driver.METRICS_FILE).write_text('round,loss\n1,abc\n')
  with pytest.raises(driver.OutputDirError,
                     match=f'{out}/metrics.csv is unreadable'):
    _experiment(task, process, out, rounds=3)
  assert _versions(out) == ['round_1', 'round_2']


def test_too_few_movielens_users_is_one_line_before_any_output(tmp_path):
  from tasks.movielens import data as movielens_data  # pylint: disable=g-import-not-at-top
  from tasks.movielens import task as movielens_task  # pylint: disable=g-import-not-at-top
  (tmp_path / 'ratings.dat').write_text(
      '1::10::5::978300760\n1::20::4::978300761\n2::30::3::978300762\n')
  with pytest.raises(movielens_data.RatingsFormatError) as error:
    movielens_task.load(str(tmp_path))
  assert str(error.value).startswith(
      f'{tmp_path}/ratings.dat: its 2 users leave the central users without '
      'an example')


# ------------------------------------------------------------------ binaries
def _binary(*flags):
  return binaries.run('tasks.quadratic.train', '--progress=false', *flags)


def _checkpointed(output_dir):
  """The rounds of the checkpoints in a run directory (those kept)."""
  path = output_dir / 'checkpoints'
  names = os.listdir(path) if path.exists() else []
  return sorted(int(m.group(1)) for m in map(
      re.compile(r'round_(\d+)$').match, names) if m)


def _last_lines(stderr):
  """stderr without TF's and absl's start-up logging."""
  return [line for line in stderr.splitlines()
          if line and not line[:1] in 'IWE' or line.startswith(
              ('Error', 'Warning'))]


def test_binary_refuses_nan_flags_and_writes_nothing(tmp_path):
  out = tmp_path / 'run'
  result = _binary(f'--output_dir={out}', '--client_learning_rate=nan')
  assert result.returncode == 1
  assert ('flag --client_learning_rate=nan: must be a finite number.'
          in result.stderr)
  assert not out.exists()


def test_binary_non_finite_exits_1_and_ctrl_c_exits_130(tmp_path):
  """One subprocess each: a diverging run's one line; Ctrl-C mid-run."""
  diverging = _binary(f'--output_dir={tmp_path / "diverging"}', '--rounds=3',
                      '--algorithm=fedadam', '--client_learning_rate=1e8',
                      '--num_local_steps=3')
  assert diverging.returncode == 1
  assert _last_lines(diverging.stderr)[-1].startswith(
      'Error: round 1: the new state is not finite in the server optimizer')

  out = tmp_path / 'interrupted'
  run = binaries.popen(
      'tasks.quadratic.train', '--progress=false',
      f'--output_dir={out}', '--rounds=100000', '--checkpoint_every=1',
      '--clients_per_round=2', '--num_local_steps=1',
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  deadline = time.time() + 600  # Bounds a hang only.
  # The driver keeps round 1's and the last two checkpoints: round_3 lives
  # for two rounds, which a fast machine may finish between two looks.
  while max(_checkpointed(out), default=0) < 3:
    if run.poll() is not None:
      pytest.fail(f'exit {run.returncode} before round 3:\n'
                  + run.communicate()[1][-4000:])
    if time.time() > deadline:  # faulthandler prints every thread's stack.
      run.send_signal(signal.SIGABRT)
      pytest.fail(f'no round 3 after 600 s ({_checkpointed(out)}); '
                  'threads:\n' + run.communicate(timeout=60)[1][-8000:])
    time.sleep(0.2)
  run.send_signal(signal.SIGINT)
  try:
    _, stderr = run.communicate(timeout=120)
  except subprocess.TimeoutExpired:
    run.send_signal(signal.SIGABRT)
    _, stderr = run.communicate(timeout=60)
    pytest.fail('no exit 120 s after SIGINT; threads:\n' + stderr[-6000:])
  finally:
    if run.poll() is None:
      run.kill()
  assert run.returncode == 130, stderr[-4000:]
  last = _last_lines(stderr)[-1]
  assert last.startswith('interrupted in round '), stderr[-4000:]
  interrupted = int(last.split()[3].rstrip(';'))
  assert interrupted > 3
  assert last.endswith('; resume with the same command (from the checkpoint '
                       f'of round {interrupted - 1}).')
  assert 'Traceback' not in stderr
  assert not (out / driver.LOCK_FILE).exists()
