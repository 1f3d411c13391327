"""Forward plus backward FLOPs of one example of a Keras model.

Seed 003 §B.6 counts a forward pass with Thop (multiply-accumulates) and
multiplies by 3 for forward plus backward. We count 2 FLOPs per
multiply-accumulate of the layers that dominate (Dense, Conv2D, GRU; the
rest are ignored) and multiply by 3, as `tasks.digits.task.flops_per_example`
does: seed 003's figures are half of ours.
"""

import numpy as np
import tensorflow as tf


def _macs(layer) -> float:
  """Multiply-accumulates of one example through `layer`."""
  if isinstance(layer, tf.keras.layers.Conv2D):
    _, h, w, c_out = layer.output_shape
    k_h, k_w = layer.kernel_size
    return float(h * w * c_out * k_h * k_w * layer.input_shape[-1])
  if isinstance(layer, tf.keras.layers.GRU):
    steps = layer.input_shape[1]
    units, inputs = layer.units, layer.input_shape[-1]
    return float(steps * 3 * (inputs * units + units * units))
  if isinstance(layer, tf.keras.layers.Dense):
    positions = int(np.prod(layer.input_shape[1:-1] or [1]))
    return float(positions * layer.input_shape[-1] * layer.units)
  return 0.0


def flops_per_example(keras_model: tf.keras.Model) -> float:
  """3 x 2 x the multiply-accumulates of Dense, Conv2D and GRU layers."""
  return 6.0 * sum(_macs(layer) for layer in keras_model.layers)
