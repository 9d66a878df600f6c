"""Serving span question answering: the answer's text and character offsets.

The question is cut to `max_query_length` pieces and the context to what is
left of the sequence; answers are searched in that one window only (a context
longer than the window is truncated, not split into several windows).
"""

import tensorflow as tf

from bert_tf import constants
from bert_tf.export import serving_module
from bert_tf.export import text_encoding
from bert_tf.models.bert_span_labeler import END_LOGITS, START_LOGITS

START_INDEX = "start_index"
END_INDEX = "end_index"
SCORE = "score"
NULL_SCORE = "null_score"
HAS_ANSWER = "has_answer"
ANSWER_TEXT = "answer_text"
ANSWER_START = "answer_start"
ANSWER_END = "answer_end"

_NEG = -1e9


@serving_module.register_serving("squad")
class SquadServing(serving_module.ServingModule):
  """A BertSpanLabeler served on (question, context) pairs.

  Outputs of every signature:
    start_index, end_index: int32 [B], the answer's first and last token (0 when
      there is none).
    score: float32 [B], start logit + end logit of the best span.
    null_score: float32 [B], the [CLS] start + end logits.
    has_answer: bool [B]; False when the context window is empty, or (SQuAD 2.0)
      when null_score - score > null_score_diff_threshold.
  Raw-text signatures also give:
    answer_text: string [B] ("" when there is no answer).
    answer_start, answer_end: int32 [B], character offsets of the answer in the
      context, end exclusive (-1 when there is no answer).
  """

  def __init__(self, span_labeler, text_encoder, max_query_length=64, max_answer_length=30,
               version_2_with_negative=False, null_score_diff_threshold=0.0,
               name="squad_serving"):
    super().__init__(span_labeler, text_encoder,
                     (serving_module.QUESTION, serving_module.CONTEXT), name=name)
    self.max_query_length = int(max_query_length)
    self.max_answer_length = int(max_answer_length)
    self.version_2_with_negative = bool(version_2_with_negative)
    self.null_score_diff_threshold = float(null_score_diff_threshold)

  def predict_token_ids(self, inputs):
    outputs = self.call_model(inputs)
    start_logits = tf.cast(outputs[START_LOGITS], tf.float32)
    end_logits = tf.cast(outputs[END_LOGITS], tf.float32)
    mask = tf.cast(inputs[constants.INPUT_MASK], tf.int32)
    # Context tokens have type 1; the last real token is the closing [SEP].
    length = tf.reduce_sum(mask, axis=1, keepdims=True)
    positions = tf.range(tf.shape(mask)[1])[tf.newaxis, :]
    in_context = tf.logical_and(tf.equal(tf.cast(inputs[constants.INPUT_TYPE_IDS], tf.int32), 1),
                                positions < length - 1)
    return self._best_span(start_logits, end_logits, in_context)

  def _best_span(self, start_logits, end_logits, in_context):
    seq_length = tf.shape(start_logits)[1]
    start = tf.where(in_context, start_logits, _NEG)
    end = tf.where(in_context, end_logits, _NEG)
    scores = start[:, :, tf.newaxis] + end[:, tf.newaxis, :]
    # Allowed spans: start <= end < start + max_answer_length.
    offset = tf.range(seq_length)[tf.newaxis, :] - tf.range(seq_length)[:, tf.newaxis]
    allowed = tf.logical_and(offset >= 0, offset < self.max_answer_length)
    scores = tf.where(allowed[tf.newaxis], scores, 2 * _NEG)
    flat = tf.reshape(scores, [tf.shape(scores)[0], -1])
    best = tf.argmax(flat, axis=1, output_type=tf.int32)
    score = tf.reduce_max(flat, axis=1)
    has_context = tf.reduce_any(in_context, axis=1)
    null_score = start_logits[:, 0] + end_logits[:, 0]
    has_answer = has_context
    if self.version_2_with_negative:
      has_answer = tf.logical_and(
          has_answer, null_score - score <= self.null_score_diff_threshold)
    start_index = tf.where(has_answer, best // seq_length, 0)
    end_index = tf.where(has_answer, best % seq_length, 0)
    return {
        START_INDEX: start_index,
        END_INDEX: end_index,
        SCORE: tf.where(has_context, score, 0.0),
        NULL_SCORE: null_score,
        HAS_ANSWER: has_answer,
    }

  def _encode(self, texts):
    """(inputs, question pieces, context piece begin and end byte offsets)."""
    question = tf.convert_to_tensor(texts[serving_module.QUESTION], tf.string)
    context = tf.convert_to_tensor(texts[serving_module.CONTEXT], tf.string)
    encoder = self.text_encoder
    question_pieces = encoder.pieces(question)[:, :self.max_query_length]
    ids, begin, end = encoder.pieces_with_offsets(context)
    ids, begin, end = (x.merge_dims(1, 2) for x in (ids, begin, end))
    budget = encoder.seq_length - 3 - question_pieces.row_lengths()
    kept = tf.minimum(ids.row_lengths(), tf.maximum(budget, 0))
    context_pieces = text_encoding.keep_prefix(ids, kept)
    return encoder.pack(question_pieces, context_pieces), question_pieces, begin, end

  def encode_text(self, texts):
    """Question cut to max_query_length pieces, context to the rest of the window."""
    return self._encode(texts)[0]

  def predict_text(self, texts):
    context = tf.convert_to_tensor(texts[serving_module.CONTEXT], tf.string)
    inputs, question_pieces, begin, end = self._encode(texts)
    result = self.predict_token_ids(inputs)
    # Token p of the context window is context piece p - (question length + 2).
    first_context = tf.cast(question_pieces.row_lengths(), tf.int32) + 2
    has_answer = result[HAS_ANSWER]
    row_starts = tf.cast(begin.row_starts(), tf.int32)
    last_piece = tf.maximum(tf.size(begin.flat_values) - 1, 0)

    def byte_offset(values, index):
      flat_index = tf.clip_by_value(row_starts + index - first_context, 0, last_piece)
      padded = tf.concat([values.flat_values, tf.zeros([1], values.flat_values.dtype)], 0)
      return tf.where(has_answer, tf.cast(tf.gather(padded, flat_index), tf.int32), 0)

    start_byte = byte_offset(begin, result[START_INDEX])
    end_byte = byte_offset(end, result[END_INDEX])
    result[ANSWER_TEXT] = tf.where(
        has_answer, tf.strings.substr(context, start_byte, end_byte - start_byte), "")
    result[ANSWER_START] = tf.where(has_answer, text_encoding.char_offsets(context, start_byte),
                                    -1)
    result[ANSWER_END] = tf.where(has_answer, text_encoding.char_offsets(context, end_byte), -1)
    return result
