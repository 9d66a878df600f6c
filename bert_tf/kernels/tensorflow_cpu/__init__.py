"""The TensorFlow CPU speed path of the encoder and its heads.

The layers in bert_tf.layers are written as the paper reads, with Keras layers and
keras.ops, and run on every Keras backend. A model built with `kernels=hooks.KERNELS`
(a bert_tf.kernels.protocol.Kernels) computes some of the pieces its layers compose
with this package's functions: same variables, same checkpoints, same result to rounding,
computed faster by TensorFlow on a CPU. The choice is made when the model is built
(`runtime.fused_kernels`, by default on where TensorFlow runs the model on a CPU and
nowhere else); nothing process-wide changes. `fused` holds the pieces as functions of
tensors, `hooks` the Kernels subclass that applies them to the layers' sublayers.

The pieces, each used only where it applies:
- XLA-compiled element-wise pieces, where every shape is static and the computation is
  float32 (`applies`): LayerNorm; bias + exact GELU; and the end of each half of a
  Transformer block, LayerNorm(residual + Dropout(x + bias)), given the dropout mask.
  TensorFlow runs each of these as a handful of kernels, each a pass over memory; XLA
  fuses each into one or two loops. XLA compiles once per input shape, so a batch
  padded to its longest example (a new length every step) takes the plain path. Each
  piece is two XLA functions, forward and backward, joined by a custom gradient: the
  backward recomputes what it needs from the forward's inputs, where a compiled forward
  differentiated by TensorFlow would write out every intermediate its gradient reads.
  The matmuls stay outside, where TensorFlow's oneDNN kernels beat XLA's on CPU.
- The widening matmul of the intermediate layer (static shapes): its input gradient
  multiplies by a materialized transposed kernel, which oneDNN runs faster than the
  same product with transpose_b.
- Dropout masks of 16 random bits per element drawn from a named Philox stream
  (`keep_bits`), everywhere: Keras draws a float32 uniform per element with the
  "auto_select" algorithm, twice the random bits needed, and under XLA on CPU
  "auto_select" compiles to a much slower generator than naming Philox. Keep
  probabilities are multiples of 1/2^16: rate 0.1 drops with probability
  6554/65536 = 0.100006, and kept values are scaled by the exact 1/keep probability.
- The masked-LM logits as one 2-D matmul against the transposed table with a BiasAdd,
  which TensorFlow fuses into a single oneDNN kernel, the bias gradient a BiasAddGrad
  instead of a broadcast reduction over [B, P, V].
"""
