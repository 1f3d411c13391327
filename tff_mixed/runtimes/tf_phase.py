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
  that calls the same reduce function (`graph_rewrites.reduce_as_loops`). The op
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
# TFF's own helpers (not part of its public API): for its serialised graphs
# (unpacking the GraphDef, suffixing its shared names, mapping control inputs
# as its importer does), and its test for a named tuple.
from tensorflow_federated.python.common_libs import py_typecheck
from tensorflow_federated.python.core.impl.utils import tensorflow_utils
from tensorflow_federated.python.tensorflow_libs import graph_utils
from tensorflow_federated.python.tensorflow_libs import serialization_utils

from tff_mixed.runtimes import graph_rewrites

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
    graph_rewrites.reduce_as_loops(graph_def)
    graph_rewrites.rename_functions(graph_def,
                                    f'_in_process_{next(_suffixes)}')
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
      graph_rewrites.after_initializer(graph_def, graph.initialize_op)
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
