"""Serving a token tagger: entities with their type and character offsets.

The text is read as CoNLL files are: its words are the whitespace-separated ones
(Python's str.split()), each tokenized on its own ([UNK] for a word without pieces),
and each word takes the tag predicted at its first WordPiece, as in training and
evaluation. A text longer than seq_length - 2 pieces is cut into the windows of
evaluation (the tagging record kind's `tagging_dataset`: seq_length - 2 pieces,
`window_stride` apart), all windows of the batch run as one batch, and each word is
tagged in the window giving its first piece the most context
(`bert_tf.text.windows`), so every word gets the tag evaluation gives it. Tags named
`B-X` / `I-X` (IOB1 or IOB2) form entities of type X: an entity starts at a `B-X`, or
at an `I-X` that does not follow a word of type X, and goes on over the `I-X` words
after it. A tag without such a prefix is a type of its own; `O` is outside.
"""

import tensorflow as tf

from bert_tf.data.pipelines import featurizers
from bert_tf.export import label_table
from bert_tf.export.classifier_serving import PROBABILITIES
from bert_tf.export import serving_module
from bert_tf.export import text_encoding
from bert_tf.metrics.tagging import tag_types
from bert_tf.models.bert_classifier import LOGITS
from bert_tf.text import normalization
from bert_tf.text import windows

LABEL_IDS = "label_ids"
LABEL_NAMES = "label_names"
ENTITY_COUNT = "entity_count"
ENTITY_TYPES = "entity_types"
ENTITY_START = "entity_start"
ENTITY_END = "entity_end"
ENTITY_TEXT = "entity_text"
NUM_WINDOWS = "num_windows"


@serving_module.register_serving("tagging")
class TaggingServing(serving_module.ServingModule):
  """A BertTokenClassifier served as an entity recognizer.

  Outputs of serving_default and serve_examples (E = most entities in the batch):
    entity_count: int32 [B].
    entity_types: string [B, E] ("" pads).
    entity_start, entity_end: int32 [B, E], character offsets into the text, end
      exclusive (-1 pads).
    entity_text: string [B, E] ("" pads).
    num_windows: int32 [B], windows the text was read in (1 when it fits).
  Outputs of serve_token_ids, at every token: logits float32 [B, T, C] (what
  transformers' BertForTokenClassification gives), probabilities float32 [B, T, C]
  (their softmax), label_ids int32 [B, T] and label_names string [B, T] (the tag
  predicted).
  """

  answer_outputs = (frozenset({ENTITY_COUNT, ENTITY_TYPES, ENTITY_TEXT, ENTITY_START,
                               ENTITY_END}),)

  @staticmethod
  def answer(outputs, row):
    text = serving_module.text_of
    return {"entities": [{"type": text(outputs[ENTITY_TYPES][row, e]),
                          "text": text(outputs[ENTITY_TEXT][row, e]),
                          "start": int(outputs[ENTITY_START][row, e]),
                          "end": int(outputs[ENTITY_END][row, e])}
                         for e in range(int(outputs[ENTITY_COUNT][row]))]}

  @staticmethod
  def describe_answer(answer):
    return ["  entities: " + (", ".join(
        f"{e['type']} \"{e['text']}\" ({e['start']}-{e['end']})" for e in answer["entities"])
                              or "none")]

  def __init__(self, token_classifier, text_encoder, label_names, window_stride=64,
               name="tagging_serving"):
    super().__init__(token_classifier, text_encoder, (serving_module.TEXT,), name=name)
    if len(label_names) != token_classifier.num_classes:
      raise ValueError(f"{len(label_names)} label names for {token_classifier.num_classes} "
                       "classes")
    if window_stride < 1:
      raise ValueError(f"window_stride must be positive, got {window_stride}")
    self.labels = label_table.LabelTable(label_names)
    self.entity_types, self.type_index, self.begins = tag_types(label_names)
    self.window_stride = int(window_stride)
    self.max_tokens = self.seq_length - 2

  def predict_token_ids(self, inputs):
    logits = tf.cast(self.call_model(inputs)[LOGITS], tf.float32)
    ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return {LOGITS: logits, PROBABILITIES: tf.nn.softmax(logits, axis=-1), LABEL_IDS: ids,
            LABEL_NAMES: self.labels.lookup(ids)}

  def _windows(self, text):
    """Splits, tokenizes and cuts each text into packed windows.

    Returns:
      dict: inputs (int32 [N, T] encoder inputs of all windows, text by text), begin
      and end (ragged int64 [B, (words)], each word's byte span), word_first (int64
      [W], each word's first piece in its text), num_pieces and num_windows (int64
      [B], of each text).
    """
    words, begin, end = normalization.split_whitespace_with_offsets(
        tf.convert_to_tensor(text, tf.string))
    pieces = featurizers.word_pieces(
        self.text_encoder.pieces(words.flat_values), self.text_encoder.tokenizer.unk_id)
    text_pieces = tf.RaggedTensor.from_row_splits(pieces, words.row_splits).merge_dims(1, 2)
    num_pieces = text_pieces.row_lengths()
    w, num_windows = windows.sequence_windows(num_pieces, self.max_tokens, self.window_stride)
    index = tf.ragged.range(w["piece_start"], w["piece_start"] + w["window_length"])
    window_pieces = index.with_flat_values(
        tf.gather(text_pieces.flat_values, index.flat_values))
    word_first = pieces.row_starts() - tf.gather(text_pieces.row_starts(),
                                                 words.value_rowids())
    return {"inputs": self.text_encoder.pack(window_pieces), "begin": begin, "end": end,
            "word_first": word_first, "num_pieces": num_pieces, "num_windows": num_windows}

  def encode_text(self, texts):
    """Every window of every text: int32 [N, T] encoder inputs."""
    return self._windows(texts[serving_module.TEXT])["inputs"]

  def predict_text(self, texts):
    text = tf.convert_to_tensor(texts[serving_module.TEXT], tf.string)
    w = self._windows(text)
    tags = self.predict_token_ids(w["inputs"])[LABEL_IDS]
    begin, end = w["begin"], w["end"]
    # Each word's tag: at its first piece, in the window giving that piece the most context.
    word_row = begin.value_rowids()
    of_text = lambda name: tf.gather(w[name], word_row)  # pylint: disable=unnecessary-lambda-assignment
    stride = tf.constant(min(self.max_tokens, self.window_stride), tf.int64)
    owner = windows.max_context_window(
        w["word_first"], of_text("num_windows"), stride,
        tf.constant(self.max_tokens, tf.int64), of_text("num_pieces"),
        windows.max_overlap(self.max_tokens, self.window_stride))
    window_row = tf.gather(tf.cumsum(w["num_windows"], exclusive=True), word_row) + owner
    position = w["word_first"] - owner * stride + 1
    word_tag = tf.gather_nd(tags, tf.cast(tf.stack([window_row, position], 1), tf.int32))
    word_type = tf.gather(tf.constant(self.type_index, tf.int32), word_tag)
    word_begins = tf.gather(tf.constant(self.begins, tf.bool), word_tag)

    def by_row(values):
      return tf.RaggedTensor.from_row_splits(values, begin.row_splits)

    # Neighbours of each word in the flat word list; none across rows.
    word_index = tf.range(tf.size(word_row, out_type=tf.int64))
    is_first = tf.equal(word_index, tf.gather(begin.row_starts(), word_row))
    is_last = tf.equal(word_index + 1, tf.gather(begin.row_limits(), word_row))
    # Concatenating before slicing keeps the lengths right for a batch without words.
    previous = tf.where(is_first, -1, tf.concat([[-1], word_type], 0)[:-1])
    following = tf.where(is_last, -1, tf.concat([word_type, [-1]], 0)[1:])
    following_begins = tf.logical_and(tf.logical_not(is_last),
                                      tf.concat([word_begins, [False]], 0)[1:])
    inside = word_type >= 0
    starts = tf.logical_and(inside, tf.logical_or(word_begins, previous != word_type))
    ends = tf.logical_and(inside, tf.logical_or(following != word_type, following_begins))
    entity_type = tf.ragged.boolean_mask(by_row(word_type), by_row(starts))
    entity_begin = tf.ragged.boolean_mask(begin, by_row(starts))
    entity_end = tf.ragged.boolean_mask(end, by_row(ends))
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
        NUM_WINDOWS: tf.cast(w["num_windows"], tf.int32),
        ENTITY_TYPES: types,
        ENTITY_START: tf.where(valid, text_encoding.char_offsets(row_text, safe_begin), -1),
        ENTITY_END: tf.where(valid, text_encoding.char_offsets(row_text, safe_end), -1),
        ENTITY_TEXT: tf.where(valid, tf.strings.substr(row_text, safe_begin,
                                                       safe_end - safe_begin), ""),
    }
