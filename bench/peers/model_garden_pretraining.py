"""Model Garden pretraining-step worker (runs in the `model_garden` peer venv, tf_keras).

official.nlp.modeling.networks.BertEncoder inside models.BertPretrainerV2 (masked LM at
the given positions, a `next_sentence` ClassificationHead), and Model Garden's own
AdamWeightDecay (official.modeling.optimization) excluding LayerNorm and biases from
weight decay, global-norm clipping at 1.0; a tf.function step with GradientTape; under
--mixed_precision=mixed_bfloat16 tf_keras's global policy of that name.
Spoken to by bench/pretraining_step.py through protocol.py.
"""

import tensorflow as tf
import tf_keras
from official.modeling.optimization import legacy_adamw
from official.nlp.modeling import layers
from official.nlp.modeling import models
from official.nlp.modeling import networks

from bench.peers import protocol


def main():
  args, thread_info = protocol.start_worker(__doc__, tf)

  tf_keras.utils.set_random_seed(0)
  tf_keras.mixed_precision.set_global_policy(args.mixed_precision)
  num_layers, hidden, heads, intermediate = protocol.size_args(args.size)
  encoder = networks.BertEncoder(
      vocab_size=protocol.VOCAB_SIZE, hidden_size=hidden, num_layers=num_layers,
      num_attention_heads=heads, inner_dim=intermediate, max_sequence_length=512,
      type_vocab_size=2)
  pretrainer = models.BertPretrainerV2(
      encoder_network=encoder,
      classification_heads=[layers.ClassificationHead(inner_dim=hidden, num_classes=2,
                                                       name="next_sentence")])
  optimizer = legacy_adamw.AdamWeightDecay(
      learning_rate=protocol.LEARNING_RATE, weight_decay_rate=protocol.WEIGHT_DECAY,
      epsilon=1e-6, exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"],
      global_clipnorm=1.0)

  batch = {k: tf.constant(v) for k, v in protocol.pretraining_batch(
      args.batch_size, args.seq_length, args.predictions,
      full_length=bool(args.full_length)).items()}
  inputs = {k: batch[k] for k in ("input_word_ids", "input_mask", "input_type_ids",
                                  "masked_lm_positions")}
  pretrainer(inputs)
  variables = pretrainer.trainable_variables

  def loss_fn():
    outputs = pretrainer(inputs, training=True)
    return protocol.tf_pretraining_loss(tf, tf_keras.losses, batch, outputs["mlm_logits"],
                                        outputs["next_sentence"])

  protocol.serve_tf_training(tf, loss_fn, variables, optimizer, info={
      **thread_info,
      "framework": f"Model Garden (tf-models-official, tf_keras {tf_keras.__version__}, "
                   f"TF {tf.__version__})", "mixed_precision": args.mixed_precision})


if __name__ == "__main__":
  main()
