"""Model FLOPs of one BERT pretraining sequence: the numerator of every MFU figure in
bench/ and of the ahead-of-time compile's (bert_tf.training.jax_engine.compile_for),
which checks the compiled step's FLOPs against it.

Only the matrix products are counted, 3x the forward pass (forward, and backward for
the activations and for the weights):

  3 x [ L*T*(8H^2 + 4HI) + 4*L*T^2*H + P*(2H^2 + 2HV) + 2H^2 ]

for L layers of width H and intermediate width I, T tokens, P masked positions and
vocabulary V: 6 x the matmul parameters of the blocks x T, the attention scores and
context (4T^2H per layer forward), the masked-LM transform and decoder at the P
positions, and the pooler. Embedding lookups, LayerNorms and softmaxes are not counted.
"""


def pretraining_flops_per_sequence(layers: int, hidden: int, intermediate: int,
                                   vocab_size: int, seq_length: int,
                                   predictions: int) -> float:
  """Training FLOPs of one sequence of `seq_length` tokens with `predictions` masked
  positions (the module docstring's formula)."""
  blocks = seq_length * layers * (8 * hidden**2 + 4 * hidden * intermediate)
  attention = 4 * layers * seq_length**2 * hidden
  heads = predictions * (2 * hidden**2 + 2 * hidden * vocab_size) + 2 * hidden**2
  return 3.0 * (blocks + attention + heads)
