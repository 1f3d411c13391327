"""The MovieLens next-movie task and the processes of seed 004 §5.3.

Clients are the training users (each a time-ordered stream of next-movie
examples); evaluation is recall@10 (and the hinge loss) over every example of
the validation and test users. The datacentre's users are split off as the
paper does, but its examples are not used by these processes: the central
loss is the data-free spreadout regulariser over the embedding table.

Two ways to train:

* baseline: FedAvg where every client adds the spreadout to its loss at every
  step, so it needs (and moves) the whole table;
* mixed FL (`build_mixed_fl`): the spreadout is the server's central loss,
  and a client moves only the table rows of the movies in its round's data
  (`tff_mixed.algorithms.build_selected_rows_mixed_fl`).

Both minimise hinge + (w_c / w_f) x spreadout_weight x spreadout, up to the
factor w_f that mixed FL puts on the whole objective.
"""

import collections
import dataclasses
import os
from typing import Optional

import tensorflow as tf
import tensorflow_federated as tff

from tasks.common import built_task
from tasks.common import flag_table
from tasks.common import parts
from tasks.common import task_runs
from tasks.movielens import cost
from tasks.movielens import data
from tasks.movielens import model as movielens_model
from tff_mixed import algorithms
from tff_mixed import checks
from tff_mixed import execution
from tff_mixed.algorithms import mixed_fl
from tff_mixed.task import Task


@dataclasses.dataclass(frozen=True)
class MovieLens:
  """Examples per user and the user split."""

  examples: dict
  split: collections.OrderedDict
  context_length: int

  def users_examples(self, part: str) -> data.Examples:
    return data.concatenate([self.examples[u] for u in self.split[part]])

  def central_examples(self, seed: int = 0) -> data.Examples:
    """The datacentre users' examples, shuffled together (App. C.2.3)."""
    return data.concatenate([self.examples[u] for u in self.split['central']],
                            shuffle_seed=seed)


# How long the paper's setting (2,000 rounds of 100 clients) takes here.
PAPER_DURATION = ('hours per setting: 2,000 rounds of 100 clients (2 rounds of '
                  'each of the 4 settings took 90 s in all at the paper\'s '
                  'sizes; docs/mixed_fl.md)')

def load(data_dir: Optional[str], *, context_length: int = data.CONTEXT_LENGTH,
         seed: int = 0) -> MovieLens:
  """Reads `<data_dir>/ratings.dat` and splits its users with `seed`.

  Raises:
    data.DataUnavailableError: If the file is missing (one line).
    data.RatingsFormatError: Naming the file and line of a bad rating, or
      the split a file with too few users leaves without examples.
  """
  path = os.path.join(data_dir or '.', data.RATINGS_FILE)
  ratings = data.read_ratings(path)
  examples = data.user_examples(ratings, context_length)
  split = data.split_users(sorted(examples), seed)
  for part, users in split.items():
    if not any(len(examples[u]) for u in users):
      raise data.RatingsFormatError(
          f'{path}: its {len(examples)} users leave the {part} users without '
          f'an example (a user needs more than --context_length='
          f'{context_length} ratings; train, validation and test take 80%, '
          '10% and 10% of the non-central users).')
  return MovieLens(examples, split, context_length)


def row_ids(batch) -> tf.Tensor:
  """The table rows a batch reads: its context movies and labels."""
  return tf.concat([tf.reshape(batch['context'], [-1]), batch['label']], 0)


def max_rows_per_client(num_local_steps: int, batch_size: int,
                        context_length: int,
                        num_movies: int = data.NUM_MOVIES) -> int:
  """A bound on the rows K batches of one user read: K |B_i| labels plus the
  `context_length` movies before the first (a user rates a movie once)."""
  return min(num_movies, num_local_steps * batch_size + context_length)


def create_movielens_task(
    movielens: MovieLens, *, batch_size: int = 16,
    eval_batch_size: int = 256, embedding_dim: int = movielens_model.EMBEDDING_DIM,
    spreadout_weight: float = 0.0, seed: int = 0) -> Task:
  """The federated task; `spreadout_weight` > 0 puts the regulariser on the
  clients (the baseline: FedAvg of the algorithm registry on this task,
  its client FLOPs App. C.3's count, spreadout included)."""
  users = {str(u): movielens.examples[u] for u in movielens.split['train']
           if len(movielens.examples[u])}

  def eval_dataset_fn():
    return collections.OrderedDict(
        (part, movielens.users_examples(part).dataset().batch(eval_batch_size))
        for part in ('validation', 'test'))

  num_movies = data.NUM_MOVIES if spreadout_weight > 0 else 0
  return Task(
      name='movielens',
      model_fn=movielens_model.model_fn_for(
          dim=embedding_dim, context_length=movielens.context_length,
          spreadout_weight=spreadout_weight, seed=seed),
      train_client_ids=sorted(users, key=int),
      train_dataset_fn=lambda cid: users[cid].dataset().batch(batch_size),
      eval_dataset_fn=eval_dataset_fn,
      train_batch_size=batch_size,
      # App. C.3's count of a step, the spreadout's included when it is on
      # the client.
      flops_per_step=lambda b: cost.step_flops(b, embedding_dim, num_movies),
  )


def _embedding_dim(task: Task) -> int:
  with tf.Graph().as_default():
    return int(task.model_fn().trainable_variables[
        movielens_model.TABLE].shape[1])


def build_mixed_fl(task: Task, *, mixing: str, batch_size: int,
                   context_length: int, spreadout_weight: float,
                   client_learning_rate: Optional[float],
                   num_local_steps: int,
                   server_learning_rate: float = 1.0,
                   central_learning_rate: Optional[float] = None,
                   merge_learning_rate: float = 1.0,
                   client_optimizer=None, server_optimizer=None,
                   central_optimizer=None, merge_optimizer=None, **kwargs):
  """The selected-rows mixed FL process with the spreadout at the server.

  Optimizers: SGD at the given rates (seed 004's experiments; the central
  rate defaults to client x server), or the `tff.learning.optimizers` given
  (seed 004 Fig. 11: Adam at the server); `kwargs` go to
  `build_selected_rows_mixed_fl`."""
  sgd = tff.learning.optimizers.build_sgdm
  for name, value in (('client_learning_rate', client_learning_rate),
                      ('server_learning_rate', server_learning_rate),
                      ('merge_learning_rate', merge_learning_rate),
                      ('central_learning_rate', central_learning_rate)):
    if value is not None:
      checks.check_number(value, name)
  if central_optimizer is None and central_learning_rate is not None:
    central_optimizer = sgd(learning_rate=central_learning_rate)
  dim = _embedding_dim(task)
  return algorithms.build_selected_rows_mixed_fl(
      task.model_fn,
      client_optimizer or sgd(learning_rate=client_learning_rate),
      server_optimizer or sgd(learning_rate=server_learning_rate),
      row_ids_fn=row_ids,
      central_loss_fn=movielens_model.spreadout_loss_fn(spreadout_weight),
      mixing=mixing, num_local_steps=num_local_steps,
      max_rows_per_client=max_rows_per_client(
          num_local_steps, batch_size, context_length),
      central_optimizer_fn=central_optimizer,
      merge_optimizer_fn=merge_optimizer or sgd(
          learning_rate=merge_learning_rate),
      flops_per_step=lambda b: cost.step_flops(b, dim), **kwargs)


def build(algorithm, run, *, data_dir: Optional[str] = None,
          batch_size: int = 16, context_length: int = data.CONTEXT_LENGTH,
          embedding_dim: int = movielens_model.EMBEDDING_DIM,
          spreadout_weight: float = 0.001) -> built_task.BuiltTask:
  """The MovieLens task of a run (`tasks.common.task_registry`).

  A mixed FL algorithm trains the selected-rows process (`build_mixed_fl`:
  the spreadout, weighted `spreadout_weight`, at the server; K and the
  client rate constant; one TFF client per client on TFF's runtime, since
  TFF cannot compile `federated_select` for the in-process one). Any other
  algorithm is the registry's, with the spreadout on every client,
  weighted `spreadout_weight x w_c / w_f` (the baseline).

  Raises:
    ValueError: For w_f = 0, or a schedule the selected rows cannot take.
    data.DataUnavailableError, data.RatingsFormatError: For missing or
      malformed ratings (one line).
  """
  if algorithm.federated_weight == 0:
    raise ValueError('federated_weight must be > 0 for this task.')
  mixed = algorithm.algorithm in mixed_fl.MIXINGS
  if mixed and not (isinstance(algorithm.num_local_steps, int)
                    and algorithm.client_learning_rate is None):
    raise ValueError(
        f'{algorithm.algorithm} on movielens (selected rows) takes a '
        'constant K and client learning rate, not a schedule.')
  movielens = load(data_dir, context_length=context_length, seed=run.seed)
  task = create_movielens_task(
      movielens, batch_size=batch_size, embedding_dim=embedding_dim,
      spreadout_weight=0.0 if mixed else (
          spreadout_weight * algorithm.central_weight
          / algorithm.federated_weight),
      seed=run.seed)
  if not mixed:
    return built_task.BuiltTask(task)
  central = algorithm.central
  default_central = (isinstance(central, parts.OptimizerSpec)
                     and central.name == 'sgd'
                     and central.learning_rate is None)
  process_fn = lambda: build_mixed_fl(
      task, mixing=algorithm.algorithm, batch_size=batch_size,
      context_length=context_length, spreadout_weight=spreadout_weight,
      client_learning_rate=None, num_local_steps=algorithm.num_local_steps,
      # The spec's optimizers (Fig. 11: server Adam); the central one
      # defaults to SGD at client x server lr.
      client_optimizer=parts.built(algorithm.client, 'client'),
      server_optimizer=parts.built(algorithm.server, 'server'),
      central_optimizer=(None if default_central
                         else parts.built(central, 'central')),
      merge_optimizer=parts.built(algorithm.merge, 'merge'),
      federated_weight=algorithm.federated_weight,
      central_weight=algorithm.central_weight,
      num_central_steps=algorithm.num_central_steps)
  why = ('selected rows: each client gets its own rows (federated_select), '
         'which TFF compiles for its own runtime only')
  return built_task.BuiltTask(
      task, process_fn=process_fn,
      run_needs={'runtime': (execution.TFF, why),
                 'client_groups': (None, why)})


def _selected_rows(values: dict, given: frozenset) -> None:
  """A mixed FL algorithm trains the selected rows: one TFF client per
  client (client_groups 0) on TFF's runtime; given otherwise, refused."""
  algorithm = values['algorithm']
  if algorithm not in mixed_fl.MIXINGS:
    return
  for name in ('k_schedule', 'client_lr_schedule'):
    if values[name] != 'constant':
      raise ValueError(f'--{name} is not supported with '
                       f'--algorithm={algorithm} (selected rows).')
  if 'runtime' in given and values['runtime'] != execution.TFF:
    raise ValueError(
        f'--runtime must be tff with --algorithm={algorithm}: TFF cannot '
        'compile the selected-rows round (federated_select) for the '
        'in-process runtime.')
  if 'client_groups' in given and values['client_groups']:
    raise ValueError(
        f'--client_groups must be 0 with --algorithm={algorithm}: the '
        'selected-rows process sends each client its own rows '
        '(federated_select), so clients cannot share a TFF client value.')
  values['runtime'], values['client_groups'] = execution.TFF, 0


def _define_flags(table: flag_table.Table) -> None:
  """The binary's own flags (the task's arguments), in `table`."""
  table.define(flag_table.STRING, 'data_dir', None,
               'Directory holding MovieLens 1M ratings.dat.')
  task_runs.define_batch_flags(table, 16)
  table.define(flag_table.INTEGER, 'context_length', data.CONTEXT_LENGTH,
               'Previous movies in an example\'s context.',
               lower_bound=1)
  table.define(flag_table.INTEGER, 'embedding_dim', 16,
               'd, the embedding width.', lower_bound=1)
  table.define(flag_table.FLOAT, 'spreadout_weight', 0.001,
               'lambda: the central loss is lambda x spreadout(table).',
               lower_bound=0.0)


# The binary's defaults (`tasks.common.task_runs`): the paper's, App. C.2.
RUNS = task_runs.Runs(
    define_flags=_define_flags,
    preset_help='cpu_small: flags you did not set become a small run; paper: '
                'the flags\' defaults are the paper\'s; paper_fig11: App. C.4 '
                'Fig. 11 (server Adam at 0.01, 1-way GT; --algorithm=fedavg '
                'for its baseline).',
    training_defaults=dict(rounds=2000, clients_per_round=100,
                           num_local_steps=10, client_learning_rate=0.5),
    presets={
        'paper': {},  # The flags' defaults are the paper's.
        # Seed 004 App. C.4 Fig. 11: 1-way GT (and, with --algorithm=fedavg,
        # the baseline) with Adam at the server, lr 0.01, the rest as Table
        # C.2; Adam's betas and epsilon are not given (ours: 0.9, 0.99,
        # 1e-3).
        'paper_fig11': dict(algorithm='one_way_gradient_transfer',
                            server_optimizer='adam',
                            server_learning_rate=0.01),
        'cpu_small': dict(rounds=5, clients_per_round=4, eval_every=5,
                          checkpoint_every=5),
    },
    preset_durations={'paper': PAPER_DURATION},
    rules=_selected_rows,
    # The baseline puts w_c / w_f x the spreadout on every client.
    also_read=('central_weight',))
