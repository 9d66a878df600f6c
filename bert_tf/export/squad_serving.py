"""Serving span question answering over every window of the context.

`serving_default` and `serve_examples` answer as SQuAD evaluation does
(`bert_tf.data.pipelines.squad_features.convert_examples_to_features`, then
`bert_tf.data.task_files.squad_postprocess.postprocess`): the question is cut to
`max_query_length` pieces; the context's pieces are cut into windows of
`seq_length - 3 - question length` pieces starting `doc_stride` pieces apart
(`doc_windows`), each packed as `[CLS] question [SEP] window [SEP]` by the one
packer; all windows of the batch run through the model as one batch. In each
window the `n_best_size` best start and end positions make candidate spans
that lie in the window's context, end after they start, are at most
`max_answer_length` pieces long and start where that window gives the piece
its most context (`is_max_context`); the best candidate over the windows by
start + end logit wins, ties going to the earlier window and candidate, as
evaluation's stable sort orders them. Scores are summed in float64 like
evaluation's. For SQuAD 2.0 the null score is the smallest [CLS] start + end
logit over the windows and the answer is empty when it exceeds the best span's
score by more than `null_score_diff_threshold`.

`serve_token_ids` takes packed windows, one per row, and answers each row as
a one-window example.
"""

import tensorflow as tf

from bert_tf import constants
from bert_tf.data.task_files.squad_postprocess import NO_SPAN_NULL_ODDS
from bert_tf.export import serving_module
from bert_tf.export import text_encoding
from bert_tf.models.bert_span_labeler import END_LOGITS, START_LOGITS
from bert_tf.text import windows

START_INDEX = "start_index"
END_INDEX = "end_index"
WINDOW_INDEX = "window_index"
NUM_WINDOWS = "num_windows"
SCORE = "score"
NULL_SCORE = "null_score"
HAS_ANSWER = "has_answer"
ANSWER_TEXT = "answer_text"
ANSWER_START = "answer_start"
ANSWER_END = "answer_end"


def np_inf():
  return tf.constant(float("inf"), tf.float64)


def first_argmax(values, valid):
  """(max, first index of it) along the last axis of float64 [..., M], over `valid`."""
  values = tf.where(valid, values, -np_inf())
  best = tf.reduce_max(values, axis=-1)
  size = tf.shape(values, out_type=tf.int64)[-1]
  index = tf.range(size, dtype=tf.int64)
  first = tf.reduce_min(tf.where(valid & (values == best[..., tf.newaxis]), index, size), axis=-1)
  return best, tf.minimum(first, tf.maximum(size - 1, 0))


@serving_module.register_serving("squad")
class SquadServing(serving_module.ServingModule):
  """A BertSpanLabeler served on (question, context) pairs.

  Outputs of every signature (B questions; for serve_token_ids, B windows):
    start_index, end_index: int32 [B], the answer's first and last token in its
      window (0 when there is none).
    window_index: int32 [B], the window holding the answer (0 when there is none).
    num_windows: int32 [B], windows the context was cut into (1 for serve_token_ids).
    score: float32 [B], start logit + end logit of the best span (0 when none).
    null_score: float32 [B], the smallest [CLS] start + end logit over the windows.
    has_answer: bool [B]; False when no candidate span exists, or (SQuAD 2.0)
      when null_score - score > null_score_diff_threshold.
    start_logits, end_logits: float32 [B, T], the model's logits over the tokens of
      the answer's window (of the first window when there is none; what
      transformers' BertForQuestionAnswering gives for that window).
  Raw-text signatures also give:
    answer_text: string [B] ("" when there is no answer).
    answer_start, answer_end: int32 [B], character offsets of the answer in the
      context, end exclusive (-1 when there is no answer).
  """

  answer_outputs = (frozenset({HAS_ANSWER, ANSWER_TEXT, ANSWER_START, ANSWER_END, SCORE,
                               NULL_SCORE}),)

  @staticmethod
  def answer(outputs, row):
    return {"has_answer": bool(outputs[HAS_ANSWER][row]),
            "answer": serving_module.text_of(outputs[ANSWER_TEXT][row]),
            "start": int(outputs[ANSWER_START][row]), "end": int(outputs[ANSWER_END][row]),
            "score": float(outputs[SCORE][row]), "null_score": float(outputs[NULL_SCORE][row])}

  @staticmethod
  def describe_answer(answer):
    if not answer["has_answer"]:
      return [f"  no answer (null score {answer['null_score']:.3f}, best span "
              f"{answer['score']:.3f})"]
    return [f"  answer: \"{answer['answer']}\" (characters {answer['start']}-"
            f"{answer['end']} of the context, score {answer['score']:.3f})"]

  def __init__(self, span_labeler, text_encoder, max_query_length=64, max_answer_length=30,
               version_2_with_negative=False, null_score_diff_threshold=0.0,
               doc_stride=128, n_best_size=20, name="squad_serving"):
    super().__init__(span_labeler, text_encoder,
                     (serving_module.QUESTION, serving_module.CONTEXT), name=name)
    if min(max_query_length, max_answer_length, doc_stride, n_best_size) < 1:
      raise ValueError("max_query_length, max_answer_length, doc_stride and n_best_size "
                       "must be positive")
    self.max_query_length = int(max_query_length)
    self.max_answer_length = int(max_answer_length)
    self.version_2_with_negative = bool(version_2_with_negative)
    self.null_score_diff_threshold = float(null_score_diff_threshold)
    self.doc_stride = int(doc_stride)
    self.n_best_size = int(n_best_size)

  # ----- the span search shared by both kinds of input -----
  def _search(self, outputs, in_context, max_context, num_windows):
    """The best span of each example over its windows.

    Args:
      outputs: the model's outputs on N windows (start/end logits [N, T]).
      in_context, max_context: bool [N, T], context positions, and those whose
        piece has its most context in this window.
      num_windows: int64 [B], windows per example (N in all, in example order).

    Returns:
      dict of [B] tensors: window (int64, within the example), start, end
      (int32), score, null_score (float64), has_span and has_answer (bool).
    """
    start_logits = tf.cast(outputs[START_LOGITS], tf.float32)
    end_logits = tf.cast(outputs[END_LOGITS], tf.float32)
    # Windows of serve_token_ids may be shorter than seq_length, and than n_best_size.
    k = tf.minimum(self.n_best_size, tf.shape(start_logits)[1])
    # top_k orders ties by lower index first, as evaluation's stable argsort.
    start_value, start_index = tf.math.top_k(start_logits, k=k)
    end_value, end_index = tf.math.top_k(end_logits, k=k)
    valid_start = tf.gather(in_context & max_context, start_index, batch_dims=1)
    valid_end = tf.gather(in_context, end_index, batch_dims=1)
    length = end_index[:, tf.newaxis, :] - start_index[:, :, tf.newaxis]
    valid = (valid_start[:, :, tf.newaxis] & valid_end[:, tf.newaxis, :] & (length >= 0)
             & (length < self.max_answer_length))
    scores = (tf.cast(start_value, tf.float64)[:, :, tf.newaxis]
              + tf.cast(end_value, tf.float64)[:, tf.newaxis, :])
    n = tf.shape(scores)[0]
    # Candidates in evaluation's order: start rank, then end rank.
    window_score, window_best = first_argmax(tf.reshape(scores, [n, k * k]),
                                             tf.reshape(valid, [n, k * k]))
    null = tf.cast(start_logits[:, 0], tf.float64) + tf.cast(end_logits[:, 0], tf.float64)

    def per_example(values, default):
      ragged = tf.RaggedTensor.from_row_lengths(values, num_windows)
      return ragged.to_tensor(default_value=default)

    example_scores = per_example(window_score, -np_inf())
    best, window = first_argmax(example_scores, example_scores > -np_inf())
    has_span = best > -np_inf()
    # Without a span, the logits given are the example's first window's.
    window = tf.where(has_span, window, 0)
    null_score = -tf.reduce_max(per_example(-null, -np_inf()), axis=1)
    flat = tf.cast(tf.RaggedTensor.from_row_lengths(tf.range(n), num_windows).row_starts(),
                   tf.int64) + window
    flat = tf.minimum(flat, tf.cast(tf.maximum(n - 1, 0), tf.int64))
    pair = tf.gather(window_best, flat)
    k64 = tf.cast(k, tf.int64)
    start = tf.gather(tf.gather(start_index, flat), pair // k64, batch_dims=1)
    end = tf.gather(tf.gather(end_index, flat), pair % k64, batch_dims=1)
    has_answer = has_span
    if self.version_2_with_negative:
      odds = tf.where(has_span, null_score - best, NO_SPAN_NULL_ODDS)
      has_answer = has_span & tf.logical_not(odds > self.null_score_diff_threshold)
    return {"window": tf.where(has_answer, window, 0), "flat": flat,
            "start": tf.where(has_answer, start, 0), "end": tf.where(has_answer, end, 0),
            "score": tf.where(has_span, best, 0.0), "null_score": null_score,
            "has_answer": has_answer, "start_logits": tf.gather(start_logits, flat),
            "end_logits": tf.gather(end_logits, flat)}

  @staticmethod
  def _outputs(found, num_windows):
    return {
        START_INDEX: found["start"],
        END_INDEX: found["end"],
        WINDOW_INDEX: tf.cast(found["window"], tf.int32),
        NUM_WINDOWS: tf.cast(num_windows, tf.int32),
        SCORE: tf.cast(found["score"], tf.float32),
        NULL_SCORE: tf.cast(found["null_score"], tf.float32),
        HAS_ANSWER: found["has_answer"],
        START_LOGITS: found["start_logits"],
        END_LOGITS: found["end_logits"],
    }

  def predict_token_ids(self, inputs):
    outputs = self.call_model(inputs)
    mask = tf.cast(inputs[constants.INPUT_MASK], tf.int32)
    # Context tokens have type 1; the last real token is the closing [SEP].
    length = tf.reduce_sum(mask, axis=1, keepdims=True)
    positions = tf.range(tf.shape(mask)[1])[tf.newaxis, :]
    in_context = tf.logical_and(tf.equal(tf.cast(inputs[constants.INPUT_TYPE_IDS], tf.int32), 1),
                                positions < length - 1)
    num_windows = tf.ones(tf.shape(mask)[:1], tf.int64)
    found = self._search(outputs, in_context, tf.ones_like(in_context), num_windows)
    return self._outputs(found, num_windows)

  # ----- raw text -----
  def _windows(self, texts):
    """Tokenizes and cuts each (question, context) into packed windows.

    Returns:
      dict: inputs (int32 [N, T] encoder inputs of all windows), num_windows,
      window (index within the example), window_start (first context piece),
      window_length, first_context (position of the first context token),
      stride, max_tokens, num_pieces, example_windows (int64 [N] each: of the
      window's example), num_windows (int64 [B]), begin, end (ragged int64
      [B, (pieces)] byte spans) and context (string [B]).
    """
    question = tf.convert_to_tensor(texts[serving_module.QUESTION], tf.string)
    context = tf.convert_to_tensor(texts[serving_module.CONTEXT], tf.string)
    encoder = self.text_encoder
    question_pieces = encoder.pieces(question)[:, :self.max_query_length]
    ids, begin, end = encoder.pieces_with_offsets(context)
    ids, begin, end = (x.merge_dims(1, 2) for x in (ids, begin, end))
    query_length = question_pieces.row_lengths()
    max_tokens = tf.maximum(encoder.seq_length - 3 - query_length, 1)
    w, num_windows = windows.sequence_windows(ids.row_lengths(), max_tokens, self.doc_stride)
    example = w.pop("example")
    w["example_windows"] = w.pop("num_windows")
    w["query_length"] = tf.gather(query_length, example)
    index = tf.ragged.range(w["piece_start"], w["piece_start"] + w["window_length"])
    window_pieces = index.with_flat_values(tf.gather(ids.flat_values, index.flat_values))
    inputs = encoder.pack(tf.gather(question_pieces, example), window_pieces)
    return dict(w, inputs=inputs, num_windows=num_windows,
                first_context=w["query_length"] + 2, begin=begin, end=end, context=context)

  def encode_text(self, texts):
    """Every window of every (question, context): int32 [N, T] encoder inputs."""
    return self._windows(texts)["inputs"]

  def predict_text(self, texts):
    w = self._windows(texts)
    outputs = self.call_model(w["inputs"])
    position = tf.range(self.seq_length, dtype=tf.int64)[tf.newaxis, :]
    column = lambda name: w[name][:, tf.newaxis]  # pylint: disable=unnecessary-lambda-assignment
    piece = position - column("first_context") + column("window_start")
    in_context = (position >= column("first_context")) & (
        position < column("first_context") + column("window_length"))
    max_overlap = max(1, -(-self.seq_length // self.doc_stride))
    max_context = windows.max_context_mask(piece, column("window"), column("example_windows"),
                                   column("stride"), column("max_tokens"),
                                   column("num_pieces"), max_overlap)
    found = self._search(outputs, in_context, max_context, w["num_windows"])
    result = self._outputs(found, w["num_windows"])
    has_answer = found["has_answer"]
    # Token p of window w is context piece window_start + p - first_context.
    first_piece = tf.gather(w["window_start"] - w["first_context"], found["flat"])
    begin, end, context = w["begin"], w["end"], w["context"]
    row_starts = begin.row_starts()
    last_piece = tf.maximum(tf.size(begin.flat_values, out_type=tf.int64) - 1, 0)

    def byte_offset(values, index):
      flat_index = tf.clip_by_value(row_starts + first_piece + tf.cast(index, tf.int64), 0,
                                    last_piece)
      padded = tf.concat([values.flat_values, tf.zeros([1], values.flat_values.dtype)], 0)
      return tf.where(has_answer, tf.cast(tf.gather(padded, flat_index), tf.int32), 0)

    start_byte = byte_offset(begin, found["start"])
    end_byte = byte_offset(end, found["end"])
    result[ANSWER_TEXT] = tf.where(
        has_answer, tf.strings.substr(context, start_byte, end_byte - start_byte), "")
    result[ANSWER_START] = tf.where(has_answer, text_encoding.char_offsets(context, start_byte),
                                    -1)
    result[ANSWER_END] = tf.where(has_answer, text_encoding.char_offsets(context, end_byte), -1)
    return result
