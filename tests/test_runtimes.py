"""The in-process runtime runs what TFF's runtime runs, bit for bit.

Every registry algorithm (and the variants of a few: FedAdam's seed-000
reading, decaying K and client rate, DP), in faithful and fast mode, three
rounds from the same start on TFF's worker and on `tff_mixed.runtimes`: the
same state, model and metrics; on two Ray actors, the same to 1e-6 (the
merge of their sums adds in another order). Each process is built once and
run on all three.
"""

import csv
import functools
import gc
import importlib.metadata
import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tasks.common import registry
from tests import binaries
from tests import linear
from tests import runs
from tests import test_selected_rows
from tff_mixed import algorithms
from tff_mixed import execution
from tff_mixed import group_data
from tff_mixed import optimizers
from tff_mixed import runtimes
from tff_mixed import schedules
from tff_mixed.runtimes import in_process
from tff_mixed.runtimes import tf_phase
from tff_mixed.templates import client_groups

ROUNDS = 3
# Four clients of different sizes, one empty (dropped with weight 0).
CLIENTS = [linear.CLIENT_A, linear.CLIENT_B,
           ([[0.5, -1.0], [1.5, 2.0], [0.0, 0.0], [1.0, -0.5]],
            [1.0, -1.0, 0.5, 2.0]),
           (np.zeros([0, linear.DIM]), [])]


def _data():
  return [linear.dataset(x, y, batch_size=2) for x, y in CLIENTS]


def _central():
  return linear.dataset(*linear.CLIENT_B)


def _config(name, **overrides):
  entry = registry.ALGORITHMS[name]
  fields = dict(
      algorithm=name, num_local_steps=2,
      client=registry.OptimizerSpec(learning_rate=0.1),
      adaptive=optimizers.get('adam') if entry.takes_seed003_optimizer else None,
      proximal_strength=0.1 if name == 'fedprox' else None)
  return registry.AlgorithmConfig(**{**fields, **overrides})


CASES = {
    **{name: _config(name) for name in registry.NAMES},
    'fedadam_seed000': _config('fedadam', server_adam='seed000'),
    'fedavg_decaying_k_and_rate': _config(
        'fedavg', num_local_steps=schedules.exponential_decay(4, 0.5),
        client_learning_rate=schedules.exponential_decay(0.2, 0.5)),
    'fedavg_dp': _config('fedavg', aggregator='dp', clip=0.5,
                         noise_multiplier=0.5),
}


def _assert_same(a, b):
  """`a` and `b` (states and metrics) hold the same values, exactly."""
  tf.nest.assert_same_structure(a, b)
  for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


# Cases whose fast mode runs FedAvg's fast client work unchanged (they differ
# in the server step only, which faithful mode covers): faithful only.
SERVER_ONLY = ('fedadam', 'fedadam_seed000')


@pytest.mark.parametrize('case, groups', [
    (case, groups) for case in sorted(CASES) for groups in (0, 2)
    if not (groups and case in SERVER_ONLY)],
    ids=lambda v: {0: 'faithful', 2: 'fast'}.get(v, v))
def test_three_rounds_on_both_runtimes_are_the_same(case, groups):
  config = CASES[case]
  process = registry.build_process(
      config, linear.keras_model_fn if groups else linear.model_fn,
      central_data_fn=_central,
      client_groups=client_groups.ClientGroups(groups) if groups else None,
      clients_per_round=4)
  # In both modes `next` is the TFF computation the builder composed, and
  # TFF compiles it to its MapReduceForm (the in-process runtime runs that).
  assert type(process.next) is tff.framework.ConcreteComputation  # pylint: disable=unidiomatic-typecheck
  data = group_data.group_datasets(_data(), groups) if groups else _data()
  with execution.running_on('tff'):
    start = process.initialize()
    on_tff = runs.rounds(process, data, ROUNDS, state=start)
  with execution.running_on('in_process'):
    assert execution.current_runtime() == 'in_process'
    _assert_same(process.initialize(), start)
    in_process = runs.rounds(process, data, ROUNDS, state=start)
    assert isinstance(execution.in_process_context().compiled(process.next),
                      runtimes.in_process.MapReduceRound)
    # The model moved, and the clients trained (the metrics are not empty).
    assert not np.array_equal(
        process.get_model_weights(in_process[-1][0]).trainable[0],
        process.get_model_weights(start).trainable[0])
    # A run started on TFF's runtime resumes here: round 3 from round 2's
    # state is TFF's round 3.
    resumed = runs.rounds(process, data, 1, state=on_tff[1][0])
  _assert_same(in_process, on_tff)
  _assert_same(resumed[0], on_tff[2])
  # Ray's actors (two, tests/test_ray_runtime.py has the rest): the same
  # rounds but for `merge`'s order of additions.
  with execution.running_on('ray', workers=2):
    on_ray = runs.rounds(process, data, ROUNDS, state=start)
  _assert_close(on_ray, in_process)


def _assert_close(a, b, tolerance=1e-6):
  tf.nest.assert_same_structure(a, b)
  for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=tolerance,
                               atol=tolerance)


def test_each_round_is_compiled_once():
  process = registry.build_process(_config('fedavg'), linear.model_fn)
  context = runtimes.InProcessContext()
  with tff.framework.get_context_stack().install(context):
    state = process.initialize()
    first = context.compiled(process.next)
    state = process.next(state, _data()).state
    process.next(state, _data())
  assert context.compiled(process.next) is first


def test_what_the_runtime_compiled_goes_with_its_process():
  """Once a process is dropped, nothing the runtime made from it (each
  round's form, each compiled computation) stays: a notebook trains many
  processes in one Python."""
  gc.collect()
  forms = len(in_process._forms)  # pylint: disable=protected-access
  process = registry.build_process(_config('fedavg'), linear.model_fn)
  context = runtimes.InProcessContext()
  with tff.framework.get_context_stack().install(context):
    process.next(process.initialize(), _data())
  assert len(context._compiled) == 2  # initialize and next.  # pylint: disable=protected-access
  assert len(in_process._forms) == forms + 1  # pylint: disable=protected-access
  del process
  gc.collect()
  assert len(context._compiled) == 0  # pylint: disable=protected-access
  assert len(in_process._forms) == forms  # pylint: disable=protected-access


def test_work_is_placed_by_tensorflow():
  """The imported phases carry no device: TensorFlow places their work (on
  `/GPU:0` when it sees a GPU; here, on the CPU)."""
  process = registry.build_process(_config('fedavg'), linear.model_fn)
  form = tff.backends.mapreduce.get_map_reduce_form_for_computation(
      process.next)
  work = tf_phase.Phase(form.work)
  graph = work._run.graph  # pylint: disable=protected-access
  assert graph.get_operations()
  assert {op.device for op in graph.get_operations()} == {''}


@pytest.mark.skipif(not tf.config.list_physical_devices('GPU'),
                    reason='TensorFlow sees no GPU here.')
def test_work_runs_on_the_gpu_when_tensorflow_sees_one():
  """Nothing asks for the GPU: TensorFlow puts the round's work there (the
  GPU's peak memory grows while it runs)."""
  process = registry.build_process(_config('fedavg'), linear.model_fn)
  with execution.running_on('in_process'):
    state = process.initialize()
    tf.config.experimental.reset_memory_stats('GPU:0')
    output = process.next(state, _data())
  assert tf.config.experimental.get_memory_info('GPU:0')['peak'] > 0
  assert output.metrics['client_work']['clients']['participating'] == 3


def test_secure_aggregation_is_refused_in_one_line():
  process = algorithms.build_fed_avg(
      linear.model_fn, tff.learning.optimizers.build_sgdm(0.1),
      num_local_steps=2, model_aggregator=tff.learning.secure_aggregator())
  with execution.running_on('in_process'):
    state = process.initialize()
    with pytest.raises(runtimes.UnsupportedComputationError,
                       match=r'^This round aggregates securely .*; use TFF\'s '
                       r'runtime \(--runtime=tff'):
      process.next(state, _data())


def test_tensorflow_computations_of_any_arity_run_in_process():
  """Found by mutation: a runtime refusing a no-argument TensorFlow
  computation that is not a process's `initialize` went unseen. Such a
  computation (a composed process's initial weights), and one of an
  argument, run in process as on TFF's runtime."""

  @tff.tensorflow.computation
  def seven():
    return tf.constant(7.0)

  @tff.tensorflow.computation(tf.float32)
  def double(x):
    return 2.0 * x

  for runtime in ('in_process', 'tff'):
    with execution.running_on(runtime):
      assert (seven(), double(3.0)) == (7.0, 6.0), runtime


def test_an_unknown_runtime_is_refused():
  with pytest.raises(ValueError, match="runtime must be one of"):
    with execution.running_on('gpu'):
      pass


def test_the_gpu_lock_pins_tensorflows_own_cuda_wheels():
  """requirements/gpu-lock.txt is TensorFlow's `and-cuda` extra, pin for pin,
  less tensorrt (not on the registry; documented in the file)."""
  metadata = importlib.metadata.metadata('tensorflow')
  extra = {}
  for requirement in metadata.get_all('Requires-Dist'):
    match = re.fullmatch(r"(\S+) \(==(\S+)\) ; extra == 'and-cuda'",
                         requirement)
    if match:
      extra[match.group(1)] = match.group(2)
  lock = os.path.join(os.path.dirname(os.path.dirname(__file__)),
                      'requirements', 'gpu-lock.txt')
  with open(lock) as f:
    pinned = dict(line.strip().split('==') for line in f
                  if line.strip() and not line.startswith('#'))
  assert extra.pop('tensorrt') == '8.5.3.1'
  assert pinned == extra and len(pinned) == 10


def test_selected_rows_are_refused_in_one_line():
  """MovieLens's selected rows move rows with `tff.federated_select`, which
  TFF's MapReduceForm compiler cannot reduce (and its
  DistributeAggregateForm compiler refuses the round too): one line naming
  TFF's runtime, which runs it."""
  process = test_selected_rows._sparse('parallel_training')  # pylint: disable=protected-access
  with execution.running_on('in_process'):
    state = process.initialize()
    with pytest.raises(runtimes.UnsupportedComputationError, match=(
        r"^The in-process runtime runs rounds TFF compiles to its "
        r"MapReduceForm, and TFF cannot compile this one \(.*the intrinsic "
        r"federated_select\); use TFF's runtime \(--runtime=tff")):
      process.next(state, test_selected_rows._datasets())  # pylint: disable=protected-access


# The digits binary in a child that records every process it starts.
_NO_WORKER = r'''
import runpy, subprocess, sys
started = []
popen_init = subprocess.Popen.__init__
def recording(self, args, *rest, **kwargs):
  started.append(' '.join(map(str, args)) if isinstance(args, (list, tuple))
                 else str(args))
  popen_init(self, args, *rest, **kwargs)
subprocess.Popen.__init__ = recording
sys.argv = ['tasks.digits.train'] + sys.argv[1:]
try:
  runpy.run_module('tasks.digits.train', run_name='__main__', alter_sys=True)
except SystemExit as e:
  assert not e.code, e.code
print('workers started:', sum('worker_binary' in a for a in started))
'''


def test_a_binary_resumes_on_the_other_runtime_and_starts_no_worker(
    tmp_path):
  """Two rounds of the digits binary on TFF's runtime, resumed for a third
  in process: metrics.csv equals three rounds on TFF's runtime (to float
  rounding, but the wall-clock seconds), and the in-process call started no worker_binary."""
  common = ['--clients_per_round=3', '--num_local_steps=2', '--eval_every=1',
            '--checkpoint_every=1', '--noprogress']
  both, tff_only = tmp_path / 'both', tmp_path / 'tff'
  for out, rounds in ((both, 2), (tff_only, 3)):
    first = binaries.run('tasks.digits.train', *common, f'--rounds={rounds}',
                         '--runtime=tff', f'--output_dir={out}')
    assert first.returncode == 0, first.stderr[-2000:]
  script = tmp_path / 'no_worker.py'
  script.write_text(_NO_WORKER)
  resumed = binaries.run(str(script), *common, f'--output_dir={both}',
                         '--rounds=3', '--runtime=in_process')
  assert resumed.returncode == 0, resumed.stderr[-2000:]
  assert 'resuming from the checkpoint of round 2 of 3' in resumed.stderr
  assert resumed.stdout.strip().splitlines()[-1] == 'workers started: 0'
  binaries.assert_same_metrics(both / 'metrics.csv', tff_only / 'metrics.csv')
  with open(both / 'metrics.csv') as f:
    assert [row['round'] for row in csv.DictReader(f)] == ['1', '2', '3']
  with open(both / 'config.json') as f:
    assert json.load(f)['provenance']['runtime'] == 'tff'  # Who created it.


def test_the_python_client_loop_accumulates_as_the_tensorflow_one():
  """The fallback for a `work` phase a TF loop cannot call (one client at a
  time) gives the same sum as the TF loop (two clients at a time, their
  results accumulated in client order), bit for bit, for an even and an
  odd number of clients (the last of an odd one alone)."""
  process = registry.build_process(_config('fedavg'), linear.model_fn)
  with execution.running_on('in_process'):
    state = process.initialize()
    round_ = execution.in_process_context().compiled(process.next)
  flat_state = tf_phase.flatten(state, round_._state_type, [])  # pylint: disable=protected-access
  broadcast = list(round_.prepare.call_flat(flat_state))
  for count in (4, 3):
    datasets = {}
    columns = [tf.stack([
        tf_phase.flatten(d, round_._data_type, [], datasets)[0]  # pylint: disable=protected-access
        for d in _data()[:count]])]
    zero = list(round_.zero.call_flat([]))
    in_tf = round_._clients(zero, columns, broadcast, datasets)  # pylint: disable=protected-access
    in_python = runtimes.client_loop._python_loop(  # pylint: disable=protected-access
        round_._work_then_add, functools.partial(  # pylint: disable=protected-access
            runtimes.client_loop._client, datasets=datasets))(  # pylint: disable=protected-access
                zero, columns, broadcast)
    _assert_same([t.numpy() for t in in_tf], [t.numpy() for t in in_python])
  # This round's work loops in TensorFlow (the fallback is not taken).
  assert isinstance(round_._client_loop,  # pylint: disable=protected-access
                    tf.types.experimental.ConcreteFunction)


# Seven clients of different sizes (one empty), of targets on different
# scales: float32 sums of their updates depend on the order in which they
# are added (swapping any two neighbours after the first changes the total:
# checked below), so a total accumulated out of client order differs from
# the one-at-a-time total.
_SIZES = (3, 1, 0, 5, 2, 4, 1)
_SCALES = (1.0, 3.0, 1.0, 0.5, 7.0, 2.0, 5.0)


def _spread_cohort(count):
  rng = np.random.default_rng(2)
  cohort = []
  for size, scale in zip(_SIZES[:count], _SCALES[:count]):
    x = rng.normal(size=(size, linear.DIM))
    cohort.append(linear.dataset(x, scale * rng.normal(size=size),
                                 batch_size=2))
  return cohort


@functools.cache
def _fedavg():
  """FedAvg (one process for this module's concurrency tests) and its
  start."""
  process = registry.build_process(_config('fedavg'), linear.model_fn)
  with execution.running_on('in_process'):
    return process, process.initialize()


@functools.cache
def _context(concurrency):
  return runtimes.InProcessContext(concurrency)


CONCURRENCIES = (1, 2, 3, None)  # None: the machine's default.


def _one_at_a_time(round_, state, cohort, order):
  """The clients' total, each client's `work` and `accumulate` a call of its
  own, in `order`; and what `round_._clients` makes of the same clients."""
  broadcast = list(round_.prepare.call_flat(
      tf_phase.flatten(state, round_._state_type, [])))  # pylint: disable=protected-access
  total = list(round_.zero.call_flat([]))
  for i in order:
    flat = tf_phase.flatten(cohort[i], round_._data_type, [])  # pylint: disable=protected-access
    total = list(round_.accumulate.call_flat(
        total + list(round_.work.call_flat(flat + broadcast))))
  datasets = {}
  clients = [tf_phase.flatten(d, round_._data_type, [], datasets)  # pylint: disable=protected-access
             for d in cohort]
  columns = [tf.stack(column) for column in zip(*clients)]
  grouped = round_._clients(list(round_.zero.call_flat([])), columns,  # pylint: disable=protected-access
                            broadcast, datasets)
  return [t.numpy() for t in total], [t.numpy() for t in grouped]


@pytest.mark.parametrize('count', [5, 7])
def test_clients_in_flight_add_up_in_client_order(count):
  """However many clients train at once, a round's total is the
  one-at-a-time total in client order, bit for bit; with two neighbours
  swapped (after the first client, whose sum with the second is the same
  both ways; neither empty), the one-at-a-time total differs: the check
  sees the order."""
  process, state = _fedavg()
  cohort = _spread_cohort(count)
  totals = []
  for concurrency in CONCURRENCIES:
    context = _context(concurrency)
    round_ = context.compiled(process.next)
    assert round_.concurrency == context.concurrency
    in_order, grouped = _one_at_a_time(round_, state, cohort, range(count))
    _assert_same(grouped, in_order)
    totals.append(grouped)
  _assert_same(totals[1:], totals[:-1])
  for i in range(1, count - 1):
    if _SIZES[i] and _SIZES[i + 1]:
      order = list(range(count))
      order[i], order[i + 1] = order[i + 1], order[i]
      swapped, _ = _one_at_a_time(round_, state, cohort, order)
      assert any(not np.array_equal(a, b)
                 for a, b in zip(swapped, totals[0])), order


@pytest.mark.parametrize('count', [5, 7])
def test_rounds_are_the_same_whatever_the_concurrency(count):
  """Two rounds of the same cohort: the same state and metrics, bit for
  bit, for one, two, three clients at a time and the machine's default."""
  process, start = _fedavg()
  outputs = []
  for concurrency in CONCURRENCIES:
    with tff.framework.get_context_stack().install(_context(concurrency)):
      outputs.append(runs.rounds(process, _spread_cohort(count), 2,
                                 state=start))
  for other in outputs[1:]:
    _assert_same(other, outputs[0])
  assert outputs[0][0][1]['client_work']['clients']['participating'] == (
      count - 1)  # The empty client is dropped.


def test_the_default_concurrency_is_the_machines():
  gpus = tf.config.list_physical_devices('GPU')
  expected = len(gpus) or os.cpu_count() or 1
  assert runtimes.in_process.default_concurrency() == expected
  assert runtimes.InProcessContext().concurrency == expected
  assert execution.in_process_context().concurrency == expected
  process, _ = _fedavg()
  assert runtimes.in_process.MapReduceRound(
      process.next).concurrency == expected


@pytest.mark.parametrize('bad', [0, -2, 1.5, '2', True, None])
def test_a_bad_concurrency_is_refused_in_one_line(bad):
  builds = [runtimes.InProcessContext,
            lambda c: runtimes.in_process.MapReduceRound(_fedavg()[0].next,
                                                         concurrency=c)]
  if bad is None:  # Only the argument's default, never a value given.
    return
  for build in builds:
    with pytest.raises(ValueError, match=(
        rf"^concurrency must be an int >= 1, got {re.escape(repr(bad))}\.$")):
      build(bad)


@pytest.mark.skipif(not tf.config.list_physical_devices('GPU'),
                    reason='TensorFlow sees no GPU here.')
def test_each_client_in_flight_is_placed_on_a_gpu():
  """With GPUs, the j-th client in flight runs on GPU j % their number
  (each of them busy when there are as many clients in flight)."""
  gpus = [d.name for d in tf.config.list_logical_devices('GPU')]
  process, start = _fedavg()
  context = runtimes.InProcessContext(2 * len(gpus))
  with tff.framework.get_context_stack().install(context):
    output = process.next(start, _spread_cohort(7))
  round_ = context.compiled(process.next)
  group = round_._groups[round_.concurrency]  # pylint: disable=protected-access
  devices = {tf.DeviceSpec.from_string(op.device).to_string()
             for op in group.graph.get_operations() if op.device}
  assert devices == {tf.DeviceSpec.from_string(g).to_string() for g in gpus}
  assert output.metrics['client_work']['clients']['participating'] == 6


def test_a_rounds_result_is_packed_as_tffs_containers():
  """The round packs its result into the Python containers of its type
  itself: what `tff.types.type_to_py_container` makes of `tf_phase.pack`'s
  `Struct`s, values and containers alike."""
  process, state = _fedavg()
  round_ = _context(1).compiled(process.next)
  assert round_._result is not None  # pylint: disable=protected-access
  with tff.framework.get_context_stack().install(_context(1)):
    output = process.next(state, _spread_cohort(5))
  flat = tf_phase.flatten(output, round_.update.type_signature.result, [])
  expected = tff.types.type_to_py_container(
      tf_phase.pack(flat, round_.update.type_signature.result),
      process.next.type_signature.result)
  packed = round_._result(flat)  # pylint: disable=protected-access
  tf.nest.assert_same_structure(packed, expected, check_types=True)
  assert type(packed) is type(expected)  # pylint: disable=unidiomatic-typecheck
  _assert_same(packed, expected)
  _assert_same(packed, output)
