"""Bytes on the wire, derived from TFF type signatures.

The sizes are those of the uncompressed tensors a computation moves: the
values' member types (a federated type's placement is ignored), summed over
every tensor leaf as `itemsize * prod(shape)`.
"""

import numpy as np
import tensorflow_federated as tff


def type_size_bytes(type_spec: tff.types.Type) -> int:
  """Returns the number of bytes of a value of `type_spec`.

  Raises:
    ValueError: If a tensor's shape is not fully defined or it is not numeric.
  """
  if isinstance(type_spec, tff.FederatedType):
    return type_size_bytes(type_spec.member)
  if isinstance(type_spec, tff.StructType):
    return sum(type_size_bytes(t) for _, t in tff.structure.iter_elements(type_spec))
  if isinstance(type_spec, tff.TensorType):
    if type_spec.shape is None or any(d is None for d in type_spec.shape):
      raise ValueError(f'Tensor shape not fully defined: {type_spec}.')
    dtype = np.dtype(type_spec.dtype)
    if dtype.kind not in 'biuf':
      raise ValueError(f'Cannot size a tensor of dtype {dtype}: {type_spec}.')
    return int(dtype.itemsize * np.prod(type_spec.shape, dtype=np.int64))
  raise ValueError(f'Cannot size a value of type {type_spec}.')
