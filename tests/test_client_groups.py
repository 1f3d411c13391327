"""Client groups (fast mode) give the model of one TFF client per client.

Every algorithm whose server step needs only sums over clients is built
three times, with `client_groups=None`, with sequential groups and with
vectorised groups (the same model as a `KerasModelFn`, its group's clients
trained at once), started from the same weights
and run for two rounds on the same cohort: one group of three clients and
one group of two (one of them empty); every client's last batch is short.
Model, metrics and states must agree to float rounding (the sums are taken
in another order). A client that overflows is dropped inside its group as
it is alone. The first round's clients are reshuffled as a run reshuffles
them every round (`Task.client_shuffle`), also on two workers.
"""

import collections
import re

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import linear
from tff_mixed import aggregators as tff_mixed_aggregators
from tff_mixed import algorithms
from tff_mixed import execution
from tff_mixed import group_data
from tff_mixed import models
from tff_mixed import optimizers
from tff_mixed import schedules
from tff_mixed import task as task_lib
from tff_mixed.algorithms import mixed_fl
from tff_mixed.templates import client_batches
from tff_mixed.templates import client_groups
from tff_mixed.templates import vectorisable
from tff_mixed.templates import vectorised

SGD = tff.learning.optimizers.build_sgdm


def _central_data():
  return linear.dataset(*linear.CLIENT_B)


def _mixed(mixing, **kwargs):
  return lambda model_fn, groups: algorithms.build_mixed_fl(
      model_fn, SGD(0.1), central_data_fn=_central_data, mixing=mixing,
      num_local_steps=3, client_groups=groups, **kwargs)


BUILDERS = {
    'fed_avg': lambda model_fn, groups: algorithms.build_fed_avg(
        model_fn, SGD(0.1), SGD(0.5, momentum=0.9), num_local_steps=3,
        client_groups=groups, flops_per_example=10.0),
    'fed_adam_decaying_k': lambda model_fn, groups: algorithms.build_fed_adam(
        model_fn, SGD(0.1), num_local_steps=schedules.exponential_decay(
            4, 0.5), client_learning_rate=schedules.exponential_decay(
                0.1, 0.9), client_groups=groups),
    'fed_gbo': lambda model_fn, groups: algorithms.build_fed_gbo(
        model_fn, optimizers.build_adam(0.1), num_local_steps=3,
        client_groups=groups),
    'mimelite': lambda model_fn, groups: algorithms.build_mimelite(
        model_fn, optimizers.build_rmsprop(0.1), num_local_steps=3,
        client_groups=groups, flops_per_example=10.0),
    'fed_prox': lambda model_fn, groups: algorithms.build_fed_prox(
        model_fn, SGD(0.1), proximal_strength=0.5, num_local_steps=3,
        client_groups=groups),
    'mfl': lambda model_fn, groups: algorithms.build_mfl(
        model_fn, optimizers.build_sgdm(0.1), num_local_steps=3,
        client_groups=groups),
    mixed_fl.PARALLEL_TRAINING: _mixed(mixed_fl.PARALLEL_TRAINING,
                                       gradient_dissimilarity=True),
    mixed_fl.ONE_WAY_GRADIENT_TRANSFER: _mixed(
        mixed_fl.ONE_WAY_GRADIENT_TRANSFER),
    mixed_fl.TWO_WAY_GRADIENT_TRANSFER: _mixed(
        mixed_fl.TWO_WAY_GRADIENT_TRANSFER, gradient_dissimilarity=True),
}


def _cohort(overflow=False, round_num=None):
  """Five clients; with `round_num`, reshuffled as that round of a run
  with seed 0 reshuffles them (`Task.client_dataset`)."""
  rng = np.random.default_rng(0)
  clients = []
  for n in (5, 3, 4):
    x = rng.normal(size=(n, linear.DIM))
    clients.append(linear.dataset(x, x @ [1.0, -2.0] + 0.5, batch_size=2))
  clients.append(linear.dataset(np.zeros((0, linear.DIM)), np.zeros((0,)),
                                batch_size=2))
  x = rng.normal(size=(3, linear.DIM)) * (1e30 if overflow else 1.0)
  clients.append(linear.dataset(x, x @ [0.5, 0.5], batch_size=2))
  if round_num is not None:
    clients = [task_lib.reshuffled(d, 2, task_lib.client_seed(0, round_num,
                                                              str(i)))
               for i, d in enumerate(clients)]
  return clients


def _flat(structure):
  return [np.asarray(t, np.float64) for t in tf.nest.flatten(structure)]


def _assert_close(a, b):
  for x, y in zip(_flat(a), _flat(b), strict=True):
    np.testing.assert_allclose(x, y, rtol=2e-6, atol=1e-6)


# How each mode builds: (model_fn, client_groups).
MODES = {
    'faithful': (linear.model_fn, None),
    'sequential': (linear.model_fn,
                   client_groups.ClientGroups(mode=client_groups.SEQUENTIAL)),
    'vectorised': (linear.keras_model_fn, client_groups.ClientGroups()),
}


@pytest.fixture(scope='module')
def built():
  cache = {}

  def get(name, mode):
    if (name, mode) not in cache:
      cache[name, mode] = BUILDERS[name](*MODES[mode])
    return cache[name, mode]

  return get


@pytest.mark.parametrize('mode', ['sequential', 'vectorised'])
@pytest.mark.parametrize('name', sorted(BUILDERS))
def test_groups_train_the_same_model(name, mode, built):
  faithful, grouped = built(name, 'faithful'), built(name, mode)
  assert not client_groups.takes_groups(faithful)
  assert client_groups.takes_groups(grouped)
  state_a = faithful.initialize()
  state_b = grouped.set_model_weights(
      grouped.initialize(), faithful.get_model_weights(state_a))
  for overflow, round_num in ((False, 1), (True, None)):
    clients = _cohort(overflow, round_num)
    out_a = faithful.next(state_a, clients)
    out_b = grouped.next(state_b, group_data.group_datasets(clients, 2))
    state_a, state_b = out_a.state, out_b.state
    metrics_a = dict(out_a.metrics)
    metrics_b = dict(out_b.metrics)
    _assert_close(metrics_a, metrics_b)
    _assert_close(state_a, state_b)
    assert np.all(np.isfinite(np.concatenate(
        [t.ravel() for t in _flat(state_b)])))


@pytest.fixture(scope='module')
def on_one_and_two_workers(built):
  """Every grouped process's first round on the session's worker, then on
  two local workers behind TFF's mergeable context (one switch for all)."""
  data = group_data.group_datasets(_cohort(round_num=1), 2)
  starts = {name: built(name, 'vectorised').initialize() for name in BUILDERS}
  one = {name: built(name, 'vectorised').next(starts[name], data)
         for name in BUILDERS}
  try:
    workers = execution.set_multi_worker_context(local_workers=2)
    assert len(workers) == 2
    two = {name: built(name, 'vectorised').next(starts[name], data)
           for name in BUILDERS}
  finally:
    execution.set_local_execution_context()
  return one, two


@pytest.mark.parametrize('name', sorted(BUILDERS))
def test_two_local_workers_train_the_same_model(name, on_one_and_two_workers):
  """TFF's mergeable context splits the groups over two workers."""
  one, two = (outputs[name] for outputs in on_one_and_two_workers)
  _assert_close(dict(one.metrics), dict(two.metrics))
  _assert_close(one.state, two.state)


def test_what_moved_to_vectorisable_says_where():
  for name in ('not_vectorisable', 'default_max_clients',
               'MEMORY_BUDGET_BYTES'):
    with pytest.raises(AttributeError, match=re.escape(
        f'tff_mixed.templates.vectorised.{name} moved to '
        f'tff_mixed.templates.vectorisable.{name} (CHANGELOG.md, '
        '2026-11-27).')):
      getattr(vectorised, name)


def test_an_unreachable_worker_is_one_line():
  with pytest.raises(RuntimeError, match='TFF worker at localhost:1 is not '
                     'reachable'):
    try:
      execution.set_multi_worker_context(addresses=['localhost:1'],
                                         ready_timeout_seconds=0.5)
    finally:
      execution.set_local_execution_context()


def test_group_layout():
  clients = _cohort()
  groups = [group_data.group_contents(g)
            for g in group_data.group_datasets(clients, 2)]
  assert len(groups) == 2
  assert [list(g[group_data.COUNTS]) for g in groups] == [[3, 2, 2],
                                                             [0, 2]]
  assert [list(g[group_data.BATCH_SIZES]) for g in groups] == [
      [2, 2, 1, 2, 1, 2, 2], [2, 1]]
  batches = [b for c in clients for b in c.as_numpy_iterator()]
  for name in ('x', 'y'):
    np.testing.assert_array_equal(
        np.concatenate([g[group_data.EXAMPLES][name] for g in groups]),
        np.concatenate([b[name] for b in batches]))
  # The same clients as arrays: the same groups.
  arrays = [collections.OrderedDict(
      (k, np.concatenate([b[k] for b in c.as_numpy_iterator()] or
                         [np.zeros((0,) + c.element_spec[k].shape[1:])]))
      for k in ('x', 'y')) for c in clients]
  for a, b in zip(group_data.group_arrays(arrays, 2, 2), groups):
    a = group_data.group_contents(a)
    for key in (group_data.BATCH_SIZES, group_data.COUNTS):
      np.testing.assert_array_equal(a[key], b[key])
    for name in ('x', 'y'):
      np.testing.assert_array_equal(a[group_data.EXAMPLES][name],
                                    b[group_data.EXAMPLES][name])
  # Fewer clients than groups: one group a client.
  assert len(group_data.group_datasets(clients[:2], 5)) == 2
  assert group_data.group_datasets([], 3) == []
  with pytest.raises(ValueError, match='num_groups must be an int >= 1'):
    group_data.group_datasets(clients, 0)
  with pytest.raises(ValueError, match='infinite'):
    group_data.group_datasets([clients[0].repeat()], 1)
  with pytest.raises(ValueError, match='batch_size must be an int >= 1'):
    group_data.group_arrays(arrays, 0, 1)


def test_buffered_batches_cycle_each_client_exactly():
  clients = _cohort()
  group = group_data.group_datasets(clients, 1)[0]

  @tf.function
  def read(group, start, count, steps):
    group = group_data.unpack(group)
    buffer = client_batches.BufferedBatches(
        group[group_data.EXAMPLES], group[group_data.BATCH_SIZES],
        linear.input_spec())
    view = client_batches.cycle(buffer.view(start, count), steps)
    sizes = tf.TensorArray(tf.int32, size=0, dynamic_size=True)
    labels = tf.TensorArray(tf.float32, size=0, dynamic_size=True,
                            infer_shape=False, element_shape=[None])
    for i in tf.range(view.length):
      batch = view.batch(i)
      sizes = sizes.write(tf.cast(i, tf.int32), tf.shape(batch['x'])[0])
      labels = labels.write(tf.cast(i, tf.int32), tf.reshape(batch['y'], [-1]))
    return sizes.stack(), labels.concat()

  # Client 1 (3 examples: batches of 2 and 1) from batch 3, 5 steps.
  sizes, labels = read(group, 3, 2, 5)
  assert list(sizes.numpy()) == [2, 1, 2, 1, 2]
  once = np.concatenate([b['y'].numpy().ravel() for b in clients[1]])
  np.testing.assert_array_equal(labels.numpy(), np.concatenate(
      [once, once, once[:2]]))
  sizes, labels = read(group, 7, 0, 5)  # The empty client: no step.
  assert sizes.numpy().size == 0 and labels.numpy().size == 0


def test_aggregators_that_need_single_clients_are_refused():
  with pytest.raises(ValueError, match='cannot run on client groups'):
    algorithms.build_fed_avg(
        linear.model_fn, SGD(0.1), num_local_steps=1,
        client_groups=client_groups.ClientGroups(),
        model_aggregator=tff.learning.robust_aggregator())
  with pytest.raises(ValueError, match='cannot run on client groups'):
    algorithms.build_fed_avg(
        linear.model_fn, SGD(0.1), num_local_steps=1,
        client_groups=client_groups.ClientGroups(),
        model_aggregator=tff.aggregators.UnweightedMeanFactory())


def _dp_fed_avg(aggregator, mode):
  model_fn, groups = MODES[mode]
  return algorithms.build_fed_avg(
      model_fn, SGD(0.1), num_local_steps=3, client_groups=groups,
      model_aggregator=aggregator)


def test_dp_fed_avg_with_fixed_clipping_runs_on_groups():
  """Noise-free, ours equals TFF's gaussian_fixed in both modes; the noise
  is N(0, (z C)^2) / n from (seed, round), the same in both modes."""
  clip, clients = 0.05, 5
  tff_dp = tff.aggregators.DifferentiallyPrivateFactory.gaussian_fixed(
      noise_multiplier=0.0, clients_per_round=clients, clip=clip)
  reference = _dp_fed_avg(tff_dp, 'faithful')
  start = reference.get_model_weights(reference.initialize())
  cohort = _cohort()
  expected = reference.next(
      reference.set_model_weights(reference.initialize(), start), cohort)
  x0 = _flat(start.trainable)
  moved = [a - b for a, b in zip(_flat(reference.get_model_weights(
      expected.state).trainable), x0)]
  # Clipping binds: without it the step would be the 4 kept clients' uniform
  # mean times 4/5, which is longer.
  plain = algorithms.build_fed_avg(
      linear.model_fn, SGD(0.1), num_local_steps=3,
      client_weighting=tff.learning.ClientWeighting.UNIFORM)
  unclipped = plain.next(plain.set_model_weights(plain.initialize(), start),
                         cohort).state
  unclipped = [0.8 * (a - b) for a, b in zip(_flat(plain.get_model_weights(
      unclipped).trainable), x0)]
  norm = lambda parts: np.sqrt(sum(np.sum(p ** 2) for p in parts))
  assert norm(moved) < 0.9 * norm(unclipped)
  z = 2.0
  for mode in MODES:
    for noise in (0.0, z):
      process = _dp_fed_avg(
          tff_mixed_aggregators.gaussian_fixed(noise, clients, clip, seed=7),
          mode)
      data = (group_data.group_datasets(cohort, 2) if mode != 'faithful'
              else cohort)
      state = process.next(process.set_model_weights(
          process.initialize(), start), data).state
      x1 = _flat(process.get_model_weights(state).trainable)
      noise_part = [
          x1[i] - x0[i] - moved[i] for i in range(len(x0))]
      if noise == 0.0:
        for part in noise_part:
          np.testing.assert_allclose(part, 0.0, atol=1e-7)
      else:  # Server SGD at lr 1: x1 = x0 - (sum + noise) / n.
        for i, part in enumerate(noise_part):
          draw = tf.random.stateless_normal(
              x0[i].shape, seed=[7, i], dtype=tf.float32).numpy()
          np.testing.assert_allclose(part, -z * clip * draw / clients,
                                     rtol=1e-4, atol=1e-6)


def test_dp_with_a_builder_that_cannot_clip_is_one_line():
  # FedGBO clips now (tests/test_dp_and_uploads.py); Mimelite cannot be
  # made private by clipping its update.
  with pytest.raises(ValueError, match='cannot make mimelite private'):
    algorithms.build_mimelite(
        linear.model_fn, optimizers.build_adam(0.1), num_local_steps=1,
        model_aggregator=tff_mixed_aggregators.gaussian_fixed(1.0, 5, 0.1))


def test_which_models_train_a_group_at_once():
  assert vectorisable.not_vectorisable(linear.keras_model_fn) is None
  assert 'not a tff_mixed.models.KerasModelFn' in vectorisable.not_vectorisable(
      linear.model_fn)
  padded = models.KerasModelFn(
      linear.keras_model_fn.keras_model_fn,
      loss=lambda y, p: tf.reduce_mean((y - p) ** 2),
      input_spec=linear.input_spec())
  assert 'is not a mean-reduced Keras loss' in vectorisable.not_vectorisable(
      padded)


def test_a_recurrent_model_is_trained_client_by_client():
  """A Keras GRU's loop carries a TensorList, which tf.vectorized_map
  cannot convert: named from one client's step (not found by converting
  the loop, ~8 s for LEAF's GRU-128)."""
  gru = models.KerasModelFn(
      lambda: tf.keras.Sequential([
          tf.keras.layers.InputLayer(input_shape=(3,), dtype=tf.int32),
          tf.keras.layers.Embedding(5, 2), tf.keras.layers.GRU(2),
          tf.keras.layers.Dense(5)]),
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      input_spec=(tf.TensorSpec([None, 3], tf.int32),
                  tf.TensorSpec([None], tf.int32)))
  assert vectorisable.not_vectorisable(gru) == (
      'tf.vectorized_map cannot vectorise its gradient step over clients '
      "(a loop in it carries a TensorList, as Keras's recurrent layers' "
      'loops do)')


def test_a_vectorised_group_trains_in_chunks_that_fit_memory(monkeypatch):
  """With room for one client at a time, a group of three trains in three
  chunks of the same program: the faithful model, and a dropped client is
  dropped from its chunk's metrics alone."""
  monkeypatch.setattr(vectorisable, 'MEMORY_BUDGET_BYTES', 1)
  assert vectorisable.default_max_clients(10**6, 0) == 1
  chunked = BUILDERS['fed_gbo'](*MODES['vectorised'])
  faithful = BUILDERS['fed_gbo'](*MODES['faithful'])
  state_a = faithful.initialize()
  state_b = chunked.set_model_weights(
      chunked.initialize(), faithful.get_model_weights(state_a))
  for overflow in (False, True):
    clients = _cohort(overflow)
    out_a = faithful.next(state_a, clients)
    out_b = chunked.next(state_b, group_data.group_datasets(clients, 2))
    _assert_close(dict(out_a.metrics), dict(out_b.metrics))
    _assert_close(out_a.state, out_b.state)
    state_a, state_b = out_a.state, out_b.state


_GPU = pytest.mark.skipif(not tf.config.list_physical_devices('GPU'),
                          reason='no GPU that TensorFlow sees')


@pytest.mark.parametrize('device', ['/CPU:0', pytest.param('/GPU:0',
                                                           marks=_GPU)])
def test_the_group_program_alone_is_numpy_sgd(device):
  """`vectorised.build_group_update` is plain TensorFlow: run without TFF,
  on `device`, in chunks of two, it gives every client's K SGD steps as
  NumPy takes them (the example-weighted sum of updates)."""
  clients = _cohort()[:4]  # 5, 3 and 4 examples, and an empty client.
  contents = group_data.group_contents(
      group_data.group_datasets(clients, 1)[0])
  steps, lr = 3, 0.1
  linear.keras_model_fn.functional()  # Made eagerly, once (as builders do).
  with tf.Graph().as_default(), tf.device(device):
    update = vectorised.build_group_update(
        linear.keras_model_fn,
        client_weighting=tff.learning.ClientWeighting.NUM_EXAMPLES,
        loss_weight=1.0, full_gradient=False, first_gradient=False,
        max_clients=2)
    optimizer = SGD(lr)
    weights = tff.learning.models.ModelWeights(
        trainable=[tf.zeros([linear.DIM, 1]), tf.zeros([1])],
        non_trainable=[])

    def client_fn(output):  # One client's; the program sums them.
      weight = output.result.update_weight
      return ([weight * u for u in output.result.update], weight,
              output.sgd_steps)

    totals, metrics, count = update(
        optimizer, collections.OrderedDict(learning_rate=lr), steps,
        weights, tf.data.Dataset.from_tensors(contents), None, None,
        client_fn)
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      (update_sum, weight_sum, sgd_steps), metrics, count = session.run(
          (totals, metrics, count))
  expected_w, expected_b, expected_weight = np.zeros(2), 0.0, 0.0
  for data in clients[:3]:
    batches = [(b['x'], b['y']) for b in data.as_numpy_iterator()]
    w, b = linear.sgd(np.zeros(2), 0.0, batches, steps, lr)
    examples = sum(len(batches[k % len(batches)][0]) for k in range(steps))
    expected_w -= examples * w
    expected_b -= examples * b
    expected_weight += examples
  np.testing.assert_allclose(update_sum[0].ravel(), expected_w, rtol=1e-5)
  np.testing.assert_allclose(update_sum[1], [expected_b], rtol=1e-5)
  assert weight_sum == expected_weight and sgd_steps == 3 * steps
  assert count == 4 and metrics['num_batches'] == [3 * steps]
  assert metrics['num_examples'] == [expected_weight]


def test_next_is_the_tff_computation_the_builder_composed(built):
  """In fast mode as in faithful mode, `next` is the builder's TFF
  computation (nothing wraps it); it takes client groups, and TFF itself
  refuses one dataset per client."""
  grouped, faithful = built('fed_avg', 'vectorised'), built('fed_avg',
                                                            'faithful')
  for process in (grouped, faithful):
    assert type(process.next) is tff.framework.ConcreteComputation  # pylint: disable=unidiomatic-typecheck
  assert client_groups.takes_groups(grouped)
  assert not client_groups.takes_groups(faithful)
  with pytest.raises(TypeError):
    grouped.next(grouped.initialize(), _cohort())


@pytest.mark.parametrize('name', ['fed_avg', 'fed_gbo'])
def test_any_count_builds_the_same_fast_mode(name, built):
  """Built with `ClientGroups(2)` (as `--client_groups=2`; FedAvg's
  composer and the server-step composer), `next` takes client groups, any
  number of them, and trains the model of the same cohort as faithful mode;
  anything but None or a `ClientGroups` is refused in one line, naming what
  replaced the values builders took before."""
  by_count = BUILDERS[name](linear.keras_model_fn,
                            client_groups.ClientGroups(2))
  assert client_groups.takes_groups(by_count)
  assert type(by_count.next) is tff.framework.ConcreteComputation  # pylint: disable=unidiomatic-typecheck
  faithful = built(name, 'faithful')
  start = faithful.initialize()
  state = by_count.set_model_weights(by_count.initialize(),
                                     faithful.get_model_weights(start))
  cohort = _cohort(round_num=1)
  expected = faithful.next(start, cohort)
  for num_groups in (2, 3):
    out = by_count.next(state, group_data.group_datasets(cohort,
                                                            num_groups))
    _assert_close(dict(expected.metrics), dict(out.metrics))
    _assert_close(expected.state, out.state)
  for old, replacement in [
      (True, 'ClientGroups()'), (3, 'ClientGroups(3)'), (False, 'None'),
      ('sequential', "ClientGroups(mode='sequential')"), (-1, None),
      ('fast', None)]:
    hint = (re.escape(f' ({old!r} is now {replacement})') if replacement
            else '')
    with pytest.raises(TypeError, match=(
        r'^client_groups must be None \(one dataset per client\) or a '
        r'tff_mixed.templates.client_groups.ClientGroups, got '
        f'{re.escape(repr(old))}{hint}.$')):
      BUILDERS[name](linear.keras_model_fn, old)


def test_client_groups_values_are_checked_in_one_line():
  assert client_groups.DEFAULT == client_groups.ClientGroups(
      2, client_groups.VECTORISED)
  for count in (0, -1, True, 2.0):
    with pytest.raises(ValueError, match=(
        r'^ClientGroups.count must be an int >= 1 \(the number of groups a '
        f'cohort is split into\), got {re.escape(repr(count))}.$')):
      client_groups.ClientGroups(count)
  with pytest.raises(ValueError, match=r"^ClientGroups.mode must be one of "
                     r"\('vectorised', 'sequential'\), got 'fast'.$"):
    client_groups.ClientGroups(2, 'fast')
  assert client_groups.ClientGroups(np.int64(3)).count == 3


def test_the_data_side_moved_to_group_data_says_so():
  with pytest.raises(AttributeError, match=(
      r'^tff_mixed\.templates\.client_groups\.group_datasets moved to '
      r'tff_mixed\.group_data\.group_datasets \(CHANGELOG\.md, 2026-11-26\)\.$')):
    client_groups.group_datasets  # pylint: disable=pointless-statement
  with pytest.raises(AttributeError, match='has no attribute'):
    client_groups.no_such_name  # pylint: disable=pointless-statement
