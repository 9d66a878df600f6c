"""Serving a token tagger: entities with their type and character offsets.

Each word takes the tag predicted at its first WordPiece, as in training. Tags
named `B-X` / `I-X` (IOB1 or IOB2) form entities of type X: an entity starts at
a `B-X`, or at an `I-X` that does not follow a word of type X, and goes on over
the `I-X` words after it. A tag without such a prefix is a type of its own; `O`
is outside. Words past the model's length (truncated text) get no tag.
"""

import tensorflow as tf

from bert_tf.export import label_table
from bert_tf.export import serving_module
from bert_tf.export import text_encoding
from bert_tf.models.bert_classifier import LOGITS

LABEL_IDS = "label_ids"
LABEL_NAMES = "label_names"
ENTITY_COUNT = "entity_count"
ENTITY_TYPES = "entity_types"
ENTITY_START = "entity_start"
ENTITY_END = "entity_end"
ENTITY_TEXT = "entity_text"
TRUNCATED_TOKENS = "truncated_tokens"
OUTSIDE = "O"


def tag_types(label_names):
  """(entity types, type index per label (-1 for O), starts-an-entity per label)."""
  types, type_index, begins = [], [], []
  for name in label_names:
    if name == OUTSIDE:
      type_index.append(-1)
      begins.append(False)
      continue
    prefix, _, rest = name.partition("-")
    entity_type = rest if prefix in ("B", "I") and rest else name
    if entity_type not in types:
      types.append(entity_type)
    type_index.append(types.index(entity_type))
    begins.append(prefix == "B" and bool(rest))
  return tuple(types), tuple(type_index), tuple(begins)


@serving_module.register_serving("tagging")
class TaggingServing(serving_module.ServingModule):
  """A BertTokenClassifier served as an entity recognizer.

  Outputs of serving_default and serve_examples (E = most entities in the batch):
    entity_count: int32 [B].
    entity_types: string [B, E] ("" pads).
    entity_start, entity_end: int32 [B, E], character offsets into the text, end
      exclusive (-1 pads).
    entity_text: string [B, E] ("" pads).
    truncated_tokens: int32 [B], WordPieces past seq_length, whose words get no
      tag (0 when all fit).
  Outputs of serve_token_ids: label_ids int32 [B, T], label_names string [B, T],
  the tag predicted at every token.
  """

  def __init__(self, token_classifier, text_encoder, label_names, name="tagging_serving"):
    super().__init__(token_classifier, text_encoder, (serving_module.TEXT,), name=name)
    if len(label_names) != token_classifier.num_classes:
      raise ValueError(f"{len(label_names)} label names for {token_classifier.num_classes} "
                       "classes")
    self.labels = label_table.LabelTable(label_names)
    self.entity_types, self.type_index, self.begins = tag_types(label_names)

  def predict_token_ids(self, inputs):
    logits = tf.cast(self.call_model(inputs)[LOGITS], tf.float32)
    ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return {LABEL_IDS: ids, LABEL_NAMES: self.labels.lookup(ids)}

  def predict_text(self, texts):
    text = tf.convert_to_tensor(texts[serving_module.TEXT], tf.string)
    ids, begin, end = self.text_encoder.pieces_with_offsets(text)
    pieces = ids.merge_dims(1, 2)
    packed = self.text_encoder.pack(pieces)
    tags = self.predict_token_ids(packed)[LABEL_IDS]
    # Per word: its row, first piece (position in the packed sequence) and byte span.
    word_first = ids.values.row_starts()
    word_last = ids.values.row_limits() - 1
    word_row = ids.value_rowids()
    first_piece = word_first - tf.gather(pieces.row_starts(), word_row)
    kept = first_piece < self.seq_length - 2
    position = tf.cast(first_piece + 1, tf.int32)
    word_tag = tf.gather_nd(tags, tf.stack([tf.cast(word_row, tf.int32),
                                            tf.minimum(position, self.seq_length - 1)], 1))
    word_type = tf.gather(tf.constant(self.type_index, tf.int32), word_tag)
    word_begins = tf.gather(tf.constant(self.begins, tf.bool), word_tag)
    word_type = tf.where(kept, word_type, -1)

    def by_row(values):
      return tf.RaggedTensor.from_row_splits(values, ids.row_splits)

    # Neighbours of each word in the flat word list; none across rows.
    word_index = tf.range(tf.size(word_row, out_type=tf.int64))
    is_first = tf.equal(word_index, tf.gather(ids.row_starts(), word_row))
    is_last = tf.equal(word_index + 1, tf.gather(ids.row_limits(), word_row))
    # Concatenating before slicing keeps the lengths right for a batch without words.
    previous = tf.where(is_first, -1, tf.concat([[-1], word_type], 0)[:-1])
    following = tf.where(is_last, -1, tf.concat([word_type, [-1]], 0)[1:])
    following_begins = tf.logical_and(tf.logical_not(is_last),
                                      tf.concat([word_begins, [False]], 0)[1:])
    inside = word_type >= 0
    starts = tf.logical_and(inside, tf.logical_or(word_begins, previous != word_type))
    ends = tf.logical_and(inside, tf.logical_or(following != word_type, following_begins))
    begin_bytes = tf.gather(begin.flat_values, word_first)
    end_bytes = tf.gather(end.flat_values, word_last)
    entity_type = tf.ragged.boolean_mask(by_row(word_type), by_row(starts))
    entity_begin = tf.ragged.boolean_mask(by_row(begin_bytes), by_row(starts))
    entity_end = tf.ragged.boolean_mask(by_row(end_bytes), by_row(ends))
    type_names = tf.constant(self.entity_types + ("",), tf.string)
    types = tf.gather(type_names, entity_type.to_tensor(default_value=len(self.entity_types)))
    begin_dense = tf.cast(entity_begin.to_tensor(default_value=-1), tf.int32)
    end_dense = tf.cast(entity_end.to_tensor(default_value=-1), tf.int32)
    valid = begin_dense >= 0
    row_text = tf.broadcast_to(text[:, tf.newaxis], tf.shape(begin_dense))
    safe_begin = tf.maximum(begin_dense, 0)
    safe_end = tf.maximum(end_dense, 0)
    return {
        ENTITY_COUNT: tf.cast(entity_type.row_lengths(), tf.int32),
        TRUNCATED_TOKENS: text_encoding.truncated_count(packed, [pieces]),
        ENTITY_TYPES: types,
        ENTITY_START: tf.where(valid, text_encoding.char_offsets(row_text, safe_begin), -1),
        ENTITY_END: tf.where(valid, text_encoding.char_offsets(row_text, safe_end), -1),
        ENTITY_TEXT: tf.where(valid, tf.strings.substr(row_text, safe_begin,
                                                       safe_end - safe_begin), ""),
    }
