"""Dense products in int8 on oneDNN's u8 x s8 kernels, for exports served on CPUs.

The export mode `int8_onednn` (exporter.quantize) stores each kernel [I, O] as int8 in
[-63, 63] (KERNEL_RANGE) with one scale per output channel (Keras's int8 weights,
`kernel_scale`) and replaces the product: each row of the inputs is scaled by its own absolute maximum and
quantized to uint8, and multiplied by the int8 kernel in TensorFlow's
`QuantizedMatMulWithBiasAndDequantize`, whose CPU kernel is oneDNN's int8 matmul (VNNI
and AMX where the CPU has them), accumulating in int32 and returning float32. Where
the float product reads 4 bytes per weight and multiplies float32, this one reads 1
and multiplies int8. One scale per row, as in Keras's own int8 mode, keeps each row's
answer independent of the other rows of the call (a served text's answer of the texts
batched with it) and errs less than one range per call: outlier tokens ([SEP], say)
set their own scale only.

With x = r * u (r the row's absolute maximum, u in [-1, 1]), u ~= u_min + q * step
(q in [0, 255], QuantizeV2's range [u_min, u_max] ~= [-1, 1], step = (u_max - u_min) /
255) and the kernel W = K / s (K int8, s per output channel):

    x W + b = r * ((q * step) K + u_min * colsum(K)) / s + b

so the op takes q with the range [0, 255 * step] (no zero point: SCALED), the kernel K
with the range [-127, 127] (one int8 unit per step) and the bias u_min * colsum(K); its
float output is then scaled by r / s and the bias b added.

Why 63 and not 127: on CPUs without VNNI (AVX2, AVX-512 before VNNI) oneDNN multiplies
u8 x s8 with `vpmaddubsw`, which adds each pair of products in int16 with saturation:
255 x 127 x 2 exceeds 32,767 (with ONEDNN_MAX_CPU_ISA=AVX2 such a product came out
1,048,544 instead of 2,072,640), 255 x 63 x 2 = 32,130 does not, so the product is exact
on every x86 CPU. The inputs keep their 256 levels: the kernels' rounding errs less
than the inputs' (in a trial the int8-weight export changed the probabilities half as
much as the inputs' quantization did).

The op exists in TensorFlow builds with oneDNN (the default Linux x86 packages, where
oneDNN custom operations are on): `check_available` says whether this process can run it.
"""

import keras
import tensorflow as tf

from bert_tf.utils import errors

MODE = "int8_onednn"
# Each kernel's int8 values, the range that no pair of u8 x s8 products overflows int16.
KERNEL_RANGE = (-63, 63)


def int8_product(x, kernel, kernel_scale, column_sums, bias=None):
  """x W + b with the product in int8 (see the module docstring).

  Args:
    x: float32 [N, I].
    kernel: int8 [I, O] within KERNEL_RANGE, K = round(W * kernel_scale).
    kernel_scale: float32 [O], s.
    column_sums: float32 [O], the sums of K over I.
    bias: float32 [O] or None.

  Returns:
    float32 [N, O]; row n depends on x[n] only.
  """
  x = tf.convert_to_tensor(x, tf.float32)
  row_scale = tf.reduce_max(tf.abs(x), axis=1, keepdims=True)  # [N, 1]
  quantized = tf.raw_ops.QuantizeV2(input=tf.math.divide_no_nan(x, row_scale),
                                    min_range=-1.0, max_range=1.0, T=tf.quint8,
                                    mode="MIN_FIRST")
  # QuantizeV2 keeps the range [-1, 1] as given: u_min = -1, 255 * step = 2.
  product = tf.raw_ops.QuantizedMatMulWithBiasAndDequantize(
      a=quantized.output, b=tf.bitcast(kernel, tf.qint8), bias=-column_sums,
      min_a=0.0, max_a=2.0, min_b=-127.0, max_b=127.0,
      # Unused for a float output.
      min_freezed_output=0.0, max_freezed_output=0.0, Toutput=tf.float32,
      # q read with no zero point: MIN_FIRST would also sum the kernel's columns again
      # on every call.
      input_quant_mode="SCALED")
  outputs = product * row_scale / kernel_scale
  return outputs if bias is None else tf.nn.bias_add(outputs, bias)


class OneDnnInt8Dense(keras.layers.Dense):
  """A Keras Dense layer in int8 mode whose product is `int8_product`.

  Made from a Dense layer Keras has quantized to int8 (weights only) by `convert`;
  the weights stay Keras's (`_kernel` int8 [I, O], `kernel_scale` [O]) plus
  `column_sums` [O]. Inference only (no gradient), for SavedModel exports: Keras's own
  formats (`save_weights`, `.keras`) know neither the class nor `column_sums`.
  """

  # Keras's Dense calls _int8_call for a layer in int8 mode; every other behaviour of
  # the Dense layer stays.

  def _int8_call(self, inputs, training=None):
    del training
    units = self.units
    rows = tf.reshape(inputs, [-1, tf.shape(inputs)[-1]])
    outputs = int8_product(rows, self._kernel, self.kernel_scale, self.column_sums,
                           self.bias)
    outputs = tf.reshape(outputs, tf.concat([tf.shape(inputs)[:-1], [units]], 0))
    if self.activation is not None:
      outputs = self.activation(outputs)
    return outputs


def convert(layer: keras.layers.Dense) -> None:
  """Turns a Dense layer that Keras quantized to int8 (weights only, no LoRA, values in
  KERNEL_RANGE: `weight_quantizer`) into a OneDnnInt8Dense, in place: its weights stay,
  `column_sums` is added."""
  if layer.quantization_mode != "int8" or layer.lora_enabled:
    raise ValueError(f"{layer.path}: needs Keras's int8 weights without LoRA, has mode "
                     f"{layer.quantization_mode} (LoRA {layer.lora_enabled})")
  # pylint: disable=protected-access
  kernel = tf.convert_to_tensor(layer._kernel)
  largest = int(tf.reduce_max(tf.abs(tf.cast(kernel, tf.int32))))
  if largest > KERNEL_RANGE[1]:
    raise ValueError(f"{layer.path}: int8 kernel values up to {largest}, beyond "
                     f"{KERNEL_RANGE}; quantize with int8_onednn.weight_quantizer()")
  sums = tf.reduce_sum(tf.cast(kernel, tf.float32), axis=0)
  # A built layer's state is locked; Keras's own quantize unlocks it the same way.
  layer._tracker.unlock()
  layer.column_sums = layer.add_weight(name="column_sums", shape=sums.shape,
                                       initializer="zeros", trainable=False)
  layer._tracker.lock()
  layer.column_sums.assign(sums)
  layer.__class__ = OneDnnInt8Dense


def weight_quantizer():
  """The Keras quantizer of a Dense kernel [I, O] for this mode: int8 in KERNEL_RANGE,
  one scale per output channel."""
  return keras.quantizers.AbsMaxQuantizer(axis=0, value_range=KERNEL_RANGE)


def available() -> bool:
  """Whether this TensorFlow runs the oneDNN int8 product (`check_available`)."""
  try:
    check_available()
  except errors.UserError:
    return False
  return True


def check_available() -> None:
  """Raises errors.UserError unless this TensorFlow runs the oneDNN int8 product (a
  build without oneDNN, or TF_ENABLE_ONEDNN_OPTS=0, has no kernel that computes it)."""
  kernel = tf.constant([[1, -2], [3, 4]], tf.int8)
  try:
    got = int8_product(tf.constant([[1.0, -1.0]]), kernel, tf.constant([1.0, 1.0]),
                       tf.constant([4.0, 2.0]))
  except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError) as error:
    raise errors.UserError(f"{MODE}: this TensorFlow cannot run oneDNN's int8 matmul "
                           f"({type(error).__name__})") from None
  if got.shape != (1, 2) or not bool(tf.reduce_all(tf.abs(got - [[-2.0, -6.0]]) < 0.1)):
    raise errors.UserError(
        f"{MODE}: this TensorFlow does not compute oneDNN's int8 matmul (got "
        f"{got.numpy().tolist()} for [[-2, -6]]): oneDNN custom operations must be on "
        "(a Linux x86 build, TF_ENABLE_ONEDNN_OPTS unset or 1)")
