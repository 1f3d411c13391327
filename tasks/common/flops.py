"""Forward plus backward FLOPs of one example of a Keras model, in two
conventions.

`OURS`: 2 FLOPs per multiply-accumulate of the layers that dominate (Dense,
Conv2D, GRU; biases, activations and pooling ignored), times 3 for forward
plus backward, as `tasks.digits.task.flops_per_example` counts.

`SEED_003`: seed 003 §B.6's count, which its Table 4 is made of: Thop's
count of a forward pass (its multiply-accumulates, taken as FLOPs) times 3.
The Thop of the time (0.0.31) counts a convolution's bias as one more
operation per output, a Dense layer's multiply-accumulates without its bias,
a GRU cell with its gates' biases and element-wise products (below), and
nothing for embeddings, activations or pooling. Table 4 is reproduced from
it to the printed digits (`tests/test_flops.py`): a model's figure in this
convention is about half of ours.
"""

import numpy as np
import tensorflow as tf

OURS, SEED_003 = 'ours', 'seed_003'
CONVENTIONS = (OURS, SEED_003)


def _gru_cell_ops(inputs: int, units: int) -> int:
  """Thop 0.0.31's operations of one GRU step (biases on): the reset and
  update gates, the candidate, r * (.), and (1 - z) n + z h."""
  gate = (inputs + units) * units + units + 2 * units
  return 2 * gate + gate + units + 3 * units


def _macs(layer, convention: str) -> float:
  """What `convention` counts for one example through `layer`."""
  if isinstance(layer, tf.keras.layers.Conv2D):
    _, h, w, c_out = layer.output_shape
    k_h, k_w = layer.kernel_size
    per_output = k_h * k_w * layer.input_shape[-1]
    if convention == SEED_003 and layer.use_bias:
      per_output += 1
    return float(h * w * c_out * per_output)
  if isinstance(layer, tf.keras.layers.GRU):
    steps = layer.input_shape[1]
    units, inputs = layer.units, layer.input_shape[-1]
    if convention == SEED_003:
      return float(steps * _gru_cell_ops(inputs, units))
    return float(steps * 3 * (inputs * units + units * units))
  if isinstance(layer, tf.keras.layers.Dense):
    positions = int(np.prod(layer.input_shape[1:-1] or [1]))
    return float(positions * layer.input_shape[-1] * layer.units)
  return 0.0


def flops_per_example(keras_model: tf.keras.Model,
                      convention: str = OURS) -> float:
  """Forward plus backward FLOPs of one example: 3 x 2 x the
  multiply-accumulates of Dense, Conv2D and GRU layers (`OURS`), or 3 x
  Thop's forward count (`SEED_003`)."""
  if convention not in CONVENTIONS:
    raise ValueError(f'convention must be one of {CONVENTIONS}, got '
                     f'{convention!r}.')
  per_mac = 6.0 if convention == OURS else 3.0
  return per_mac * sum(_macs(layer, convention) for layer in keras_model.layers)
