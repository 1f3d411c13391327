"""The composer of learning processes that take a server-side step.

TFF's `tff.learning.templates.compose_learning_process` composes a
distributor, a client work, an aggregator and a finalizer whose state is its
own. Mixed FL (a central update before the clients train, a merge and
Gradient Transfer's inference after) and FedGBO (global statistics updated
from the round's mean update with the round's K and learning rate) need one
step that sees the whole round: the model, the client work's state before
and after, and the aggregate. `compose_with_server_step` is that composition,
with the same state layout as TFF's (`global_model_weights`, `distributor`,
`client_work`, `aggregator`, plus `server` when the step keeps a state) so
that `tff.learning` program logic, checkpoints and our driver treat every
process alike.

What the clients upload for the server step (beyond the update the
aggregator reduces) travels apart from the measurements: a client work that
is an `UploadingClientWork` (the K-step one) also has `next_with_uploads`,
whose output carries the server-placed `uploads` (sums over the cohort, such
as the steps taken or 2-way Gradient Transfer's update sum), and the composer
hands them to `ServerStep.update` as `uploads=`. Measurements hold only what
is published.

One process is not composed here: the selected-rows mixed-FL process
(`tff_mixed.algorithms.selected_rows`) writes its own `next_fn`, because its
clients receive table rows through `tff.federated_select` and upload sparse
rows that `tff.federated_aggregate` scatters, which no `ClientWorkProcess`
and aggregator pair can express. It shares the server step
(`mixed_fl_step`) and the K-step client work's measurements
(`work_metrics.work_measurements`) instead.
"""

import collections
from collections.abc import Callable
from typing import Any, NamedTuple, Optional

import tensorflow_federated as tff

from tff_mixed import keys
from tff_mixed.templates import common

UPLOADS = keys.UPLOADS


class UploadingClientWork(tff.learning.templates.ClientWorkProcess):
  """A `ClientWorkProcess` that also gives the server step its uploads.

  `next_with_uploads` has `next`'s parameters and returns an `OrderedDict`
  with `state`, `result` and `measurements` as `next`'s output, plus
  `uploads` (at SERVER): what the server step receives from the clients
  besides their updates. `next` is `next_with_uploads` without them, so the
  process is still a `ClientWorkProcess` that TFF's own composer accepts.
  """

  def __init__(self, initialize_fn: tff.Computation,
               next_with_uploads_fn: tff.Computation, **hparams_fns):
    parameter = next_with_uploads_fn.type_signature.parameter

    @tff.federated_computation(parameter[0], parameter[1], parameter[2])
    def next_fn(state, weights, data):
      output = next_with_uploads_fn(state, weights, data)
      return tff.templates.MeasuredProcessOutput(
          output.state, output.result, output.measurements)

    super().__init__(initialize_fn, next_fn, **hparams_fns)
    self._next_with_uploads = next_with_uploads_fn

  @property
  def next_with_uploads(self) -> tff.Computation:
    return self._next_with_uploads


class ServerStep(NamedTuple):
  """The server-side part of a round.

  `prepare` and `update` are called while a `tff.federated_computation` is
  traced and work on federated values placed at `tff.SERVER` (they may
  `federated_map` TensorFlow computations, or reduce client values such as
  the round's client results).

  Attributes:
    update: `update(*, server_state, weights, client_work_state, work,
      uploads, aggregated, context) -> (server_state, weights,
      client_work_state, metrics)`, after aggregation. `server_state` is the step's state (None
      without one); `weights` the round's model x_t; `client_work_state`
      the client work's state the clients trained with (its K and learning
      rate are the round's); `work` the client work's output (its `state`
      is the next round's, its `measurements` only measurements); `uploads`
      the server-placed uploads of an `UploadingClientWork` (None for
      another client work); `aggregated` the aggregator's output (`result`,
      the mean update); `context` what `prepare` returned. Returns the
      step's next state (None without one), x_{t+1}, the client work's next
      state, and an `OrderedDict` of server-placed measurements merged over
      the default `distributor`, `client_work` and `aggregator` ones (so a
      step may replace `client_work`).
    initialize: A no-arg TensorFlow computation of the step's state, or
      None for a step without state.
    prepare: Optional `prepare(server_state, weights, client_work_state) ->
      (client_work_state, context)`, before the clients train.
    hparams: Optional `(get, set)`, TensorFlow functions of the step's
      state: `get(server_state)` its hyper-parameters (an `OrderedDict`, such
      as its optimizers' learning rates) and `set(server_state, hparams)`
      the state with them; the process's `get_hparams` then gives them under
      `server`, beside `client_work`.
  """
  update: Callable[..., tuple[Any, Any, Any, collections.OrderedDict]]
  initialize: Optional[tff.Computation] = None
  prepare: Optional[Callable[..., tuple[Any, Any]]] = None
  hparams: Optional[tuple[Callable[..., Any], Callable[..., Any]]] = None


def compose_with_server_step(
    initial_model_weights_fn: tff.Computation,
    distributor: tff.learning.templates.DistributionProcess,
    client_work: tff.learning.templates.ClientWorkProcess,
    aggregator: tff.templates.AggregationProcess,
    server_step: ServerStep,
) -> tff.learning.templates.LearningProcess:
  """Composes a `LearningProcess` whose round ends with `server_step`.

  The arguments are those of `tff.learning.templates.compose_learning_process`
  with `server_step` in place of the finalizer.

  Round t: `server_step.prepare`; the distributor sends x_t; the client work
  trains; the aggregator reduces the updates; `server_step.update` gives
  x_{t+1} and the next states.

  `get_hparams` gives `OrderedDict(client_work=client_work.get_hparams(...))`
  and `set_hparams` sets them through `client_work.set_hparams`, as TFF's
  composer does for its client work; a step with `hparams` adds its own
  under `server` (its rates; the rest of its state, such as its optimizers'
  moments, is not a hyper-parameter).

  Signatures (S: state, W: model weights):
    initialize: `( -> S@SERVER)`
    next: `(<S@SERVER, {B*}@CLIENTS> -> <state=S@SERVER, metrics=M@SERVER>)`
  """
  initial_weights_fn = initial_model_weights_fn
  weights_type = initial_weights_fn.type_signature.result
  step_init = server_step.initialize

  @tff.federated_computation
  def init_fn():
    state = collections.OrderedDict(
        global_model_weights=tff.federated_eval(initial_weights_fn, tff.SERVER),
        distributor=distributor.initialize(),
        client_work=client_work.initialize(),
        aggregator=aggregator.initialize(),
    )
    if step_init is not None:
      state['server'] = tff.federated_eval(step_init, tff.SERVER)
    return tff.federated_zip(state)

  state_type = init_fn.type_signature.result
  data_type = client_work.next.type_signature.parameter[2]

  @tff.federated_computation(state_type, data_type)
  def next_fn(state, client_data):
    weights = state.global_model_weights
    server_state = state.server if step_init is not None else None
    client_work_state, context = state.client_work, None
    if server_step.prepare is not None:
      client_work_state, context = server_step.prepare(
          server_state, weights, state.client_work)
    distributed = distributor.next(state.distributor, weights)
    if isinstance(client_work, UploadingClientWork):
      work = client_work.next_with_uploads(
          client_work_state, distributed.result, client_data)
      uploads = getattr(work, UPLOADS)
    else:
      work = client_work.next(
          client_work_state, distributed.result, client_data)
      uploads = None
    aggregated = aggregator.next(
        state.aggregator, work.result.update, work.result.update_weight)
    new_server, new_weights, new_client_work, step_metrics = (
        server_step.update(
            server_state=server_state, weights=weights,
            client_work_state=client_work_state, work=work, uploads=uploads,
            aggregated=aggregated, context=context))
    new_state = collections.OrderedDict(
        global_model_weights=new_weights,
        distributor=distributed.state,
        client_work=new_client_work,
        aggregator=aggregated.state,
    )
    if step_init is not None:
      new_state['server'] = new_server
    metrics = collections.OrderedDict(
        distributor=distributed.measurements,
        client_work=work.measurements,
        aggregator=aggregated.measurements,
    )
    metrics.update(step_metrics)
    return tff.learning.templates.LearningProcessOutput(
        tff.federated_zip(new_state), tff.federated_zip(metrics))

  get_model_weights, set_model_weights = common.model_weights_accessors(
      state_type.member, weights_type)
  get_hparams, set_hparams = common.client_work_hparams(
      state_type.member, client_work.get_hparams, client_work.set_hparams,
      server_hparams=server_step.hparams if step_init is not None else None)
  return tff.learning.templates.LearningProcess(
      init_fn, next_fn, get_model_weights, set_model_weights,
      get_hparams_fn=get_hparams, set_hparams_fn=set_hparams)
