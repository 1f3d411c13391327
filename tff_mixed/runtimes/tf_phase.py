"""One TFF TensorFlow computation as a TensorFlow function in this process.

TFF serialises every `tff.tensorflow.computation` (and every phase of a
`tff.backends.mapreduce.MapReduceForm`) as a `GraphDef` with bindings that
name its parameter and result tensors. TFF's runtime ships that graph to its
C++ worker; `Phase` imports it once into a TensorFlow function instead, so a
call costs what a call of any concrete function costs, runs on whatever
device TensorFlow places it (a GPU when it sees one), and takes client
datasets as they are, without serialising them.

What TFF's own importer (`tensorflow_utils.deserialize_and_call_tf_computation`)
does inside a `tf.compat.v1.Session`, done once per phase here:

* shared names (the resource variables of Keras metrics) get a suffix unique
  to the phase, so two phases never share a variable;
* the graph's initialiser (those variables' initial values) runs before every
  call, in a function of its own: the imported graph orders nothing after it;
* a dataset parameter is a variant tensor (`tf.data.experimental.to_variant`)
  of a dataset with tf.data's static optimisations off: applying them when
  the phase creates its iterator costs ~4 ms a call, more than a small
  client's steps (`_UNOPTIMISED`);
* device assignments are cleared, so TensorFlow's placer decides;
* a `tf.data.Dataset.reduce` (the `ReduceDataset` op: TFF's client loop,
  `tff.learning`'s default) becomes a loop over the dataset's iterator
  that calls the same reduce function (`_reduce_as_loops`). The op
  instantiates its function afresh at every call (placement, Grappler, the
  kernels of every function it calls: ~30 ms a client for a two-layer
  model, against ~1 ms of arithmetic), which TFF's worker pays too; a loop's
  functions are instantiated once per phase. The same function on the same
  elements in the same order: the same result bit for bit.
"""

import collections
from collections.abc import Callable, Mapping
import itertools
from typing import Any, Optional

import attrs
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff
# The op `tf.data.Dataset.with_options` adds, without its Python.
from tensorflow.python.ops import gen_dataset_ops
from tensorflow.python.ops import gen_functional_ops
from tensorflow.python.ops import gen_optional_ops
# TFF's own helpers (not part of its public API): for its serialised graphs
# (unpacking the GraphDef, suffixing its shared names, mapping control inputs
# as its importer does), and its test for a named tuple.
from tensorflow_federated.python.common_libs import py_typecheck
from tensorflow_federated.python.core.impl.utils import tensorflow_utils
from tensorflow_federated.python.tensorflow_libs import graph_utils
from tensorflow_federated.python.tensorflow_libs import serialization_utils

_suffixes = itertools.count()


def _unoptimised_options() -> tf.data.Options:
  options = tf.data.Options()
  options.experimental_optimization.apply_default_optimizations = False
  options.experimental_optimization.inject_prefetch = False
  options.autotune.enabled = False
  return options


_UNOPTIMISED = _unoptimised_options()
_UNOPTIMISED_PROTO = _UNOPTIMISED._to_proto().SerializeToString()  # pylint: disable=protected-access
# What `tf.convert_to_tensor` converts by `tf.constant` alone (its registry):
# `flatten` calls that, without the dispatch (half of its ~8 us).
_CONSTANTS = (int, float, np.generic, np.ndarray)


def _flat_specs(binding, type_spec, out: list) -> list:
  """`[(tensor name, TensorSpec)]` of a binding, in TFF's flattening order."""
  kind = binding.WhichOneof('binding')
  if kind == 'tensor':
    out.append((binding.tensor.tensor_name,
                tf.TensorSpec(type_spec.shape, type_spec.dtype)))
  elif kind == 'sequence':
    out.append((binding.sequence.variant_tensor_name,
                tf.TensorSpec([], tf.variant)))
  elif kind == 'struct':
    for element, (_, element_type) in zip(
        binding.struct.element, tff.structure.iter_elements(type_spec)):
      _flat_specs(element, element_type, out)
  else:
    raise ValueError(f'A TensorFlow binding of kind {kind!r} (of type '
                     f'{type_spec}) cannot run in process.')
  return out


def flatten(value: Any, type_spec: tff.types.Type, out: list,
            datasets: Optional[dict] = None) -> list:
  """The tensors of `value` (a Python structure or `tff.structure.Struct`
  of type `type_spec`), in the order a `Phase` takes them.

  A dataset's tensor has tf.data's static optimisations off; or, given
  `datasets` (a dict that collects {a dataset's place in `out`: its
  `element_spec`}), it is the dataset's own variant, and the caller turns
  them off (`unoptimised`: one op in its graph, where `with_options` costs
  ~0.15 ms of Python a dataset).
  """
  if isinstance(type_spec, tff.SequenceType):
    if not isinstance(value, tf.data.Dataset):
      value = tf.data.Dataset.from_tensor_slices(list(value))
    if datasets is None:
      value = value.with_options(_UNOPTIMISED)
    else:
      datasets[len(out)] = value.element_spec
    out.append(tf.data.experimental.to_variant(value))
  elif isinstance(type_spec, tff.TensorType):
    out.append(tf.constant(value, type_spec.dtype)
               if isinstance(value, _CONSTANTS)
               else tf.convert_to_tensor(value, type_spec.dtype))
  elif isinstance(type_spec, tff.StructType):
    for element, (_, element_type) in zip(
        _elements(value), tff.structure.iter_elements(type_spec)):
      flatten(element, element_type, out, datasets)
  else:
    raise TypeError(f'A value of type {type_spec} cannot be an argument of a '
                    'TensorFlow computation.')
  return out


def _elements(value) -> list:
  """A container's elements in `tff.structure.from_container`'s order (a
  named tuple's: its own), without its typing-protocol test (~15 us)."""
  if attrs.has(type(value)):
    return [getattr(value, field.name) for field in attrs.fields(type(value))]
  if isinstance(value, (Mapping, tff.structure.Struct, tuple, list)):
    return list(value.values() if isinstance(value, Mapping) else value)
  return list(tff.structure.from_container(value))  # Or its error.


def unoptimised(variant: tf.Tensor, element_spec: Any) -> tf.Tensor:
  """`variant`, a dataset of `element_spec`'s elements, with tf.data's
  static optimisations off (`flatten`'s options, as the op `with_options`
  adds)."""
  specs = tf.nest.flatten(element_spec)
  return gen_dataset_ops.options_dataset(
      variant, _UNOPTIMISED_PROTO, output_types=[s.dtype for s in specs],
      output_shapes=[s.shape for s in specs])


def pack(flat: list, type_spec: tff.types.Type) -> Any:
  """`flatten`'s inverse for results: NumPy values in `tff.structure.Struct`s
  (TFF's runtime returns NumPy values too)."""
  values = iter(flat)

  def build(t):
    if isinstance(t, tff.TensorType):
      return next(values).numpy()
    if isinstance(t, tff.StructType):
      return tff.structure.Struct(
          [(name, build(e)) for name, e in tff.structure.iter_elements(t)])
    raise TypeError(f'A result of type {t} cannot come out of a TensorFlow '
                    'computation.')

  return build(type_spec)


def python_packer(type_spec: tff.types.Type
                  ) -> Optional[Callable[[list], Any]]:
  """`flat -> type_to_py_container(pack(flat, type_spec), type_spec)`, each
  container's kind resolved once; None for a type outside the plain cases
  (at CLIENTS, a sequence, names on some elements only)."""

  def builder(t):
    if isinstance(t, tff.FederatedType):
      return builder(t.member) if t.all_equal else None
    if isinstance(t, tff.TensorType):
      return lambda values: next(values).numpy()
    if not isinstance(t, tff.StructType):
      return None
    elements = list(tff.structure.iter_elements(t))
    names, parts = [n for n, _ in elements], [builder(e) for _, e in elements]
    named = any(n is not None for n in names)
    if None in parts or (named and None in names):  # Mixed names: refused.
      return None
    container = t.python_container or (
        collections.OrderedDict if named else tuple)
    keywords = attrs.has(container) or isinstance(
        container, py_typecheck.SupportsNamedTuple)
    if keywords and named:
      return lambda values: container(
          **{n: part(values) for n, part in zip(names, parts)})
    if keywords or (named and issubclass(container, (list, tuple))):
      return None  # Odd cases: type_to_py_container's own.
    if named:
      return lambda values: container(
          [(n, part(values)) for n, part in zip(names, parts)])
    return lambda values: container([part(values) for part in parts])

  build = builder(type_spec)
  return None if build is None else lambda flat: build(iter(flat))


def call(function, flat: list) -> list:
  """`function(*flat)` (a concrete function, tensors) without a call's
  Python (binding, converting: ~40 us of a small phase's ~70)."""
  return function._call_flat(flat, function.captured_inputs)  # pylint: disable=protected-access


def _rename_functions(graph_def, suffix: str) -> None:
  """Gives the graph's library functions names of their own (`suffix`
  added, every reference too). They were named when TFF traced them in this
  process, and TFF's compiler rewrote some since: imported under the old
  name, such a function clashes with the eager function of that name
  ("Attempting to add a duplicate function ... definitions differ")."""
  names = {f.signature.name: f.signature.name + suffix
           for f in graph_def.library.function}
  if not names:
    return

  def rename_attrs(attrs):
    for value in attrs.values():
      if value.HasField('func') and value.func.name in names:
        value.func.name = names[value.func.name]
      for func in value.list.func:
        if func.name in names:
          func.name = names[func.name]

  def rename_nodes(nodes):
    for node in nodes:
      if node.op in names:
        node.op = names[node.op]
      rename_attrs(node.attr)

  rename_nodes(graph_def.node)
  for function in graph_def.library.function:
    function.signature.name = names[function.signature.name]
    rename_nodes(function.node_def)
    rename_attrs(function.attr)
  for gradient in graph_def.library.gradient:
    gradient.function_name = names.get(gradient.function_name,
                                       gradient.function_name)
    gradient.gradient_func = names.get(gradient.gradient_func,
                                       gradient.gradient_func)


def _loop_function(reduce_fn: str, state_types: list, state_shapes: list,
                   arg_types: list, element_types: list) -> list:
  """The FunctionDefs of `(dataset, *state, *args) -> state`: `reduce_fn`
  (`(*state, *element, *args) -> state`, by name) applied to each element of
  the dataset in turn, as `ReduceDataset` does, in a `tf.while_loop` over
  the dataset's iterator. The first is the loop's (the others are its
  condition and body); `reduce_fn` is not among them (it is called by name,
  from the graph the loop goes into)."""
  shapes = [tf.TensorShape(None)] * len(element_types)
  n = len(state_types)

  def loop(variant, *rest):
    state, args = list(rest[:n]), list(rest[n:])
    iterator = gen_dataset_ops.anonymous_iterator_v3(
        output_types=element_types, output_shapes=shapes)

    def next_element(after):
      with tf.control_dependencies(after):
        return gen_dataset_ops.iterator_get_next_as_optional(
            iterator, output_types=element_types, output_shapes=shapes)

    def body(element, *state):
      element = gen_optional_ops.optional_get_value(
          element, output_types=element_types, output_shapes=shapes)
      state = gen_functional_ops.stateful_partitioned_call(
          args=list(state) + list(element) + args, Tout=state_types,
          f=reduce_fn)
      # The call's shapes are unknown here (the function is not in this
      # graph); the op's own, as ReduceDataset checks them.
      state = [tf.ensure_shape(s, shape)
               for s, shape in zip(state, state_shapes)]
      return [next_element(state)] + list(state)

    first = next_element(
        [gen_dataset_ops.make_iterator(variant, iterator)])
    return tf.while_loop(
        lambda element, *_: gen_optional_ops.optional_has_value(element),
        body, [first] + state, parallel_iterations=1)[1:]

  specs = ([tf.TensorSpec([], tf.variant)] +
           [tf.TensorSpec(s, t) for s, t in zip(state_shapes, state_types)] +
           [tf.TensorSpec(None, t) for t in arg_types])
  with tf.Graph().as_default():  # Nothing traced into the eager context.
    traced = tf.function(loop, autograph=False).get_concrete_function(*specs)
  return [traced.function_def, *traced.graph.as_graph_def().library.function]


def _reduce_as_loops(graph_def) -> None:
  """Replaces each `ReduceDataset` node of the graph and of its functions
  with a call of `_loop_function`'s loop (module docstring). A node whose
  reduce function takes attributes or typed lists is left as it is."""
  functions = {f.signature.name: f for f in graph_def.library.function}
  loops = {}  # (reduce function, types) -> the loop function's name.

  def as_loop(node) -> bool:
    reduce_fn = node.attr['f'].func
    fdef = functions.get(reduce_fn.name)
    # tf.data marks its functions (`_tf_data_function`); other attributes
    # would be the function's own.
    if fdef is None or any(not a.startswith('_') for a in reduce_fn.attr) or any(
        not a.type for a in fdef.signature.input_arg):
      return False
    state_types = list(node.attr['Tstate'].list.type)
    state_shapes = [tf.TensorShape(shape)
                    for shape in node.attr['output_shapes'].list.shape]
    arg_types = list(node.attr['Targuments'].list.type)
    inputs = [a.type for a in fdef.signature.input_arg]
    element_types = inputs[len(state_types):len(inputs) - len(arg_types)]
    key = (reduce_fn.name, tuple(state_types), str(state_shapes),
           tuple(arg_types), tuple(element_types))
    if key not in loops:
      defs = _loop_function(reduce_fn.name, state_types, state_shapes,
                            arg_types, element_types)
      graph_def.library.function.extend(defs)
      loops[key] = defs[0].signature.name
    node.op = 'StatefulPartitionedCall'
    node.ClearField('attr')
    node.attr['Tin'].list.type.extend(
        [tf.variant.as_datatype_enum] + state_types + arg_types)
    node.attr['Tout'].list.type.extend(state_types)
    node.attr['f'].func.name = loops[key]
    for name in ('config', 'config_proto', 'executor_type'):
      node.attr[name].s = b''
    return True

  for node in graph_def.node:  # Consumers name outputs `node:i` here.
    if node.op == 'ReduceDataset':
      as_loop(node)
  for function in list(graph_def.library.function):
    # Here `node:components:i`, which becomes `node:output:i`.
    renamed = {
        f'{node.name}:components:': f'{node.name}:output:'
        for node in function.node_def
        if node.op == 'ReduceDataset' and as_loop(node)}
    if not renamed:
      continue

    def rename(ref):
      for old, new in renamed.items():
        if ref.startswith(old):
          return new + ref[len(old):]
      return ref

    for node in function.node_def:
      node.input[:] = [rename(i) for i in node.input]
    for key, ref in function.ret.items():
      function.ret[key] = rename(ref)


def _after_initializer(graph_def, initializer: str) -> None:
  """Makes every node of the graph that the initializer does not need wait
  for it (a control input), so one call of the graph initialises its
  variables and then computes: a client's `work` is one function call, its
  nodes imported once (TFF runs the initializer in a session call of its
  own first)."""
  inputs = {node.name: node.input for node in graph_def.node}
  needed, stack = set(), [initializer]
  while stack:
    name = stack.pop()
    if name not in needed:
      needed.add(name)
      stack.extend(i.lstrip('^').split(':')[0] for i in inputs[name])
  for node in graph_def.node:
    if node.name not in needed:
      node.input.append('^' + initializer)


class Phase:
  """A TFF TensorFlow computation imported once; call it with a value of
  its parameter type (`phase(value)`) or with flat tensors (`call_flat`).

  To build one function of several phases, `import_into_graph(flat)`
  imports this phase's graph into the graph being built (of flat tensors
  of `specs`) and returns its result's tensors; or such a function calls
  `function`, the phase's own function, which it computes alone."""

  def __init__(self, computation):
    self.type_signature = computation.type_signature
    proto = computation.to_compiled_building_block().proto
    if proto.WhichOneof('computation') != 'tensorflow':
      raise ValueError('Not a TensorFlow computation: '
                       f'{self.type_signature}.')
    graph = proto.tensorflow
    graph_def = tensorflow_utils._uniquify_shared_names_with_suffix(  # pylint: disable=protected-access
        serialization_utils.unpack_graph_def(graph.graph_def),
        f'in_process_{next(_suffixes)}')
    _reduce_as_loops(graph_def)
    _rename_functions(graph_def, f'_in_process_{next(_suffixes)}')
    for node in graph_def.node:
      node.device = ''
    for function in graph_def.library.function:
      for node in function.node_def:
        node.device = ''
    parameter = self.type_signature.parameter
    params = (_flat_specs(graph.parameter, parameter, [])
              if graph.HasField('parameter') else [])
    results = [name for name, _ in
               _flat_specs(graph.result, self.type_signature.result, [])]
    names = [name for name, _ in params]
    token = graph.session_token_tensor_name

    def imported(flat, elements):
      inputs = dict(zip(names, flat))
      if token:
        inputs[token] = tf.constant('in_process')
      # Control inputs on a parameter (`^name`) follow it, as in TFF's
      # importer.
      return tf.graph_util.import_graph_def(
          graph_def, graph_utils.add_control_dep_mappings(inputs), elements,
          name='phase')

    if graph.initialize_op:
      _after_initializer(graph_def, graph.initialize_op)
    self.specs = [spec for _, spec in params]
    self.import_into_graph = lambda flat: imported(flat, results)
    self._wrapped = self._function = None

  @property
  def _run(self):
    """The phase as a function (built on first use, if ever)."""
    if self._wrapped is None:
      self._wrapped = tf.compat.v1.wrap_function(
          lambda *flat: self.import_into_graph(flat), self.specs)
    return self._wrapped

  @property
  def function(self):
    """The phase as a concrete function TensorFlow never inlines (Grappler
    would rewrite it with its caller: two phases' sums as one `AddN`, in
    another order): called, it computes what `call_flat` does, exactly."""
    if self._function is None:
      run = self._run  # Called, not imported: no automatic control deps.
      self._function = tf.function(
          lambda *flat: run(*flat), autograph=False,
          experimental_attributes={'_noinline': True},
      ).get_concrete_function(*self.specs)
    return self._function

  def call_flat(self, flat: list) -> list:
    """The result's tensors for the parameter's tensors `flat` (the
    phase's variables initialised first)."""
    return call(self._run, [
        t if isinstance(t, tf.Tensor) and t.dtype == spec.dtype
        else tf.convert_to_tensor(t, spec.dtype)
        for t, spec in zip(flat, self.specs, strict=True)])

  def __call__(self, value=None):
    parameter = self.type_signature.parameter
    flat = [] if parameter is None else flatten(value, parameter, [])
    return pack(self.call_flat(flat), self.type_signature.result)
