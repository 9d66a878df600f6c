"""A TF Hub-style BERT preprocessor SavedModel: raw text to encoder inputs.

Like TF Hub's BERT preprocessors, the reloaded object has
  `tokenize(strings)`: tf.string [B] -> ragged int32 [B, (words), (pieces)];
  `bert_pack_inputs(segments, seq_length)`: a list of one or two such ragged
    tensors -> {input_word_ids, input_mask, input_type_ids} int32 [B, seq_length];
  `__call__(strings)`: tokenize and pack one segment at the default seq_length.
`bert_pack_inputs` is saved for the default seq_length; other lengths need a new
export.
"""

import tensorflow as tf

from bert_tf.export import text_encoding


class HubPreprocessor(tf.Module):
  """Tokenizer and packing as a loadable SavedModel object."""

  def __init__(self, tokenizer, seq_length=128, name="bert_preprocessor"):
    super().__init__(name=name)
    self.tokenizer = tokenizer
    self.seq_length = int(seq_length)
    self.text_encoder = text_encoding.TextEncoder(tokenizer, self.seq_length)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def tokenize(self, strings):
    """tf.string [B] -> ragged int32 [B, (words), (pieces)]."""
    return tf.cast(self.tokenizer.tokenize(strings), tf.int32)

  @tf.function
  def bert_pack_inputs(self, segments, seq_length=None):
    """One or two ragged int32 [B, (words), (pieces)] -> int32 [B, seq_length] inputs."""
    seq_length = self.seq_length if seq_length is None else int(seq_length)
    encoder = (self.text_encoder if seq_length == self.seq_length
               else text_encoding.TextEncoder(self.tokenizer, seq_length))
    if len(segments) not in (1, 2):
      raise ValueError(f"bert_pack_inputs takes one or two segments, got {len(segments)}")
    pieces = [segment.merge_dims(1, 2) if segment.ragged_rank == 2 else segment
              for segment in segments]
    return encoder.pack(*pieces)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def __call__(self, strings):
    """tf.string [B] -> one-segment int32 [B, seq_length] inputs."""
    return self.bert_pack_inputs([self.tokenize(strings)])

  def trace(self):
    """Traces `bert_pack_inputs` for one and two segments, so the export holds both."""
    spec = tf.RaggedTensorSpec([None, None, None], tf.int32, ragged_rank=2)
    self.bert_pack_inputs.get_concrete_function([spec])
    self.bert_pack_inputs.get_concrete_function([spec, spec])
    self.bert_pack_inputs.get_concrete_function([spec], self.seq_length)
    self.bert_pack_inputs.get_concrete_function([spec, spec], self.seq_length)
