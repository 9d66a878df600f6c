"""Raw text to fixed-length model inputs inside a serving graph.

`TextEncoder` tokenizes with `BertWordPieceTokenizer` and packs one or two
segments as `[CLS] A [SEP] (B [SEP])` with `bert_tf.text.packing` (the packer of
the fine-tuning features too, so served inputs are the trained ones), truncated
(as the original BERT truncates pairs) and padded to `seq_length`, using only
core TensorFlow ops besides the tokenizer's, so that TF Serving's
tensorflow-text can run the result. Any batch of strings gets an answer: empty
and whitespace-only texts become `[CLS] [SEP]`, invalid UTF-8 is replaced
before normalization (by the tokenizer), and long texts are truncated
(`encode_with_truncation` counts what was cut, for the outputs to say so).
"""

import tensorflow as tf

from bert_tf import constants
from bert_tf.text import packing


class TextEncoder(tf.Module):
  """Tokenizes and packs raw text into the encoder's dense int32 inputs."""

  def __init__(self, tokenizer, seq_length, name="text_encoder"):
    """Args:
      tokenizer: a `bert_tf.text.tokenizer.BertWordPieceTokenizer`.
      seq_length: Python int >= 3, the packed length T.
    """
    super().__init__(name=name)
    if seq_length < 3:
      raise ValueError(f"seq_length must be at least 3, got {seq_length}")
    self.tokenizer = tokenizer
    self.seq_length = int(seq_length)
    self.cls_id = tokenizer.cls_id
    self.sep_id = tokenizer.sep_id
    self.pad_id = tokenizer.pad_id
    self.mask_id = tokenizer.mask_id
    self.packer = packing.BertPackInputs.from_tokenizer(tokenizer, self.seq_length)

  def pieces(self, text):
    """WordPiece ids of a batch: `tf.string` [B] -> ragged int64 [B, (pieces)]."""
    return self.tokenizer.tokenize(text).merge_dims(1, 2)

  def pieces_with_offsets(self, text):
    """Pieces of [B] strings and their byte spans in the original strings.

    Returns:
      (ids, begin, end), ragged int64 [B, (words), (pieces)].
    """
    return self.tokenizer.tokenize_with_offsets(text)

  def pack(self, segment_a, segment_b=None):
    """Packs ragged piece ids into dense encoder inputs.

    Args:
      segment_a: ragged int [B, (pieces)] or [B, (words), (pieces)].
      segment_b: optional second segment, like segment_a.

    Returns:
      {input_word_ids, input_mask, input_type_ids}: int32 [B, T]; T = seq_length.
    """
    segments = [segment_a] if segment_b is None else [segment_a, segment_b]
    return self.packer(segments)

  def encode(self, text, text_b=None):
    """Raw `tf.string` [B] (and optionally a second segment [B]) -> int32 [B, T] inputs."""
    return self.encode_with_truncation(text, text_b)[0]

  def encode_with_truncation(self, text, text_b=None):
    """Like `encode`, also counting the pieces that did not fit.

    Returns:
      (inputs, truncated_tokens): the int32 [B, T] encoder inputs, and int32 [B],
      the WordPieces of each row cut by truncation (0 when all fit).
    """
    segments = [self.pieces(tf.convert_to_tensor(text, tf.string))]
    if text_b is not None:
      segments.append(self.pieces(tf.convert_to_tensor(text_b, tf.string)))
    inputs = self.pack(*segments)
    return inputs, truncated_count(inputs, segments)


  def encode_with_masks(self, text):
    """Like `encode` for one segment, with each literal "[MASK]" made the [MASK] token.

    The text between marks is tokenized as usual (the normalizer would otherwise
    split "[MASK]" into "[", "mask", "]").

    Args:
      text: tf.string [B].

    Returns:
      {input_word_ids, input_mask, input_type_ids}: int32 [B, T].
    """
    text = tf.convert_to_tensor(text, tf.string)
    segments = tf.strings.split(text, sep=constants.MASK_TOKEN)
    pieces = self.pieces(segments.flat_values)
    # Each segment is followed by a [MASK], except the last one of each text.
    with_masks = tf.concat([pieces, ragged_column(pieces.nrows(), self.mask_id)], axis=1)
    tokens = tf.RaggedTensor.from_row_splits(with_masks, segments.row_splits)
    return self.pack(tokens.merge_dims(1, 2)[:, :-1])


def truncated_count(inputs, segments):
  """WordPieces of `segments` (ragged [B, (pieces)] each) that `inputs` (packed) lack: int32 [B]."""
  total = tf.cast(segments[0].row_lengths(), tf.int32)
  for segment in segments[1:]:
    total += tf.cast(segment.row_lengths(), tf.int32)
  kept = tf.reduce_sum(inputs[constants.INPUT_MASK], axis=1) - (len(segments) + 1)
  return total - kept


def ragged_column(batch, value, dtype=tf.int64):
  """A ragged [B, 1] tensor holding `value` in every row."""
  return tf.RaggedTensor.from_tensor(tf.fill(tf.stack([batch, 1]), tf.constant(value, dtype)))


def char_offsets(text, byte_offsets):
  """Byte offsets into UTF-8 strings -> character offsets.

  Args:
    text: tf.string [B] or [B, N] broadcastable with byte_offsets.
    byte_offsets: integer [B, ...], offsets at character boundaries.

  Returns:
    int32 of byte_offsets' shape: the number of characters before each offset.
  """
  prefix = tf.strings.substr(text, tf.zeros_like(byte_offsets), byte_offsets)
  return tf.strings.length(prefix, unit="UTF8_CHAR")
