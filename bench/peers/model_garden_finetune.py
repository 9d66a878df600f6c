"""Model Garden fine-tuning worker (runs in the `model_garden` peer venv, tf_keras).

Model Garden's own text layers (official.nlp.modeling.layers.BertTokenizer and
BertPackInputs, which pad every example to seq_length as its sentence-prediction data
does) in a tf.data pipeline from the TSV's strings, models.BertClassifier over
networks.BertEncoder, AdamWeightDecay; a tf.function step. Spoken to by
bench/finetune_throughput.py through protocol.py.
"""

import tensorflow as tf
import tf_keras
from official.modeling.optimization import legacy_adamw
from official.nlp.modeling import layers
from official.nlp.modeling import models
from official.nlp.modeling import networks

from bench.peers import glue_tsv
from bench.peers import protocol


def main():
  args, thread_info = protocol.start_worker(__doc__, "finetune", tf)

  tf_keras.utils.set_random_seed(0)
  texts_a, texts_b, labels = glue_tsv.read(args.train_tsv, args.task)
  tokenizer = layers.BertTokenizer(vocab_file=args.vocab_file, lower_case=True)
  packer = layers.BertPackInputs(seq_length=args.seq_length,
                                 special_tokens_dict=tokenizer.get_special_tokens_dict())
  data = {"a": texts_a, "label": labels}
  if texts_b:
    data["b"] = texts_b

  def featurize(batch):
    segments = [tokenizer(batch["a"])]
    if "b" in batch:
      segments.append(tokenizer(batch["b"]))
    return packer(segments), batch["label"]

  ds = (tf.data.Dataset.from_tensor_slices(data).shuffle(len(labels), seed=0).repeat()
        .batch(args.batch_size, drop_remainder=True)
        .map(featurize, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE))
  iterator = iter(ds)

  num_layers, hidden, heads, intermediate = protocol.size_args(args.size)
  encoder = networks.BertEncoder(
      vocab_size=protocol.VOCAB_SIZE, hidden_size=hidden, num_layers=num_layers,
      num_attention_heads=heads, inner_dim=intermediate, max_sequence_length=512,
      type_vocab_size=2)
  classifier = models.BertClassifier(encoder, num_classes=2)
  optimizer = legacy_adamw.AdamWeightDecay(
      learning_rate=2e-5, weight_decay_rate=protocol.WEIGHT_DECAY, epsilon=1e-6,
      exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"], global_clipnorm=1.0)

  @tf.function
  def train_step(iterator):
    features, y = next(iterator)
    with tf.GradientTape() as tape:
      logits = classifier(features, training=True)
      loss = tf.reduce_mean(tf_keras.losses.sparse_categorical_crossentropy(
          y, logits, from_logits=True))
    variables = classifier.trainable_variables
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return loss

  def step():
    float(train_step(iterator))

  protocol.serve(step, warmup_steps=3, info={
      **thread_info,
      "framework": f"Model Garden (tf_keras {tf_keras.__version__}, TF {tf.__version__}), "
                   f"padded to {args.seq_length}"})


if __name__ == "__main__":
  main()
