"""The ray runtime: a round's clients trained on Ray actors.

A real local Ray (on 127.0.0.1, started by `tff_mixed.execution` and ended
by it), two actors unless said: the same model as in process to float
rounding (the registry-wide check is tests/test_runtimes.py's), the same
model run after run, one actor's model in process's bit for bit, a dead
actor's share re-run, no socket beyond loopback, nothing left running.
"""

import functools
import operator
import os
import signal
import threading
import subprocess
import time
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf

from tasks.common import registry
from tasks.common import run as run_lib
from tasks.common import run_config
from tasks.common import run_spec
from tests import binaries
from tests import linear
from tests import runs
from tests import test_runtimes
from tff_mixed import execution
from tff_mixed import task as task_lib
from tff_mixed.runtimes import ray_actor
from tff_mixed.runtimes import ray_runtime
from tff_mixed.runtimes import ray_session

ray = pytest.importorskip('ray')

ROUNDS = 3
DATA = test_runtimes._data()  # pylint: disable=protected-access


@pytest.fixture(scope='module')
def process():
  return registry.build_process(test_runtimes._config('fedavg'),  # pylint: disable=protected-access
                                linear.model_fn, clients_per_round=4)


def _flat(outputs):
  return [np.asarray(x) for x in tf.nest.flatten(outputs)]


def test_two_actors_give_in_process_model_and_the_same_run_twice(process):
  with execution.running_on('in_process'):
    start = process.initialize()
    in_process = runs.rounds(process, DATA, ROUNDS, state=start)
  with execution.running_on('ray', workers=2):
    assert execution.current_runtime() == 'ray'
    on_ray = runs.rounds(process, DATA, ROUNDS, state=start)
    again = runs.rounds(process, DATA, ROUNDS, state=start)
    # A run started in process resumes on Ray: round 3 from round 2's state.
    resumed = runs.rounds(process, DATA, 1, state=in_process[1][0])
  assert len(execution.ray_context().actor_pids()) == 2
  for x, y in zip(_flat(on_ray), _flat(again)):
    np.testing.assert_array_equal(x, y)
  for x, y in zip(_flat(on_ray), _flat(in_process)):
    np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-6)
  for x, y in zip(_flat(resumed[0]), _flat(in_process[2])):
    np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-6)
  # And back: round 3 in process from Ray's round 2.
  with execution.running_on('in_process'):
    back = runs.rounds(process, DATA, 1, state=on_ray[1][0])
  for x, y in zip(_flat(back[0]), _flat(in_process[2])):
    np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-6)


def test_actors_keep_the_last_rounds_and_import_a_dropped_one_again(process):
  """An actor keeps the client loops of the last `ray_actor.KEPT` round
  computations it ran (it lives across every process run on it); one
  dropped and run again is imported again: the same round, bit for bit."""
  # KEPT other rounds after `process`'s: its loop is the one dropped.
  others = [registry.build_process(test_runtimes._config(name),  # pylint: disable=protected-access
                                   linear.model_fn, clients_per_round=4)
            for name in ('fedprox', 'fedavg')]
  assert len(others) == ray_actor.KEPT
  with execution.running_on('ray', workers=2):
    start = process.initialize()
    first = runs.rounds(process, DATA, 1, state=start)
    for other in others:
      runs.rounds(other, DATA, 1)
    actors = execution.ray_context()._actors  # pylint: disable=protected-access
    # Loops, and tasks (none: these rounds' clients travel as datasets).
    assert ray.get([a.kept.remote() for a in actors]) == [
        (ray_actor.KEPT, 0)] * 2
    again = runs.rounds(process, DATA, 1, state=start)
  for x, y in zip(_flat(first), _flat(again)):
    np.testing.assert_array_equal(x, y)


def test_a_dead_actors_share_is_rerun_and_the_model_is_unchanged(
    process, caplog):
  with execution.running_on('ray', workers=2):
    start = process.initialize()
    whole = runs.rounds(process, DATA, 2, state=start)
    first = runs.rounds(process, DATA, 1, state=start)
    for pid in execution.ray_context().actor_pids():
      os.kill(pid, signal.SIGKILL)
    with caplog.at_level('WARNING'):
      second = runs.rounds(process, DATA, 1, state=first[0][0])
  for x, y in zip(_flat(second[0]), _flat(whole[1])):
    np.testing.assert_array_equal(x, y)
  died = [r.getMessage() for r in caplog.records if 'died mid-round' in
          r.getMessage()]
  assert len(died) == 2, died  # One line for each actor.
  assert "the round's result is unchanged" in died[0]
  # A share that kills every actor it meets ends the round in one line
  # (here: no retry allowed, and the actors killed before it).
  with execution.running_on('ray', workers=2):
    for pid in execution.ray_context().actor_pids():
      os.kill(pid, signal.SIGKILL)
    with mock.patch.object(ray_runtime, '_ACTOR_RETRIES', 0):
      with pytest.raises(ray_runtime.RayRuntimeError,
                         match=r'^actor 0 died running the same block of 2 '
                         r'clients, tries: 1 \(') as raised:
        runs.rounds(process, DATA, 1, state=first[0][0])
  assert len(str(raised.value).splitlines()) == 1


def test_one_actor_gives_in_process_model_bit_for_bit(process):
  with execution.running_on('in_process'):
    start = process.initialize()
    in_process = runs.rounds(process, DATA, ROUNDS, state=start)
  with execution.running_on('ray', workers=1):
    on_ray = runs.rounds(process, DATA, ROUNDS, state=start)
  for x, y in zip(_flat(on_ray), _flat(in_process)):
    np.testing.assert_array_equal(x, y)


def _listening(pids):
  """The local addresses the processes `pids` listen on (TCP)."""
  lines = subprocess.run(['ss', '-ltnpH'], capture_output=True, text=True,
                         check=True).stdout.splitlines()
  return [line.split()[3] for line in lines
          if any(f'pid={pid},' in line for pid in pids)]


def _session_pids(session_dir):
  found = subprocess.run(['pgrep', '-f', session_dir], capture_output=True,
                         text=True).stdout.split()
  return [int(p) for p in found]


def test_ray_listens_on_loopback_only_sends_no_statistics_and_ends(process):
  with execution.running_on('ray', workers=2):
    with execution.running_on('in_process'):
      start = process.initialize()
    runs.rounds(process, DATA, 1, state=start)
    context = execution.ray_context()
    session = context.session_dir
    assert session and os.stat(session).st_mode & 0o077 == 0  # Private.
    pids = _session_pids(session) + context.actor_pids()
    addresses = _listening(pids)
    assert addresses, 'Ray listens somewhere'
    assert all(a.rsplit(':', 1)[0] in ('127.0.0.1', '[::ffff:127.0.0.1]')
               for a in addresses), addresses
    assert os.environ['RAY_USAGE_STATS_ENABLED'] == '0'
  execution.shutdown()
  assert not ray.is_initialized()
  # The watchdog ends what ray.shutdown leaves and removes the directory;
  # the processes end in their own time (up to a minute on a busy machine).
  def ended(pid):
    try:
      with open(f'/proc/{pid}/stat') as f:
        return f.read().split()[2] == 'Z'  # Ended, not yet reaped.
    except OSError:
      return True

  for _ in range(600):
    if (not os.path.exists(session) and not _session_pids(session) and
        all(ended(pid) for pid in pids)):
      break
    time.sleep(0.1)
  assert not os.path.exists(session)
  assert not _session_pids(session)
  assert [pid for pid in pids if not ended(pid)] == []


def test_a_dataset_that_cannot_leave_the_process_is_refused_in_one_line(
    process):
  stateful = test_runtimes._data()  # pylint: disable=protected-access
  stateful[0] = stateful[0].map(
      lambda batch: tf.py_function(lambda x: x, [batch['x']], tf.float32))
  with execution.running_on('in_process'):
    start = process.initialize()
  with execution.running_on('ray', workers=2):
    with pytest.raises(ray_runtime.RayRuntimeError) as raised:
      process.next(start, [stateful[0]] + test_runtimes._data()[1:])  # pylint: disable=protected-access
  assert len(str(raised.value).splitlines()) == 1
  assert '--runtime=in_process' in str(raised.value)


@pytest.mark.skipif(not tf.config.list_physical_devices('GPU'),
                    reason='TensorFlow sees no GPU here.')
def test_each_actor_gets_a_gpu_of_its_own(process):
  gpus = len(tf.config.list_physical_devices('GPU'))
  with execution.running_on('ray', workers=gpus, gpus_per_worker=1):
    with execution.running_on('in_process'):
      start = process.initialize()
    runs.rounds(process, DATA, 1, state=start)
    seen = execution.ray_context().actor_gpus()
  assert [len(s) for s in seen] == [1] * gpus, seen


def test_a_grid_hands_its_runs_to_ray(tmp_path):
  """The grid runner's runs as Ray tasks (a CPU each): the same finished and
  failed runs as running them here (tests/test_grid.py's fake grid)."""
  from tasks.grid import runner  # pylint: disable=g-import-not-at-top
  from tests import test_grid  # pylint: disable=g-import-not-at-top
  # A local Ray of its own, as --ray_address=local starts: one whose
  # actors (earlier tests' rounds) hold its CPUs would never run the runs'
  # tasks (a CPU each), and the test would wait for ever.
  execution.shutdown()
  execution.ray_context()
  spec = test_grid._fake_spec(fail_high_b=True)  # pylint: disable=protected-access
  grid_runs = spec.runs(str(tmp_path))
  with open(os.devnull, 'w') as out:
    failed = runner.run_all(grid_runs, str(tmp_path), parallel=len(grid_runs),
                            out=out, start=runner.on_ray())
  assert [r.name for r in failed] == [
      f'acc=high, x=b, seed {seed}' for seed in range(3)]
  assert all(runner.is_done(r) for r in grid_runs if r not in failed)


def test_a_cohort_is_cut_into_one_block_an_actor():
  assert ray_runtime.blocks(3, 1) == [range(3)]
  assert ray_runtime.blocks(0, 2) == []
  assert ray_runtime.blocks(5, 2) == [range(0, 3), range(3, 5)]
  assert ray_runtime.blocks(2, 3) == [range(0, 1), range(1, 2)]


def test_ray_options_need_the_ray_runtime():
  config = run_config.Execution(ray_workers=2)
  with pytest.raises(run_lib.WorkerError, match=r"^--ray_workers: the ray "
                     r"runtime's; add --runtime=ray \(runtime=in_process"):
    run_lib.check_workers(config)
  with pytest.raises(run_lib.WorkerError, match=r"^--concurrency: the "
                     r"in_process runtime's; add --runtime=in_process"):
    run_lib.check_workers(run_config.Execution(concurrency=2, runtime='ray'))
  run_lib.check_workers(run_config.Execution(ray_workers=2, runtime='ray'))
  with pytest.raises(ValueError, match=r"^workers: not an option of runtime "
                     r"'in_process' \(its options: concurrency\)\.$"):
    execution.set_runtime('in_process', workers=2)
  with pytest.raises(ValueError, match=r'ray workers must be an int >= 1'):
    ray_runtime.RayContext.start(workers=0)
  # A cluster that is not there: one line at once, not Ray's minutes of
  # retries.
  with pytest.raises(ray_runtime.RayRuntimeError,
                     match=r'^no Ray cluster answers at 127.0.0.1:1 '):
    ray_session.check_reachable('127.0.0.1:1')
  with pytest.raises(ValueError, match='host:port or auto'):
    ray_session.check_reachable('nonsense')


def test_a_run_resumes_on_ray_from_in_process(tmp_path):
  """Two rounds of a digits run in process, resumed on Ray for a third:
  metrics.csv equals three rounds in process (to float rounding, but the
  wall-clock seconds). Through `run(spec)`, as a binary runs (its flags are
  tests/test_training_flags.py's)."""
  def spec(out, rounds, **execution_of):
    return run_spec.RunSpec(
        'digits', algorithm=registry.AlgorithmConfig(
            algorithm='fedavg', num_local_steps=2),
        run=run_config.RunConfig(clients_per_round=3),
        execution=run_config.Execution(
            rounds=rounds, eval_every=1, checkpoint_every=1, progress=False,
            output_dir=str(out), **execution_of))
  both, alone = tmp_path / 'both', tmp_path / 'alone'
  run_lib.run(spec(both, 2))
  run_lib.run(spec(alone, 3))
  run_lib.run(spec(both, 3, runtime='ray', ray_workers=2))
  binaries.assert_same_metrics(both / 'metrics.csv', alone / 'metrics.csv')


def _digits_spec(out, **execution_of):
  return run_spec.RunSpec(
      'digits', algorithm=registry.AlgorithmConfig(
          algorithm='fedavg', num_local_steps=2),
      run=run_config.RunConfig(clients_per_round=5),
      execution=run_config.Execution(
          rounds=ROUNDS, eval_every=0, checkpoint_every=ROUNDS,
          progress=False, output_dir=str(out), **execution_of))


@pytest.mark.parametrize('groups', ['faithful', 'fast'])
def test_actors_build_their_clients_data_from_the_ids(tmp_path, groups):
  """A registry task's run on Ray sends the actors client ids only (each
  builds its clients' data, or fast mode's groups, with its own copy of the
  task, `Task.rebuild`): on one actor, the in-process run's model bit for
  bit."""
  run = dict(client_groups=None) if groups == 'faithful' else {}
  alone = run_lib.run(_digits_spec(tmp_path / 'alone', **run))
  sent = []
  run_blocks = ray_runtime.RayContext.run_blocks

  def spy(self, key, phases, broadcast, messages):
    sent.extend(messages)
    return run_blocks(self, key, phases, broadcast, messages)

  with mock.patch.object(ray_runtime.RayContext, 'run_blocks', spy), \
      mock.patch.object(ray_actor, 'encode',
                        side_effect=AssertionError('client data was sent')):
    on_ray = run_lib.run(_digits_spec(tmp_path / 'ray', runtime='ray',
                                      ray_workers=1, **run))
  assert len(sent) == ROUNDS
  assert all(isinstance(s, ray_actor.NamedBlock) for s in sent)
  assert [len(s) for s in sent] == [5] * ROUNDS  # Clients, in all groups.
  assert all(s.grouped == (groups == 'fast') for s in sent)
  weights = [alone.process.get_model_weights(alone.state),
             on_ray.process.get_model_weights(on_ray.state)]
  for x, y in zip(*map(_flat, weights)):
    np.testing.assert_array_equal(x, y)


def _linear_task(rebuild):
  data = test_runtimes._data()  # pylint: disable=protected-access
  return task_lib.Task(
      name='linear', model_fn=linear.model_fn,
      train_client_ids=[str(i) for i in range(len(data))],
      train_dataset_fn=lambda cid: data[int(cid)],
      client_shuffle=task_lib.NO_SHUFFLE, rebuild=rebuild)


def test_a_rebuild_that_fails_or_does_not_pickle_is_said_in_one_line(
    process, caplog):
  """A task an actor cannot rebuild ends the round in one line naming the
  error; one whose `rebuild` does not pickle has its data built here and
  sent, said once, with the same model."""
  with execution.running_on('in_process'):
    start = process.initialize()
    expected = runs.rounds(process, DATA, 1, state=start)
  failing = _linear_task(functools.partial(operator.truediv, 1, 0))
  lock = threading.Lock()
  unpicklable = _linear_task(lambda: lock)
  with execution.running_on('ray', workers=2):
    with pytest.raises(ray_runtime.RayRuntimeError, match=(
        r"^actor [01]: rebuilding the task for its clients' data: "
        r'ZeroDivisionError: division by zero$')):
      process.next(start, failing.named_cohort(0, 1, 4))
    with caplog.at_level('WARNING'):
      for _ in range(2):
        output = process.next(start, unpicklable.named_cohort(0, 1, 4))
  said = [r.getMessage() for r in caplog.records
          if 'does not pickle' in r.getMessage()]
  assert len(said) == 1 and "Task 'linear'" in said[0], said
  for x, y in zip(_flat(output), _flat(expected[0])):
    np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-6)
