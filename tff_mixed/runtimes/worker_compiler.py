"""What TFF's runtime compiles a computation to before its worker runs it.

`compile_for_worker(comp)` is TFF's own compilation for its C++ worker, the
`compiler_fn` of TFF's native contexts
(`tff.backends.native.desugar_and_transform_to_native`), preceded by
`tff.backends.test.replace_secure_intrinsics_with_bodies` so that secure
aggregators run in simulation, with the same passes in the same order and
the same Grappler configuration: the worker receives the computation TFF's
two functions would give it.

What this adds: the two functions each take a `ConcreteComputation`, so
chained they turn the computation's proto into a building block and back
three times (secure intrinsics, TFF's intrinsics, the native form). On a
round of a learning process that is most of the compilation besides
Grappler (~0.25 s of a digits FedAvg round's 0.6 s here, and a fifth of
the test suite's Python time went to this compilation). Here the building
block is made once, and the proto once at the end.
"""

import tensorflow as tf
import tensorflow_federated as tff
# TFF's passes themselves, which its public functions above chain.
from tensorflow_federated.python.core.backends.test import (
    compiler as test_compiler)
from tensorflow_federated.python.core.environments.tensorflow_backend import (
    compiled_computation_transformations as tf_transformations)
from tensorflow_federated.python.core.environments.tensorflow_backend import (
    tensorflow_tree_transformations)
from tensorflow_federated.python.core.impl.compiler import transformations


def _grappler_config() -> tf.compat.v1.ConfigProto:
  """`desugar_and_transform_to_native`'s: static Grappler, aggressive."""
  config = tf.compat.v1.ConfigProto()
  options = config.graph_options.rewrite_options
  aggressive = options.AGGRESSIVE
  options.memory_optimization = aggressive
  options.constant_folding = aggressive
  options.arithmetic_optimization = aggressive
  options.loop_optimization = aggressive
  options.function_optimization = aggressive
  return config


_GRAPPLER = _grappler_config()


def compile_for_worker(comp: tff.framework.ConcreteComputation
                       ) -> tff.framework.ConcreteComputation:
  """`comp` as TFF's native runtime runs it, secure sums as plain sums."""
  block = comp.to_building_block()
  # replace_secure_intrinsics_with_bodies:
  block, _ = test_compiler._replace_secure_intrinsics_with_insecure_bodies(  # pylint: disable=protected-access
      block)
  # desugar_and_transform_to_native:
  block, _ = tensorflow_tree_transformations.replace_intrinsics_with_bodies(
      block)
  # transform_to_native_form, which gives back its argument uncompiled
  # where TFF cannot compile it (a ValueError), as here:
  try:
    native = transformations.to_call_dominant(block)
    native, _ = tf_transformations.optimize_tensorflow_graphs(
        native, _GRAPPLER)
    native, _ = tf_transformations.transform_tf_call_ops_to_disable_grappler(
        native)
    native, _ = tf_transformations.transform_tf_add_ids(native)
  except ValueError:
    native = block
  return tff.framework.ConcreteComputation(
      computation_proto=native.proto,
      context_stack=tff.framework.get_context_stack())
