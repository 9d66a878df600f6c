"""Packs WordPiece ids into fixed-length BERT inputs: [CLS] A [SEP] (B [SEP]).

Segments are truncated as the original google-research/bert
`_truncate_seq_pair` does: while the pair is too long, drop the last token of
the longer segment, of B when both are equally long. The result is computed in
closed form with basic TensorFlow ops, so packing runs in `tf.data`, inside
`tf.function` and in SavedModels.

This is the one packer of bert_tf: the fine-tuning featurizers, SQuAD's windows,
feature extraction, the serving signatures and the Hub-style preprocessor all call
`pack_inputs`, so a model is trained on the ids it is served.
"""

import tensorflow as tf

from bert_tf import constants


def truncated_lengths(length_a, length_b, budget):
  """Segment lengths after the original pair truncation.

  Args:
    length_a: integer tensor [B], tokens in segment A.
    length_b: integer tensor [B] (same dtype), tokens in segment B.
    budget: Python int >= 0, the most tokens the two may keep together.

  Returns:
    `(new_a, new_b)`, tensors like the inputs. Repeatedly dropping one token
    from the longer segment (B on ties) until the total fits ends with: the
    shorter one intact and the longer one cut to `budget - shorter` when that
    is at least the shorter length; otherwise A with `ceil(budget / 2)` and B
    with `floor(budget / 2)` tokens.
  """
  over = length_a + length_b > budget
  shorter = tf.minimum(length_a, length_b)
  budget = tf.cast(budget, length_a.dtype)
  longer_cut = 2 * shorter <= budget
  halves_a = (budget + 1) // 2
  halves_b = budget // 2
  new_a = tf.where(
      over,
      tf.where(longer_cut,
               tf.where(length_a > length_b, budget - length_b, length_a),
               halves_a),
      length_a)
  new_b = tf.where(
      over,
      tf.where(longer_cut,
               tf.where(length_a > length_b, length_b, budget - length_a),
               halves_b),
      length_b)
  return new_a, new_b


def _rows(segment):
  """Describes a segment as (values [N], row starts [B], row lengths [B], single).

  All int64 except `values`, which keeps its dtype; `single` is a Python bool,
  True for a 1-D tensor holding one unbatched example.
  """
  if isinstance(segment, tf.RaggedTensor):
    if segment.ragged_rank == 2:
      # The piece-level row splits of each example's first and last word.
      splits = tf.gather(segment.values.row_splits, segment.row_splits)
    elif segment.ragged_rank == 1:
      splits = segment.row_splits
    else:
      raise ValueError(
          "A segment must be [B, (pieces)] or [B, (words), (pieces)], got "
          f"ragged rank {segment.ragged_rank}")
    splits = tf.cast(splits, tf.int64)
    return segment.flat_values, splits[:-1], splits[1:] - splits[:-1], False
  segment = tf.convert_to_tensor(segment)
  if segment.shape.rank == 1:
    length = tf.size(segment, out_type=tf.int64)
    return segment, tf.zeros([1], tf.int64), tf.reshape(length, [1]), True
  if segment.shape.rank == 2:
    shape = tf.shape(segment, out_type=tf.int64)
    starts = tf.range(shape[0], dtype=tf.int64) * shape[1]
    return (tf.reshape(segment, [-1]), starts,
            tf.fill(shape[:1], shape[1]), False)
  raise ValueError(
      "A segment must be a ragged [B, (pieces)] or [B, (words), (pieces)], a "
      f"dense [B, T] or a single [pieces] tensor; got shape {segment.shape}")


def _gather_rows(values, starts, offsets):
  """values[starts[b] + offsets[b, j]] as int32; offsets may run out of range."""
  values = tf.concat([tf.cast(values, tf.int32), tf.zeros([1], tf.int32)], 0)
  index = tf.expand_dims(starts, 1) + offsets
  index = tf.clip_by_value(index, 0, tf.size(values, out_type=tf.int64) - 1)
  return tf.gather(values, index)


def pack_inputs(segments, seq_length, cls_id, sep_id, pad_id=0):
  """Packs one or two segments into `seq_length` BERT input ids.

  Args:
    segments: a tensor or a list/tuple of one or two tensors of integer
      WordPiece ids (no special tokens), each a `tf.RaggedTensor`
      [B, (pieces)] or [B, (words), (pieces)] (words are merged), a dense
      [B, T] tensor (all T ids used), or a 1-D [pieces] tensor for a single
      unbatched example. All segments must share the batch size.
    seq_length: Python int, the packed length.
    cls_id, sep_id, pad_id: Python ints, the ids of [CLS], [SEP], [PAD] (take
      them from the tokenizer's `cls_id`, `sep_id`, `pad_id`).

  Returns:
    A dict with `constants.INPUT_WORD_IDS`, `constants.INPUT_MASK` and
    `constants.INPUT_TYPE_IDS`, each `tf.int32` [B, seq_length] (or
    [seq_length] for unbatched input): the ids `[CLS] A [SEP] B [SEP]` padded
    with `pad_id`, 1 on real tokens and 0 on padding, and 0 on `[CLS] A [SEP]`
    and 1 on `B [SEP]`.

  Raises:
    ValueError: no or more than two segments, or `seq_length` too small to hold
      the special tokens.
  """
  if not isinstance(segments, (list, tuple)):
    segments = [segments]
  if not 1 <= len(segments) <= 2:
    raise ValueError(f"Expected 1 or 2 segments, got {len(segments)}")
  num_special = len(segments) + 1
  if seq_length < num_special:
    raise ValueError(
        f"seq_length={seq_length} cannot hold the {num_special} special tokens "
        f"of {len(segments)} segment(s)")
  rows = [_rows(s) for s in segments]
  single = rows[0][3]
  if any(r[3] != single for r in rows):
    raise ValueError("Segments must be all batched or all single examples")
  budget = seq_length - num_special
  if len(rows) == 1:
    length_a = tf.minimum(rows[0][2], budget)
    length_b = tf.zeros_like(length_a)
  else:
    length_a, length_b = truncated_lengths(rows[0][2], rows[1][2], budget)
  length_a = tf.expand_dims(length_a, 1)
  length_b = tf.expand_dims(length_b, 1)

  # Output position p holds [CLS] at 0, A at 1..la, [SEP] at la+1, then, for
  # pairs, B at la+2..la+lb+1 and [SEP] at la+lb+2; padding after that.
  position = tf.expand_dims(tf.range(seq_length, dtype=tf.int64), 0)
  end_a = length_a + 1
  word_ids = tf.where(
      position == 0, tf.constant(cls_id, tf.int32),
      tf.where(position < end_a,
               _gather_rows(rows[0][0], rows[0][1], position - 1),
               tf.constant(sep_id, tf.int32)))
  num_tokens = end_a + 1
  type_ids = tf.zeros_like(word_ids)
  if len(rows) == 2:
    end_b = end_a + 1 + length_b
    in_b = position > end_a
    word_ids = tf.where(
        in_b,
        tf.where(position < end_b,
                 _gather_rows(rows[1][0], rows[1][1], position - end_a - 1),
                 tf.constant(sep_id, tf.int32)),
        word_ids)
    type_ids = tf.cast(in_b, tf.int32)
    num_tokens = end_b + 1
  is_token = position < num_tokens
  outputs = {
      constants.INPUT_WORD_IDS: tf.where(
          is_token, word_ids, tf.constant(pad_id, tf.int32)),
      constants.INPUT_MASK: tf.cast(is_token, tf.int32),
      constants.INPUT_TYPE_IDS: tf.where(is_token, type_ids, 0),
  }
  if single:
    outputs = {k: v[0] for k, v in outputs.items()}
  return outputs


class BertPackInputs(tf.Module):
  """Packs segments of WordPiece ids into fixed-length BERT encoder inputs.

  A `tf.Module` holding `seq_length` and the special ids; calling it runs
  `pack_inputs`. Usable in `tf.data` maps, `tf.function`s and SavedModels.
  """

  def __init__(self, seq_length, cls_id, sep_id, pad_id=0,
               name="bert_pack_inputs"):
    """Stores the packing settings.

    Args:
      seq_length: Python int, the packed length (>= 2; >= 3 for pairs).
      cls_id, sep_id, pad_id: Python ints, ids of [CLS], [SEP] and [PAD].
      name: module name.
    """
    super().__init__(name=name)
    if seq_length < 2:
      raise ValueError(f"seq_length must be >= 2, got {seq_length}")
    self.seq_length = int(seq_length)
    self.cls_id = int(cls_id)
    self.sep_id = int(sep_id)
    self.pad_id = int(pad_id)

  @classmethod
  def from_tokenizer(cls, tokenizer, seq_length, name="bert_pack_inputs"):
    """Takes the special ids from a `BertWordPieceTokenizer`."""
    return cls(seq_length, cls_id=tokenizer.cls_id, sep_id=tokenizer.sep_id,
               pad_id=tokenizer.pad_id, name=name)

  def get_config(self):
    return dict(seq_length=self.seq_length, cls_id=self.cls_id,
                sep_id=self.sep_id, pad_id=self.pad_id)

  def __call__(self, segments):
    """See `pack_inputs`: one or two id segments -> dict of int32 inputs."""
    return pack_inputs(segments, self.seq_length, self.cls_id, self.sep_id,
                       self.pad_id)
