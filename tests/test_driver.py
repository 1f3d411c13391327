"""The driver: resume equals an uninterrupted run; output-dir protection."""

import asyncio
import csv
import dataclasses
import functools
import json
import os

import numpy as np
import pytest
import tensorflow_federated as tff

from tasks.quadratic import task as quadratic_task
from tests import runs
import tff_mixed
from tff_mixed import algorithms
from tff_mixed import optimizers
from tff_mixed import driver
from tff_mixed import schedules
from tff_mixed.templates import client_groups


@pytest.fixture(scope='module')
def task():
  return quadratic_task.create_quadratic_task(num_eval_points=50)


@pytest.fixture(scope='module')
def process(task):
  return algorithms.build_fed_avg(
      task.model_fn,
      tff.learning.optimizers.build_sgdm(learning_rate=0.1),
      tff.learning.optimizers.build_sgdm(learning_rate=0.5, momentum=0.9),
      num_local_steps=3,
  )


class _Crash(Exception):
  pass


class _CrashingProcess:
  """Delegates to a process but dies at round `crash_round` (like a kill)."""

  def __init__(self, process, crash_round):
    self._process = process
    self._crash_round = crash_round
    self._rounds = 0

  def __getattr__(self, name):
    return getattr(self._process, name)

  def next(self, state, data):
    self._rounds += 1
    if self._rounds == self._crash_round:
      raise _Crash()
    return self._process.next(state, data)


_experiment = functools.partial(
    runs.experiment, rounds=6, clients_per_round=4, seed=7, eval_every=2,
    checkpoint_every=2, config={'k': 3})


@pytest.fixture(scope='module')
def fed_gbo(task):
  return algorithms.build_fed_gbo(
      task.model_fn, optimizers.build_adam(0.05), num_local_steps=3)


@pytest.mark.parametrize('name', ['fed_avg', 'fed_gbo'])
def test_resume_after_a_kill_equals_an_uninterrupted_run(
    task, process, fed_gbo, name, tmp_path, capsys):
  process = {'fed_avg': process, 'fed_gbo': fed_gbo}[name]
  full = _experiment(task, process, str(tmp_path / 'full'))
  interrupted_dir = str(tmp_path / 'interrupted')
  with pytest.raises(_Crash):
    # Dies in round 5: rounds 1-4 checkpointed at 2 and 4.
    _experiment(task, _CrashingProcess(process, 5), interrupted_dir)
  capsys.readouterr()
  resumed = _experiment(task, process, interrupted_dir)
  # Said without a progress bar too.
  assert (f'{interrupted_dir}: resuming from the checkpoint of round 4 of 6.'
          in capsys.readouterr().err)
  assert full.resumed_from == 0 and resumed.resumed_from == 4

  x_full = process.get_model_weights(full.state).trainable
  x_resumed = process.get_model_weights(resumed.state).trainable
  np.testing.assert_array_equal(x_full, x_resumed)  # Server momentum included.
  if name == 'fed_gbo':  # So are the global statistics.
    for key in ('m', 'v'):
      for a, b in zip(full.state['client_work']['optimizer_state'][key],
                      resumed.state['client_work']['optimizer_state'][key]):
        np.testing.assert_array_equal(a, b)
  assert [r['round'] for r in resumed.history] == [1, 2, 3, 4, 5, 6]
  assert resumed.history[-1]['sgd_steps_cumulative'] == 6 * 4 * 3
  for a, b in zip(full.history, resumed.history):
    assert a['client_work/train/loss'] == b['client_work/train/loss']
  with open(os.path.join(interrupted_dir, driver.METRICS_FILE)) as f:
    rows = list(csv.DictReader(f))
  assert [float(r['round']) for r in rows] == [1, 2, 3, 4, 5, 6]
  assert float(rows[-1]['eval/x']) == pytest.approx(float(x_full[0]), rel=1e-6)
  assert resumed.final_eval == full.final_eval


def test_restart_of_a_finished_run_trains_no_more(task, process, tmp_path,
                                                  capsys):
  out = str(tmp_path / 'done')
  first = _experiment(task, process, out, rounds=2)
  capsys.readouterr()
  again = _experiment(task, process, out, rounds=2)
  assert (f'{out}: already complete (2 rounds); nothing to train.'
          in capsys.readouterr().err)
  assert again.resumed_from == 2
  np.testing.assert_array_equal(
      process.get_model_weights(first.state).trainable,
      process.get_model_weights(again.state).trainable,
  )
  assert len(again.history) == 2
  assert again.final_eval == first.final_eval


def test_output_dir_of_another_configuration_is_refused(task, tmp_path):
  out = str(tmp_path / 'run')
  driver.prepare_output_dir(out, {'num_local_steps': 3})
  with open(os.path.join(out, driver.CONFIG_FILE)) as f:
    before = f.read()
  with pytest.raises(driver.OutputDirError, match='num_local_steps: 3 there, 5 now'):
    driver.prepare_output_dir(out, {'num_local_steps': 5})
  with open(os.path.join(out, driver.CONFIG_FILE)) as f:
    assert f.read() == before


def test_how_a_run_was_started_is_recorded_not_compared(tmp_path):
  """config.json's "execution" (the rounds asked for, ...) is not part of
  the run: a restart with more rounds resumes and rewrites it; a record
  from before it existed stays byte for byte."""
  out = str(tmp_path / 'run')
  path = os.path.join(out, driver.CONFIG_FILE)
  assert driver.prepare_output_dir(out, {'k': 3, driver.EXECUTION: {
      'rounds': 2}})
  assert not driver.prepare_output_dir(out, {'k': 3, driver.EXECUTION: {
      'rounds': 5}})
  with open(path) as f:
    record = json.load(f)
  assert (record['k'], record[driver.EXECUTION]) == (3, {'rounds': 5})
  del record[driver.EXECUTION]
  with open(path, 'w') as f:
    json.dump(record, f)
  with open(path) as f:
    before = f.read()
  assert not driver.prepare_output_dir(out, {'k': 3, driver.EXECUTION: {
      'rounds': 7}})
  with open(path) as f:
    assert f.read() == before


def test_config_records_the_code_that_made_the_run(task, process, tmp_path,
                                                   capsys):
  out = tmp_path / 'run'
  _experiment(task, process, str(out), rounds=1)
  config = json.loads((out / driver.CONFIG_FILE).read_text())
  made_by = config.pop(driver.PROVENANCE)
  # The values the process starts with, as numbers (0.1, not float32 noise).
  assert config.pop(driver.RESOLVED) == {'hparams': {
      'client_work/optimizer_hparams/learning_rate': 0.1,
      'client_work/num_local_steps': 3,
      'client_work/round_num': 0,
      'client_work/schedules/num_local_steps/value': 3,
      'finalizer/learning_rate': 0.5,
      'finalizer/momentum': 0.9,
  }}
  assert config == {'k': 3, 'task': 'quadratic', 'seed': 7,
                    'clients_per_round': 4}
  assert made_by == driver.provenance()
  assert made_by['tff_mixed'] == tff_mixed.__version__
  assert made_by['tensorflow_federated'] == tff.__version__
  assert len(made_by['git_commit']) == 40  # The tests run in a checkout.
  # Other code resumes the run (provenance is not compared), and says so.
  made_by['git_commit'] = '0' * 40
  config[driver.PROVENANCE] = made_by
  (out / driver.CONFIG_FILE).write_text(json.dumps(config))
  capsys.readouterr()
  _experiment(task, process, str(out), rounds=2)
  now = driver.provenance()
  assert (f'Warning: output_dir {out} was started with git_commit {"0" * 40}; '
          f'resuming with git_commit {now["git_commit"]}.\n') in (
              capsys.readouterr().err)
  # On another runtime: named, with what it means for the model.
  other = 'in_process' if now['runtime'] == 'tff' else 'tff'
  made_by['git_commit'], made_by['runtime'] = now['git_commit'], other
  config[driver.PROVENANCE] = made_by
  (out / driver.CONFIG_FILE).write_text(json.dumps(config))
  _experiment(task, process, str(out), rounds=3)
  assert (f'Warning: output_dir {out} was started with runtime {other}; '
          f'resuming with runtime {now["runtime"]}; its model goes on with this '
          "runtime's arithmetic, which rounds differently (docs/execution.md, "
          '"Runtimes").\n') in capsys.readouterr().err


def test_a_run_that_fails_before_its_first_round_leaves_nothing(
    task, process, tmp_path):
  """A process that does not fit (here: it takes one dataset per client,
  the call says groups) leaves no config.json to clash with the next try;
  an earlier run's directory is left as it was."""
  for out in (tmp_path / 'new', tmp_path / 'existing'):
    if out.name == 'existing':
      out.mkdir()
      (out / 'notes.txt').write_text('mine')
    with pytest.raises(ValueError, match=(
        r"^client_groups=ClientGroups\(count=2, mode='vectorised'\) but the "
        r'process takes one dataset per client \(build it with the same '
        r'client_groups\)\.$')):
      runs.experiment(task, process, out, rounds=2, clients_per_round=2,
                      client_groups=client_groups.ClientGroups(2))
  assert not (tmp_path / 'new').exists()
  assert os.listdir(tmp_path / 'existing') == ['notes.txt']
  _experiment(task, process, tmp_path / 'new', rounds=1)  # Starts cleanly.


def test_the_run_says_the_number_of_groups(task, process, tmp_path):
  """A process built with `ClientGroups(2)` runs in fast mode when the run
  says how many groups (the same model as faithful mode, to float
  rounding); without it, one line says to."""
  grouped_process = algorithms.build_fed_avg(
      task.model_fn, tff.learning.optimizers.build_sgdm(learning_rate=0.1),
      tff.learning.optimizers.build_sgdm(learning_rate=0.5, momentum=0.9),
      num_local_steps=3, client_groups=client_groups.ClientGroups(2))
  faithful = _experiment(task, process, str(tmp_path / 'faithful'), rounds=2)
  grouped = _experiment(task, grouped_process, str(tmp_path / 'grouped'),
                        rounds=2, client_groups=client_groups.ClientGroups(2))
  for a, b in zip(tff.structure.flatten(faithful.state),
                  tff.structure.flatten(grouped.state), strict=True):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
  with pytest.raises(ValueError, match=r'^The process takes client groups '
                     r'\(built with client_groups\): pass the run the same '
                     r'client_groups=ClientGroups\(N\)\.$'):
    _experiment(task, grouped_process, str(tmp_path / 'unsaid'), rounds=1)
  assert not (tmp_path / 'unsaid').exists()


@pytest.mark.parametrize('kwargs, error, message', [
    (dict(rounds=0), ValueError, r'^rounds must be >= 1, got 0\.$'),
    (dict(clients_per_round=0), ValueError,
     r'^clients_per_round must be >= 1, got 0\.$'),
    (dict(checkpoint_every=0), ValueError,
     r'^checkpoint_every must be >= 1, got 0\.$'),
    (dict(eval_every=-1), ValueError, r'^eval_every must be >= 0, got -1\.$'),
    (dict(rounds=2.0), TypeError, r'^rounds must be an int, got 2\.0\.$'),
    (dict(rounds=True), TypeError, r'^rounds must be an int, got True\.$'),
])
def test_a_run_argument_out_of_range_is_one_line_naming_it(
    task, process, tmp_path, kwargs, error, message):
  arguments = dict(rounds=1, clients_per_round=1,
                   output_dir=str(tmp_path / 'run'))
  with pytest.raises(error, match=message):
    driver.run_experiment(task, process, **{**arguments, **kwargs})
  assert not (tmp_path / 'run').exists()  # Nothing written.
  with pytest.raises(TypeError, match=r'^task must be a '
                     r'tff_mixed.task.Task, got str\.$'):
    driver.run_experiment('quadratic', process, **arguments)


def test_flatten_metrics():
  nested = {'a': {'b': np.float32(1.5), 'c': ()}, 'd': np.int64(3)}
  assert driver.flatten_metrics(nested) == {'a/b': 1.5, 'd': 3}


def test_named_evaluation_datasets_are_logged_apart(task, process, tmp_path):
  """An eval_dataset_fn may return {name: dataset}: each is evaluated."""
  z_low, z_high = 1.0, 3.0
  named = dataclasses.replace(task, eval_dataset_fn=lambda: {
      'low': quadratic_task.client_dataset(repr(z_low)),
      'high': quadratic_task.client_dataset(repr(z_high))})
  result = runs.experiment(named, process, tmp_path, rounds=1,
                           clients_per_round=2, eval_every=1)
  x = float(process.get_model_weights(result.state).trainable[0])
  for name, z in (('low', z_low), ('high', z_high)):
    assert result.final_eval[f'{name}/x'] == pytest.approx(x)
    # f(x; z) = z x^2 / 2 - x on that one client.
    assert result.final_eval[f'{name}/loss'] == pytest.approx(
        0.5 * z * x * x - x, rel=1e-5)
    assert f'eval/{name}/loss' in result.history[-1]


def test_run_rounds_is_run_experiments_loop(task, process, tmp_path):
  """The bare loop with the driver's cohorts gives run_experiment's model,
  and calls the hook once a round, in order, with the round's output."""
  seen = []
  state = driver.run_rounds(
      process,
      process.set_model_weights(process.initialize(),
                                driver.seeded_initial_weights(task.model_fn, 7)),
      lambda r: task.cohort(7, r, 4), range(1, 4),
      lambda r, output, seconds: seen.append((r, output.state, seconds)))
  assert [r for r, _, _ in seen] == [1, 2, 3]
  assert all(seconds > 0 for _, _, seconds in seen)
  assert seen[-1][1] is state
  result = _experiment(task, process, str(tmp_path / 'run'), rounds=3)
  np.testing.assert_array_equal(
      process.get_model_weights(state).trainable,
      process.get_model_weights(result.state).trainable)


# ------------------------------------------------- EvalPlateau (seed 001's K-step)
# Far left of every client's optimum 1/z (z in [1, 3]), with a small rate:
# every step of every client raises x, so eval/x rises at every evaluation
# and eval/loss falls.
@pytest.fixture(scope='module')
def far_task():
  return quadratic_task.create_quadratic_task(initial_x=-20.0,
                                              num_eval_points=50)


@pytest.fixture(scope='module')
def k4_process(far_task):
  return algorithms.build_fed_avg(
      far_task.model_fn, tff.learning.optimizers.build_sgdm(learning_rate=1e-3),
      num_local_steps=4)


def _plateau_run(task, process, output_dir, plateau, rounds=8):
  return runs.experiment(
      task, process, output_dir, rounds=rounds, clients_per_round=3, seed=7,
      eval_every=2, checkpoint_every=2, config={'k': 4},
      eval_plateaus=[plateau])


# x climbs towards the optimum every round, so watching it with mode='min'
# never improves after the first evaluation: with patience 1, K halves at
# every later evaluation (rounds 4 and 6), from 4 to 2 to 1, and stays 1.
_X_PLATEAU = driver.EvalPlateau(
    schedules.on_plateau(4, factor=0.5, patience=1), metric='eval/x')


def test_eval_plateau_halves_k_at_the_evaluations_hand_computed(
    far_task, k4_process, tmp_path):
  result = _plateau_run(far_task, k4_process, str(tmp_path / 'run'), _X_PLATEAU)
  xs = [row['eval/x'] for row in result.history if 'eval/x' in row]
  assert xs == sorted(xs) and len(set(xs)) == 4  # The premise: x rises.
  # Rounds 1-4 at K = 4, rounds 5-6 at 2, rounds 7-8 at 1; 3 clients each.
  assert [row['client_work/sgd_steps'] for row in result.history] == [
      12, 12, 12, 12, 6, 6, 3, 3]
  assert [row.get('eval_plateau/num_local_steps') for row in result.history
          ] == [None, 4, None, 2, None, 1, None, 1]
  # The same rounds with K set by hand through set_hparams.
  state = k4_process.set_model_weights(
      k4_process.initialize(),
      driver.seeded_initial_weights(far_task.model_fn, 7))

  def set_k(state, k):
    hparams = k4_process.get_hparams(state)
    hparams['client_work']['num_local_steps'] = np.int32(k)
    return k4_process.set_hparams(state, hparams)

  for first, last, k in ((1, 4, 4), (5, 6, 2), (7, 8, 1)):
    state = set_k(state, k)
    state = driver.run_rounds(
        k4_process, state,
        lambda r: far_task.cohort(7, r, 3),
        range(first, last + 1))
  np.testing.assert_array_equal(
      k4_process.get_model_weights(state).trainable,
      k4_process.get_model_weights(result.state).trainable)


def test_eval_plateau_on_the_learning_rate_max_mode(far_task, k4_process,
                                                     tmp_path):
  """mode='max' negates the metric: x rising is an improvement, so nothing
  decays; 'eval/loss' with mode='max' is the reverse (loss falls)."""
  rates = {}
  for metric in ('eval/x', 'eval/loss'):
    plateau = driver.EvalPlateau(
        schedules.on_plateau(1e-3, factor=0.1, patience=1),
        hparam='learning_rate', metric=metric, mode='max')
    result = _plateau_run(far_task, k4_process, str(tmp_path / metric[5:]),
                          plateau, rounds=6)
    rates[metric] = [row['eval_plateau/learning_rate']
                     for row in result.history if 'eval/x' in row]
    hparams = k4_process.get_hparams(result.state)['client_work']
    assert hparams['optimizer_hparams']['learning_rate'] == pytest.approx(
        rates[metric][-1])
  assert rates['eval/x'] == [pytest.approx(1e-3)] * 3
  assert rates['eval/loss'] == [pytest.approx(1e-3), pytest.approx(1e-4),
                                pytest.approx(1e-5)]


def test_eval_plateau_resumes_exactly(far_task, k4_process, tmp_path):
  full = _plateau_run(far_task, k4_process, str(tmp_path / 'full'), _X_PLATEAU)
  interrupted = str(tmp_path / 'interrupted')
  with pytest.raises(_Crash):  # Dies in round 6: saved at round 4, K = 2.
    _plateau_run(far_task, _CrashingProcess(k4_process, 6), interrupted,
                 _X_PLATEAU)
  resumed = _plateau_run(far_task, k4_process, interrupted, _X_PLATEAU)
  assert ([row['client_work/sgd_steps'] for row in resumed.history]
          == [row['client_work/sgd_steps'] for row in full.history])
  np.testing.assert_array_equal(
      k4_process.get_model_weights(full.state).trainable,
      k4_process.get_model_weights(resumed.state).trainable)


def test_eval_plateau_misuse_is_one_clear_error(far_task, k4_process, tmp_path):
  scheduled_k = algorithms.build_fed_avg(
      far_task.model_fn, tff.learning.optimizers.build_sgdm(learning_rate=1e-3),
      num_local_steps=schedules.exponential_decay(4, 0.5))
  cases = [
      (k4_process, _X_PLATEAU, 0, 'need eval_every >= 1'),
      (k4_process, dataclasses.replace(_X_PLATEAU, metric='eval/accuracy'),
       2, "does not report 'eval/accuracy'; it reports eval/loss, "
       'eval/num_examples, eval/x'),
      (k4_process, driver.EvalPlateau(schedules.on_plateau(3, 0.5, 1)), 2,
       'is at 3, but the process is at 4'),
      (scheduled_k, _X_PLATEAU, 2, 'follows a schedule of its own'),
  ]
  for i, (process, plateau, eval_every, message) in enumerate(cases):
    with pytest.raises(driver.EvalPlateauError, match=message):
      runs.experiment(
          far_task, process, tmp_path / str(i), rounds=4, clients_per_round=2,
          eval_every=eval_every, eval_plateaus=[plateau])
    if 'schedule of its own' not in message:  # That one shows in training.
      assert not os.path.exists(tmp_path / str(i))  # No half-made run left.
  with pytest.raises(driver.EvalPlateauError, match='on_plateau schedule'):
    driver.EvalPlateau(schedules.exponential_decay(4, 0.5))
  with pytest.raises(driver.EvalPlateauError, match="'min' or 'max'"):
    driver.EvalPlateau(schedules.on_plateau(4, 0.5, 1), mode='down')


def test_checkpoints_read_and_write_inside_a_running_event_loop():
  """A Jupyter kernel runs an event loop, where `asyncio.run` refuses: the
  driver's state-manager calls run there too (on a helper thread)."""
  from tff_mixed.driver import checkpoints  # pylint: disable=g-import-not-at-top

  async def inside_a_loop():
    return checkpoints.run_sync(asyncio.sleep(0, result=7))

  assert checkpoints.run_sync(asyncio.sleep(0, result=5)) == 5
  assert asyncio.run(inside_a_loop()) == 7
