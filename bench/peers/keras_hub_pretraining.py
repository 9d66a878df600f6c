"""KerasHub pretraining-step worker (runs in the `keras_hub` peer venv, Keras 3 on TF).

keras_hub.models.BertBackbone with keras_hub.models.BertMaskedLM (its masked-LM head
evaluated at the masked positions) and a tiny next-sentence head (Dense(2) on the
backbone's pooled output); keras.optimizers.AdamW without decay on biases and LayerNorm
parameters, global-norm clipping at 1.0; the step is a tf.function with GradientTape;
under --mixed_precision=mixed_bfloat16 Keras's global policy of that name.
Spoken to by bench/pretraining_step.py through protocol.py.
"""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # pylint: disable=g-import-not-at-top,wrong-import-position
import keras_hub  # pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position

from bench.peers import protocol  # pylint: disable=g-import-not-at-top,wrong-import-position


def main():
  args, thread_info = protocol.start_worker(__doc__, tf)

  keras.utils.set_random_seed(0)
  keras.mixed_precision.set_global_policy(args.mixed_precision)
  layers, hidden, heads, intermediate = protocol.size_args(args.size)
  backbone = keras_hub.models.BertBackbone(
      vocabulary_size=protocol.VOCAB_SIZE, num_layers=layers, num_heads=heads,
      hidden_dim=hidden, intermediate_dim=intermediate, max_sequence_length=512,
      num_segments=2)
  masked_lm = keras_hub.models.BertMaskedLM(backbone=backbone, preprocessor=None)
  next_sentence = keras.layers.Dense(2, name="next_sentence")
  next_sentence.build((None, hidden))
  variables = masked_lm.trainable_variables + next_sentence.trainable_variables
  optimizer = keras.optimizers.AdamW(learning_rate=protocol.LEARNING_RATE,
                                     weight_decay=protocol.WEIGHT_DECAY, epsilon=1e-6,
                                     global_clipnorm=1.0)
  optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
  optimizer.build(variables)

  batch = {k: tf.constant(v) for k, v in protocol.pretraining_batch(
      args.batch_size, args.seq_length, args.predictions,
      full_length=bool(args.full_length)).items()}
  inputs = {"token_ids": batch["input_word_ids"], "padding_mask": batch["input_mask"],
            "segment_ids": batch["input_type_ids"],
            "mask_positions": batch["masked_lm_positions"]}

  def loss_fn():
    backbone_inputs = {k: inputs[k] for k in ("token_ids", "padding_mask", "segment_ids")}
    outputs = backbone(backbone_inputs, training=True)
    mlm_logits = masked_lm.masked_lm_head(outputs["sequence_output"],
                                          mask_positions=inputs["mask_positions"])
    nsp_logits = next_sentence(outputs["pooled_output"])
    return protocol.tf_pretraining_loss(tf, keras.losses, batch, mlm_logits, nsp_logits)

  protocol.serve_tf_training(tf, loss_fn, variables, optimizer, info={
      **thread_info,
      "framework": f"keras_hub {keras_hub.__version__} (Keras {keras.__version__}, "
                   f"TF {tf.__version__})", "mixed_precision": args.mixed_precision})


if __name__ == "__main__":
  main()
