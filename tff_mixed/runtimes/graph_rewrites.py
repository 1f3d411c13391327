"""The rewrites `tf_phase.Phase` makes to a TFF computation's `GraphDef`
before importing it (`tf_phase`'s module docstring says why each): its
library functions renamed, each `tf.data.Dataset.reduce` made a loop over
the dataset's iterator, and its ops ordered after its initialiser."""

import tensorflow as tf
from tensorflow.python.ops import gen_dataset_ops
from tensorflow.python.ops import gen_functional_ops
from tensorflow.python.ops import gen_optional_ops


def rename_functions(graph_def, suffix: str) -> None:
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


def reduce_as_loops(graph_def) -> None:
  """Replaces each `ReduceDataset` node of the graph and of its functions
  with a call of `_loop_function`'s loop (`tf_phase`'s module docstring).
  A node whose reduce function takes attributes or typed lists is left as
  it is."""
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


def after_initializer(graph_def, initializer: str) -> None:
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
