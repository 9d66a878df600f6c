"""The JAX GPU speed path of the encoder and its heads (JAX, no TensorFlow).

A model built with `kernels=hooks.JaxGpuKernels()` (a bert_tf.kernels.protocol.Kernels;
bert_tf.kernels.for_runtime chooses it where Keras runs on JAX and JAX on a GPU)
computes some of the pieces its layers compose this way: same variables, same
checkpoints, the same function up to rounding and dropout masks.

- Attention (bert_tf.kernels.jax_gpu.attention): between the projections, the heads stay
  in the [B, T, N, D] layout the projections produce, and scores, softmax, dropout and
  the weighted sum run as one Pallas kernel forward and two backward, the [B, N, T, T]
  probabilities never written out; shapes the kernel does not take (the last block's
  few query positions) run the same maths as XLA ops.
- Dropout masks from a counter-based hash instead of threefry
  (bert_tf.kernels.jax_gpu.dropout), keyed by each Dropout layer's Keras seed state, so
  checkpoints and resumed runs keep working: `dropout_generator`.
- Residual + dropout + LayerNorm (bert_tf.kernels.jax_gpu.layer_norm), `layer_norm`:
  "xla" (default) leaves them to XLA, which fuses the bias add, the hash mask and the
  residual sum into the LayerNorm's reductions but re-reads the rows for each of them
  and keeps the float32 sum and the mask for the backward; "pallas" runs the block's
  two LayerNorms as one kernel forward and one backward each, reading each row once.
  Which is faster is for the GPU benchmark to say (bench/README.md); until then the
  default is the path XLA compiles on every device.

Also here: the XLA flags the JAX engine starts with (`xla_flags`). This package's
__init__ imports nothing, so that `xla_flags` runs before JAX loads.
"""
