r"""FedAvg round time: tff_mixed vs FedJAX 0.0.17 vs pfl-research 0.6.0 (torch).

  python3.11 bench/peers.py --setup        # once: builds .venv-peers from
                                           # bench/requirements-peers.txt
  .venv/bin/python bench/peers.py          # defaults --sizes=10,50,200
                                           #   --rounds=5 --warmup=2
                                           #   --repeats=3 --check-rounds=3
  .venv/bin/python bench/peers.py --sizes=10 --repeats=1 --peers=fedjax
  .venv/bin/python bench/peers.py --sizes=50,200,1000 --concurrency=2

The peers do not fit the project's pins (TFF pins jax, numpy, protobuf,
typing_extensions), so they run in their own virtualenv `.venv-peers`, in a
child process (`--child=fedjax|pfl`, internal) that writes JSON. tff_mixed
runs in this process. Every implementation trains the identical workload of
`bench/workload.py` (MLP 64-128-10, 40 examples and K = 5 in-order SGD steps
of batch 8 per client, client lr 0.1, example-weighted mean, server SGD lr 1)
from the same initial weights on the same cohorts.

A run of one implementation, for each S in --sizes, starts from the initial
weights and runs --warmup + --rounds rounds on fresh cohorts, timing each of
the last --rounds `next`/round calls with time.perf_counter (tracing and jit
compilation happen in the warm-up rounds). On the in-process runtime,
--concurrency clients (or client groups) train at once (default: the
runtime's own, one per core or GPU; printed). Runs alternate (ours, ours in
client-groups fast mode if `build_fed_avg` has `client_groups`, both again
on the in-process runtime if `tff_mixed.execution` has `running_on`
(--runtimes), FedJAX, pfl), rotating the order each of --repeats times.
Printed: median round time per
implementation and S over all timed rounds of all repeats, ratios
peer / ours, and max |w_peer - w_ours| over all weights after
--check-rounds rounds (each implementation's weights from its first run;
`ref f64` is a float64 NumPy implementation of the same round, in
bench/workload.py). No timing is asserted anywhere.

Threads: TF, the TFF worker and XLA (FedJAX) keep their defaults. PyTorch
(pfl) gets one intra-op thread (--torch-threads=0 for torch's own two): with
two OpenMP threads on this 2-core machine, one other busy process made pfl's
S=50 round take 3.5-8 s instead of ~0.1 s (spin-waiting threads); one thread
costs nothing measurable on this tiny model when the machine is quiet.
"""

import argparse
from importlib import metadata
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import workload  # bench/ is sys.path[0] when this file runs as a script.

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS_VENV = os.path.join(ROOT, '.venv-peers')
PEERS_PYTHON = os.path.join(PEERS_VENV, 'bin', 'python')
REQUIREMENTS = os.path.join(ROOT, 'bench', 'requirements-peers.txt')
PEERS = ('fedjax', 'pfl')
VERSIONED = ('fedjax', 'jax', 'jaxlib', 'dm-haiku', 'optax', 'pfl', 'torch')
LABELS = {'ours': 'ours', 'ours_groups': 'ours groups',
          'ours_vectorised': 'ours vectorised',
          'ours_in_process': 'ours in-process',
          'ours_vectorised_in_process': 'ours vectorised in-process',
          'fedjax': 'FedJAX', 'pfl': 'pfl', 'ref': 'ref f64'}


def _sizes(text):
  sizes = [int(s) for s in text.split(',') if s.strip()]
  if not sizes or min(sizes) < 1:
    raise argparse.ArgumentTypeError(f'need sizes >= 1, got {text!r}')
  return sizes


def parse_args(argv=None):
  parser = argparse.ArgumentParser(
      description=__doc__.splitlines()[0],
      formatter_class=argparse.RawDescriptionHelpFormatter,
      epilog='\n'.join(__doc__.splitlines()[1:]))
  parser.add_argument('--setup', action='store_true',
                      help='create .venv-peers and install the peers, then exit')
  parser.add_argument('--setup-python', default='python3.11',
                      help='interpreter that creates .venv-peers')
  parser.add_argument('--sizes', type=_sizes, default=[10, 50, 200],
                      help='clients per round S, comma separated')
  parser.add_argument('--rounds', type=int, default=5,
                      help='timed rounds per run and S')
  parser.add_argument('--warmup', type=int, default=2,
                      help='untimed rounds before them (>= 1)')
  parser.add_argument('--repeats', type=int, default=3,
                      help='alternating runs of every implementation')
  parser.add_argument('--check-rounds', type=int, default=3,
                      help='compare the weights after this many rounds')
  parser.add_argument('--peers', default='fedjax,pfl',
                      help='comma separated subset of fedjax,pfl ("" = none)')
  parser.add_argument('--num-groups', type=int, default=2,
                      help='groups of the client-groups fast mode (0: skip it)')
  parser.add_argument('--runtimes', default='tff,in_process',
                      help='ours on: comma separated subset of tff,in_process '
                      '(faithful on TFF\'s runtime always runs: the ratios\' '
                      'base)')
  parser.add_argument('--concurrency', type=int, default=None,
                      help='clients (groups) the in-process runtime trains at '
                      'once (default: its own)')
  parser.add_argument('--torch-threads', type=int, default=1,
                      help="pfl's torch.set_num_threads (0: torch's default)")
  parser.add_argument('--child', choices=PEERS, help=argparse.SUPPRESS)
  parser.add_argument('--out', help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.warmup < 1 or args.rounds < 1 or args.repeats < 1:
    parser.error('--warmup, --rounds and --repeats must be >= 1')
  if not 1 <= args.check_rounds <= args.warmup + args.rounds:
    parser.error('--check-rounds must be in 1..warmup+rounds')
  args.peers = [p for p in args.peers.split(',') if p]
  unknown = set(args.peers) - set(PEERS)
  if unknown:
    parser.error(f'unknown peers {sorted(unknown)}')
  return args


# ---------------------------------------------------------------- driver ---


def drive(set_weights, run_round, get_weights, size, args, make_data):
  """Runs warmup + rounds rounds of one implementation with S = size.

  `make_data(client_ids)` builds a round's input (untimed); `run_round(data)`
  is timed. Returns `{'times': [seconds...], 'weights': [k1, b1, k2, b2]}`.
  """
  set_weights(workload.initial_weights())
  times, checked = [], None
  for r in range(args.warmup + args.rounds):
    data = make_data(workload.cohort(r, size))
    start = time.perf_counter()
    run_round(data)
    elapsed = time.perf_counter() - start
    if r >= args.warmup:
      times.append(elapsed)
    if r + 1 == args.check_rounds:
      checked = [np.asarray(w, np.float32) for w in get_weights()]
  return {'times': times, 'weights': checked}


# ------------------------------------------------------------------ ours ---


class Ours:
  """tff_mixed's `build_fed_avg` in this process, on `runtime`: 'tff' (TFF's
  C++ worker) or 'in_process' (`tff_mixed.runtimes`, where it exists).

  `mode`: None (faithful: a TFF client per client), 'sequential' (client
  groups trained one client after another) or 'vectorised' (client groups
  trained all at once, the model a `tff_mixed.models.KerasModelFn`).
  """

  def __init__(self, num_groups=0, mode=None, runtime='tff'):
    self.runtime = runtime
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
    from tff_mixed import algorithms  # pylint: disable=g-import-not-at-top
    self._tf, self._tff = tf, tff
    spec = (tf.TensorSpec([None, workload.INPUT_DIM], tf.float32),
            tf.TensorSpec([None], tf.int32))

    def keras_model():
      return tf.keras.Sequential([
          tf.keras.layers.InputLayer(input_shape=(workload.INPUT_DIM,)),
          tf.keras.layers.Dense(workload.HIDDEN, activation='relu'),
          tf.keras.layers.Dense(workload.NUM_CLASSES),
      ])

    loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def model_fn():
      return tff.learning.models.from_keras_model(
          keras_model(), loss=loss, input_spec=spec)

    sgd = lambda lr: tff.learning.optimizers.build_sgdm(learning_rate=lr)
    kwargs = {}
    self._group = None
    self._num_groups = num_groups
    if num_groups:
      kwargs['client_groups'] = _groups_value(num_groups, mode)
      if mode == 'vectorised':
        from tff_mixed import models  # pylint: disable=g-import-not-at-top
        model_fn = models.KerasModelFn(keras_model, loss=loss,
                                       input_spec=spec)
      self._group = lambda datasets: _group_datasets()(
          datasets, num_groups=num_groups)
    self._process = algorithms.build_fed_avg(
        model_fn, sgd(workload.CLIENT_LR), sgd(workload.SERVER_LR),
        num_local_steps=workload.LOCAL_STEPS, **kwargs)
    self._state = None

  def set_weights(self, weights):
    if self._state is None:
      self._state = self._process.initialize()
    self._state = self._process.set_model_weights(
        self._state,
        self._tff.learning.models.ModelWeights(trainable=list(weights),
                                               non_trainable=[]))

  def make_data(self, client_ids):
    tf = self._tf
    if self._group and has_group_modes():  # Groups straight from arrays.
      return _group_module().group_arrays(
          [workload.client_data(c) for c in client_ids],
          workload.BATCH_SIZE, self._num_groups)
    datasets = [tf.data.Dataset.from_tensor_slices(workload.client_data(c))
                .batch(workload.BATCH_SIZE) for c in client_ids]
    return self._group(datasets) if self._group else datasets

  def run_round(self, data):
    self._state = self._process.next(self._state, data).state

  def get_weights(self):
    return self._process.get_model_weights(self._state).trainable


def _groups_value(num_groups, mode):
  """The builders' `client_groups` for this mode, in this revision's API
  (a `ClientGroups` since it has one; True or 'sequential' before)."""
  try:
    from tff_mixed.templates import client_groups  # pylint: disable=g-import-not-at-top
    return client_groups.ClientGroups(num_groups, mode)
  except (ImportError, AttributeError):
    return 'sequential' if (mode == 'sequential'
                            and has_group_modes()) else True


def _group_module():
  """Where this revision builds client groups from data: `group_data`
  (since 2026-11-26), else `client_groups` (in `templates/` or before)."""
  try:
    from tff_mixed import group_data  # pylint: disable=g-import-not-at-top
    return group_data
  except ImportError:
    pass
  try:
    from tff_mixed import client_groups  # pylint: disable=g-import-not-at-top
  except ImportError:
    from tff_mixed.templates import client_groups  # pylint: disable=g-import-not-at-top
  return client_groups


def _group_datasets():
  return _group_module().group_datasets


def has_client_groups():
  import inspect  # pylint: disable=g-import-not-at-top
  from tff_mixed import algorithms  # pylint: disable=g-import-not-at-top
  if 'client_groups' not in inspect.signature(
      algorithms.build_fed_avg).parameters:
    return False
  try:
    _group_datasets()
  except ImportError:
    return False
  return True


def has_group_modes():
  """Whether this tff_mixed has vectorised client groups."""
  try:
    from tff_mixed import models  # pylint: disable=g-import-not-at-top,unused-import
  except ImportError:
    return False
  return True


def has_in_process_runtime():
  from tff_mixed import execution  # pylint: disable=g-import-not-at-top
  return hasattr(execution, 'running_on')


def has_concurrency():
  """Whether this revision's in-process runtime takes a concurrency."""
  try:
    from tff_mixed.runtimes import in_process  # pylint: disable=g-import-not-at-top
  except ImportError:
    return False
  return hasattr(in_process, 'default_concurrency')


def in_process_concurrency(args):
  """How many clients (groups) the in-process runs train at once, or None
  for a revision without the value."""
  if not has_concurrency():
    return None
  from tff_mixed.runtimes import in_process  # pylint: disable=g-import-not-at-top
  return args.concurrency or in_process.default_concurrency()


_contexts = {}  # concurrency -> an in-process context of it, kept.


def run_ours(impl, args):
  import contextlib  # pylint: disable=g-import-not-at-top
  from tff_mixed import execution  # pylint: disable=g-import-not-at-top
  on = (execution.running_on(impl.runtime) if has_in_process_runtime()
        else contextlib.nullcontext())
  if (impl.runtime == 'in_process' and args.concurrency is not None
      and has_concurrency()):
    import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
    from tff_mixed.runtimes import in_process  # pylint: disable=g-import-not-at-top
    if args.concurrency not in _contexts:
      _contexts[args.concurrency] = in_process.InProcessContext(
          args.concurrency)
    on = tff.framework.get_context_stack().install(
        _contexts[args.concurrency])
  with on:
    return {s: drive(impl.set_weights, impl.run_round, impl.get_weights, s,
                     args, impl.make_data) for s in args.sizes}


# ---------------------------------------------------------------- FedJAX ---


def child_fedjax(args):
  """`fedjax.algorithms.fed_avg.federated_averaging` with its jit backend."""
  import fedjax  # pylint: disable=g-import-not-at-top
  from fedjax.algorithms import fed_avg  # pylint: disable=g-import-not-at-top
  import haiku as hk  # pylint: disable=g-import-not-at-top
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  import optax  # pylint: disable=g-import-not-at-top

  def forward(batch):
    return hk.nets.MLP([workload.HIDDEN, workload.NUM_CLASSES])(batch['x'])

  def train_loss(batch, logits):  # Per example; model_grad takes the mean.
    return optax.softmax_cross_entropy_with_integer_labels(logits, batch['y'])

  sample = {'x': np.zeros((1, workload.INPUT_DIM), np.float32),
            'y': np.zeros((1,), np.int32)}
  model = fedjax.create_model_from_haiku(
      hk.transform(forward), sample, train_loss)
  algorithm = fed_avg.federated_averaging(
      fedjax.model_grad(model),
      fedjax.optimizers.sgd(workload.CLIENT_LR),
      fedjax.optimizers.sgd(workload.SERVER_LR),
      fedjax.ShuffleRepeatBatchHParams(
          batch_size=workload.BATCH_SIZE, num_epochs=1, skip_shuffle=True))
  template = model.init(jax.random.PRNGKey(0))
  names = sorted(template)  # mlp/~/linear_0, mlp/~/linear_1
  assert [template[n]['w'].shape for n in names] == [
      (workload.INPUT_DIM, workload.HIDDEN),
      (workload.HIDDEN, workload.NUM_CLASSES)], template
  holder = {}

  def set_weights(weights):
    k1, b1, k2, b2 = (jnp.asarray(w) for w in weights)
    params = {names[0]: {'w': k1, 'b': b1}, names[1]: {'w': k2, 'b': b2}}
    holder['state'] = algorithm.init(params)

  def make_data(client_ids):
    rng = jax.random.PRNGKey(0)  # Unused: no dropout, no shuffling.
    return [(c, fedjax.ClientDataset(dict(zip(('x', 'y'),
                                              workload.client_data(c)))), rng)
            for c in client_ids]

  def run_round(clients):
    state, _ = algorithm.apply(holder['state'], clients)
    jax.block_until_ready(state.params)
    holder['state'] = state

  def get_weights():
    p = holder['state'].params
    return [p[names[0]]['w'], p[names[0]]['b'], p[names[1]]['w'],
            p[names[1]]['b']]

  results = {s: drive(set_weights, run_round, get_weights, s, args, make_data)
             for s in args.sizes}
  versions = {p: metadata.version(p)
              for p in ('fedjax', 'jax', 'jaxlib', 'dm-haiku', 'optax')}
  return results, versions


# ------------------------------------------------------------------- pfl ---


def child_pfl(args):
  """pfl's `FederatedAveraging.run` on `SimulatedBackend`, PyTorch model."""
  from pfl.aggregate.simulate import SimulatedBackend  # pylint: disable=g-import-not-at-top
  from pfl.aggregate.weighting import WeightByDatapoints  # pylint: disable=g-import-not-at-top
  from pfl.algorithm import FederatedAveraging, NNAlgorithmParams  # pylint: disable=g-import-not-at-top
  from pfl.callback.base import TrainingProcessCallback  # pylint: disable=g-import-not-at-top
  from pfl.data.dataset import Dataset  # pylint: disable=g-import-not-at-top
  from pfl.data.federated_dataset import FederatedDataset  # pylint: disable=g-import-not-at-top
  from pfl.data.sampling import MinimizeReuseUserSampler  # pylint: disable=g-import-not-at-top
  from pfl.hyperparam import NNTrainHyperParams  # pylint: disable=g-import-not-at-top
  from pfl.metrics import Metrics, Weighted  # pylint: disable=g-import-not-at-top
  from pfl.model.pytorch import PyTorchModel  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top

  if args.torch_threads:
    torch.set_num_threads(args.torch_threads)

  class Mlp(torch.nn.Module):
    """64 -> 128 ReLU -> 10 with the `loss`/`metrics` pfl asks for."""

    def __init__(self):
      super().__init__()
      self.l1 = torch.nn.Linear(workload.INPUT_DIM, workload.HIDDEN)
      self.l2 = torch.nn.Linear(workload.HIDDEN, workload.NUM_CLASSES)

    def forward(self, x):
      return self.l2(torch.relu(self.l1(x)))

    def loss(self, x, y, eval=False):  # pylint: disable=redefined-builtin
      del eval
      return torch.nn.functional.cross_entropy(self(x), y)  # Batch mean.

    @torch.no_grad()
    def metrics(self, x, y, eval=False):  # pylint: disable=redefined-builtin
      del eval
      loss = torch.nn.functional.cross_entropy(self(x), y, reduction='sum')
      return {'loss': Weighted(loss.item(), len(x))}

  def as_torch(weights):
    k1, b1, k2, b2 = weights  # Keras [in, out] -> torch [out, in].
    return [torch.from_numpy(np.ascontiguousarray(k1.T)), torch.from_numpy(b1),
            torch.from_numpy(np.ascontiguousarray(k2.T)), torch.from_numpy(b2)]

  class Timer(TrainingProcessCallback):
    """Per-round wall time, and the weights after --check-rounds rounds."""

    def __init__(self):
      self.stamps, self.checked = [], None

    def on_train_begin(self, *, model):
      self.stamps.append(time.perf_counter())
      return Metrics()

    def after_central_iteration(self, aggregate_metrics, model, *,
                                central_iteration):
      self.stamps.append(time.perf_counter())
      if central_iteration + 1 == args.check_rounds:
        net = model._model  # pylint: disable=protected-access
        self.checked = [net.l1.weight.detach().numpy().T.copy(),
                        net.l1.bias.detach().numpy().copy(),
                        net.l2.weight.detach().numpy().T.copy(),
                        net.l2.bias.detach().numpy().copy()]
      return False, Metrics()

  results = {}
  for size in args.sizes:
    total = args.warmup + args.rounds
    ids = [c for r in range(total) for c in workload.cohort(r, size)]
    datasets = {}
    for c in ids:  # Untimed, as for the others: arrays made before training.
      x, y = workload.client_data(c)
      datasets[c] = Dataset((torch.from_numpy(x),
                             torch.from_numpy(y.astype(np.int64))),
                            user_id=c)
    federated = FederatedDataset(datasets.__getitem__,
                                 MinimizeReuseUserSampler(ids))
    net = Mlp()
    with torch.no_grad():
      for p, w in zip(net.parameters(), as_torch(workload.initial_weights())):
        p.copy_(w)
    model = PyTorchModel(
        model=net, local_optimizer_create=torch.optim.SGD,
        central_optimizer=torch.optim.SGD(net.parameters(),
                                          lr=workload.SERVER_LR))
    backend = SimulatedBackend(training_data=federated, val_data=None,
                               postprocessors=[WeightByDatapoints()])
    timer = Timer()
    FederatedAveraging().run(
        algorithm_params=NNAlgorithmParams(
            central_num_iterations=total,
            evaluation_frequency=total + 1,  # pfl evaluates round 0 only.
            train_cohort_size=size, val_cohort_size=0),
        backend=backend, model=model,
        model_train_params=NNTrainHyperParams(
            local_learning_rate=workload.CLIENT_LR, local_num_epochs=1,
            local_batch_size=workload.BATCH_SIZE),
        callbacks=[timer], send_metrics_to_platform=False)
    rounds = np.diff(timer.stamps).tolist()
    results[size] = {'times': rounds[args.warmup:], 'weights': timer.checked}
  versions = {p: metadata.version(p) for p in ('pfl', 'torch')}
  return results, versions


def run_child(args):
  results, versions = {'fedjax': child_fedjax, 'pfl': child_pfl}[args.child](
      args)
  payload = {'versions': versions, 'results': {
      str(s): {'times': r['times'],
               'weights': [np.asarray(w, np.float32).tolist()
                           for w in r['weights']]}
      for s, r in results.items()}}
  with open(args.out, 'w') as f:
    json.dump(payload, f)


def run_peer(name, args):
  """Runs `--child=name` in .venv-peers; returns (results, versions)."""
  with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, 'out.json')
    env = dict(os.environ, JAX_PLATFORMS='cpu', TF_CPP_MIN_LOG_LEVEL='2')
    env.pop('PYTHONPATH', None)
    cmd = [PEERS_PYTHON, os.path.abspath(__file__), f'--child={name}',
           f'--out={out}', '--sizes=' + ','.join(map(str, args.sizes)),
           f'--rounds={args.rounds}', f'--warmup={args.warmup}',
           f'--check-rounds={args.check_rounds}',
           f'--torch-threads={args.torch_threads}']
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True,
                          text=True, check=False)
    if proc.returncode:
      raise RuntimeError(f'{name} child failed ({proc.returncode}):\n'
                         + proc.stderr[-3000:])
    with open(out) as f:
      payload = json.load(f)
  results = {int(s): {'times': r['times'],
                      'weights': [np.asarray(w, np.float32)
                                  for w in r['weights']]}
             for s, r in payload['results'].items()}
  return results, payload['versions']


# ----------------------------------------------------------------- setup ---


def setup(args):
  """Creates .venv-peers and installs the pins; pfl (and torch) if they can."""
  if not os.path.exists(PEERS_PYTHON):
    print(f'creating {PEERS_VENV} with {args.setup_python}', flush=True)
    subprocess.run([args.setup_python, '-m', 'venv', PEERS_VENV], check=True)
  pip = [PEERS_PYTHON, '-m', 'pip']
  subprocess.run(pip + ['install', '--quiet', '--upgrade', 'pip'], check=True)
  if subprocess.run(pip + ['install', '-r', REQUIREMENTS]).returncode:
    print('Full install failed; installing without torch and pfl (runs will '
          'report pfl as failed).', file=sys.stderr, flush=True)
    with open(REQUIREMENTS) as f:
      lines = [l for l in f if not l.startswith(('torch==', 'pfl=='))]
    with tempfile.NamedTemporaryFile('w', suffix='.txt') as f:
      f.writelines(lines)
      f.flush()
      subprocess.run(pip + ['install', '-r', f.name], check=True)
  subprocess.run([PEERS_PYTHON, '-c',
                  'from importlib import metadata\n'
                  'for p in PKGS:\n'
                  '  try: print(p, metadata.version(p))\n'
                  '  except metadata.PackageNotFoundError: print(p, "missing")'
                  .replace('PKGS', repr(VERSIONED))], check=True)


# ------------------------------------------------------------------ main ---


def max_abs_diff(a, b):
  return max(float(np.max(np.abs(np.asarray(x, np.float64) -
                                 np.asarray(y, np.float64))))
             for x, y in zip(a, b))


def reference_weights(size, check_rounds):
  weights = workload.initial_weights()
  for r in range(check_rounds):
    weights = workload.reference_round(weights, workload.cohort(r, size))
  return weights


def main(args):
  peers = list(args.peers)
  if peers and not os.path.exists(PEERS_PYTHON):
    print(f'{PEERS_VENV} missing: run `python3.11 bench/peers.py --setup`; '
          'timing tff_mixed alone.', file=sys.stderr)
    peers = []
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tff_mixed import execution  # pylint: disable=g-import-not-at-top
  tf.get_logger().setLevel('ERROR')
  execution.set_local_execution_context()

  impls = {'ours': Ours()}
  if args.num_groups and has_client_groups():
    impls['ours_groups'] = Ours(num_groups=args.num_groups, mode='sequential')
    if has_group_modes():
      impls['ours_vectorised'] = Ours(num_groups=args.num_groups,
                                      mode='vectorised')
  if has_in_process_runtime() and 'in_process' in args.runtimes:
    impls['ours_in_process'] = Ours(runtime='in_process')
    if args.num_groups and has_group_modes():
      impls['ours_vectorised_in_process'] = Ours(
          num_groups=args.num_groups, mode='vectorised', runtime='in_process')
  if 'tff' not in args.runtimes:
    impls = {n: i for n, i in impls.items()
             if i.runtime != 'tff' or n == 'ours'}
  elif args.num_groups:
    print('build_fed_avg has no client_groups: fast mode skipped.',
          file=sys.stderr)
  names = list(impls) + peers
  times = {n: {s: [] for s in args.sizes} for n in names}
  weights, versions, failed = {}, {}, {}
  for rep in range(args.repeats):
    order = names[rep % len(names):] + names[:rep % len(names)]
    for name in order:
      if name in failed:
        continue
      start = time.perf_counter()
      try:
        if name in impls:
          results = run_ours(impls[name], args)
        else:
          results, versions[name] = run_peer(name, args)
      except Exception as e:  # pylint: disable=broad-except
        if name in impls:
          raise
        failed[name] = str(e)
        print(f'{name} failed, left out:\n{e}', file=sys.stderr)
        continue
      for s, r in results.items():
        times[name][s].extend(r['times'])
        weights.setdefault(name, {}).setdefault(s, r['weights'])
        if weights[name][s] is not r['weights']:  # Same run twice: same model?
          drift = max_abs_diff(weights[name][s], r['weights'])
          if drift:
            print(f'note: {name} S={s} repeat {rep}: weights differ by '
                  f'{drift:.2e} from its first run', file=sys.stderr)
      print(f'repeat {rep + 1}/{args.repeats} {name}: '
            f'{time.perf_counter() - start:.1f} s', file=sys.stderr, flush=True)
  names = [n for n in names if n not in failed]

  def ms(name, s):
    return 1e3 * statistics.median(times[name][s])

  cols = [n for n in names if n != 'ours']
  print()
  print(f'FedAvg round, MLP 64-128-10, 40 examples & K={workload.LOCAL_STEPS} '
        f'steps/client; medians of {args.rounds} rounds x {args.repeats} '
        'runs; Δw = max |w - w_ours| '
        f'after {args.check_rounds} rounds')
  concurrency = in_process_concurrency(args)
  if concurrency and any(impls[n].runtime == 'in_process'
                         for n in names if n in impls):
    print(f'In process, {concurrency} clients (groups) at once.')
  print()
  header = (['S', 'ours ms'] + [f'{LABELS[n]} ms' for n in cols] +
            [f'{LABELS[n]}/ours' for n in cols] +
            [f'Δw {LABELS[n]}' for n in cols + ['ref']])
  print('| ' + ' | '.join(header) + ' |')
  print('|' + '---|' * len(header))
  for s in args.sizes:
    ours = ms('ours', s)
    row = [str(s), f'{ours:.0f}'] + [f'{ms(n, s):.0f}' for n in cols]
    row += [f'{ms(n, s) / ours:.3f}' for n in cols]
    row += [f'{max_abs_diff(weights[n][s], weights["ours"][s]):.1e}'
            for n in cols]
    row.append(f'{max_abs_diff(reference_weights(s, args.check_rounds), weights["ours"][s]):.1e}')
    print('| ' + ' | '.join(row) + ' |')
  moved = max(max_abs_diff(weights['ours'][s], workload.initial_weights())
              for s in args.sizes)
  print()
  print(f'ref f64 = float64 NumPy FedAvg (bench/workload.py). In those '
        f'{args.check_rounds} rounds the weights move by up to {moved:.3f}.')
  print('Versions: ' +
        ', '.join(f'{k} {v}' for vs in versions.values()
                  for k, v in vs.items()))
  for name, error in failed.items():
    print(f'{name}: failed ({error.splitlines()[0] if error else ""})')


if __name__ == '__main__':
  _args = parse_args()
  if _args.setup:
    setup(_args)
  elif _args.child:
    run_child(_args)
  else:
    main(_args)
