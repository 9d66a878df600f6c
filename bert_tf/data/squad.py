"""SQuAD v1.1 / v2.0: JSON reading, feature creation, TFRecord writing and tf.data input.

Feature creation follows the original BERT release's run_squad exactly: the context is
split on white space into words (with a character -> word map), each word is WordPiece
tokenized, the labelled answer span is tightened to the tokens of the answer text, and
the document is cut into windows of at most max_seq_length tokens that start doc_stride
tokens apart. A window that does not hold the whole answer (and every window of an
unanswerable v2.0 question) labels the answer at position 0, the [CLS] token. Each
window is packed as `[CLS] question [SEP] window [SEP]` by `bert_tf.text.packing`, the
packer of the other tasks and of serving; the SQuAD serving signature builds the same
windows from the same question and context.

Tokenization goes through a `tokenize_fn(texts) -> [[wordpiece, ...], ...]`; see
`tokenize_fn_from_tokenizer` for the project's BertWordPieceTokenizer.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from bert_tf import constants
from bert_tf.data import tfrecords
from bert_tf.text import packing
from bert_tf.text import vocab as vocab_lib
from bert_tf.text.windows import doc_windows, is_max_context
from bert_tf.utils import errors
from bert_tf.utils import progress as progress_lib

# Model-input names of the span labels (TFRecord features carry the same names).
START_POSITIONS = "start_positions"
END_POSITIONS = "end_positions"
IS_IMPOSSIBLE = "is_impossible"
UNIQUE_IDS = "unique_ids"

# Unique ids of features count up from here, as in the original release.
FIRST_UNIQUE_ID = 1000000000

TokenizeFn = Callable[[Sequence[str]], List[List[str]]]


class SquadFormatError(errors.UserError, ValueError):
  """A SQuAD JSON file cannot be read; the message names the file and position."""


@dataclasses.dataclass
class SquadExample:
  """One question about one context.

  doc_tokens are the context's whitespace-separated words; start_position and
  end_position index them (inclusive), -1 when the question has no answer or no label.
  answers holds every gold answer text (for evaluation).
  """

  qas_id: str
  question_text: str
  doc_tokens: List[str]
  orig_answer_text: str = ""
  start_position: int = -1
  end_position: int = -1
  is_impossible: bool = False
  answers: List[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class SquadFeatures:
  """One window of one example, ready for the model.

  token_to_orig_map maps a position of `tokens` inside the window's context to the index
  of its word in example.doc_tokens; token_is_max_context says whether this window is
  the one where that token has the most context on both sides.
  """

  unique_id: int
  example_index: int
  doc_span_index: int
  tokens: List[str]
  token_to_orig_map: Dict[int, int]
  token_is_max_context: Dict[int, bool]
  input_ids: List[int]
  input_mask: List[int]
  segment_ids: List[int]
  start_position: int = 0
  end_position: int = 0
  is_impossible: bool = False


def is_whitespace(ch: str) -> bool:
  """White space as the original SQuAD reader splits on (including U+202F)."""
  return ch in (" ", "\t", "\r", "\n") or ord(ch) == 0x202F


def split_context(text: str) -> Tuple[List[str], List[int]]:
  """Splits a context on white space.

  Returns:
    (words, char_to_word_offset): the words, and for every character of `text` the index
    of the word it belongs to (white space maps to the preceding word, -1 before any).
  """
  words: List[str] = []
  char_to_word_offset: List[int] = []
  prev_is_whitespace = True
  for ch in text:
    if is_whitespace(ch):
      prev_is_whitespace = True
    else:
      if prev_is_whitespace:
        words.append(ch)
      else:
        words[-1] += ch
      prev_is_whitespace = False
    char_to_word_offset.append(len(words) - 1)
  return words, char_to_word_offset


def load_squad_json(path: str) -> List[Mapping]:
  """Returns the `data` list of a SQuAD JSON file.

  Raises:
    SquadFormatError: naming the file and the line/column of a JSON syntax error, or
      the missing top-level field.
  """
  with tf.io.gfile.GFile(path, "r") as f:
    text = f.read()
  try:
    data = json.loads(text)
  except json.JSONDecodeError as e:
    raise SquadFormatError(f"{path}: invalid JSON at line {e.lineno}, column {e.colno} "
                           f"(character {e.pos}): {e.msg}") from None
  if not isinstance(data, dict) or not isinstance(data.get("data"), list):
    raise SquadFormatError(f"{path}: a SQuAD file is a JSON object with a 'data' list")
  return data["data"]


def _locate_answer(text: str, offset, doc_tokens: Sequence[str],
                   char_to_word_offset: Sequence[int]) -> Optional[Tuple[int, int]]:
  """(first word, last word) of an answer, or None when its text is not found there."""
  if not text or not isinstance(offset, int) or offset < 0:
    return None
  end_char = offset + len(text) - 1
  if end_char >= len(char_to_word_offset):
    return None
  start_word = char_to_word_offset[offset]
  end_word = char_to_word_offset[end_char]
  if start_word < 0:
    return None
  actual = " ".join(doc_tokens[start_word:end_word + 1])
  if actual.find(" ".join(text.split())) == -1:
    return None
  return start_word, end_word


def read_squad_examples(path_or_data, is_training: bool, version_2_with_negative: bool
                        ) -> Tuple[List[SquadExample], int]:
  """Reads the examples of a SQuAD file.

  Args:
    path_or_data: a JSON file path, or the already loaded `data` list.
    is_training: whether this is training data. Answer spans are located for the first
      gold answer of each question either way (evaluation data uses them for an eval
      loss); in training a question whose answer cannot be located is skipped.
    version_2_with_negative: whether questions may be unanswerable (`is_impossible`).

  Returns:
    (examples, num_skipped): training questions whose answer text cannot be found at
    its answer_start in the context are skipped and counted, as the original does.

  Raises:
    SquadFormatError: naming the file and the article/paragraph/question of a field
      that is missing or out of range.
  """
  source = path_or_data if isinstance(path_or_data, str) else "<squad data>"
  data = load_squad_json(path_or_data) if isinstance(path_or_data, str) else path_or_data
  examples: List[SquadExample] = []
  num_skipped = 0
  for a, article in enumerate(data):
    for p, paragraph in enumerate(article.get("paragraphs", [])):
      where = f"{source}: data[{a}].paragraphs[{p}]"
      if "context" not in paragraph or "qas" not in paragraph:
        raise SquadFormatError(f"{where} needs 'context' and 'qas'")
      context = paragraph["context"]
      doc_tokens, char_to_word_offset = split_context(context)
      for q, qa in enumerate(paragraph["qas"]):
        qwhere = f"{where}.qas[{q}]"
        if "id" not in qa or "question" not in qa:
          raise SquadFormatError(f"{qwhere} needs 'id' and 'question'")
        answers = qa.get("answers", [])
        is_impossible = bool(qa.get("is_impossible", False)) if version_2_with_negative else False
        example = SquadExample(qas_id=qa["id"], question_text=qa["question"],
                               doc_tokens=doc_tokens, is_impossible=is_impossible,
                               answers=[ans.get("text", "") for ans in answers])
        if is_impossible or not answers:
          if is_training and not is_impossible:
            raise SquadFormatError(f"{qwhere} has no answers and is not marked is_impossible")
          examples.append(example)
          continue
        answer = answers[0]
        if "text" not in answer or "answer_start" not in answer:
          raise SquadFormatError(f"{qwhere}.answers[0] needs 'text' and 'answer_start'")
        span = _locate_answer(answer["text"], answer["answer_start"], doc_tokens,
                              char_to_word_offset)
        if span is None:
          if is_training:
            logging.warning("Skipping %s: answer %r at character %s is not in its context",
                            qwhere, answer["text"], answer["answer_start"])
            num_skipped += 1
            continue
        else:
          example.orig_answer_text = answer["text"]
          example.start_position, example.end_position = span
        examples.append(example)
  if num_skipped:
    logging.warning("%s: skipped %d questions whose answer is not in their context", source,
                    num_skipped)
  return examples, num_skipped


# --------------------------------------------------------------------------------------
# Tokenization.


def tokenize_fn_from_tokenizer(tokenizer, batch_size: int = 2048) -> TokenizeFn:
  """Adapts a BertWordPieceTokenizer into a `tokenize_fn`.

  Args:
    tokenizer: bert_tf.text.tokenizer.BertWordPieceTokenizer (or anything with
      `tokenize(strings)` -> int RaggedTensor [N, words, pieces] or [N, pieces], and
      `vocab` / `id_to_token` giving the token strings).
    batch_size: texts sent to the tokenizer per call.

  Returns:
    A function mapping N strings to N lists of WordPiece token strings.
  """
  vocab = _vocab_list(tokenizer)

  def tokenize(texts: Sequence[str]) -> List[List[str]]:
    out: List[List[str]] = []
    for start in range(0, len(texts), batch_size):
      chunk = list(texts[start:start + batch_size])
      ids = tokenizer.tokenize(tf.constant(chunk, dtype=tf.string))
      if isinstance(ids, tf.RaggedTensor) and ids.ragged_rank > 1:
        ids = ids.merge_dims(-2, -1)
      for row in ids.to_list():
        out.append([vocab[i] for i in row])
    return out

  return tokenize


def _vocab_list(tokenizer) -> List[str]:
  for name in ("vocab", "vocab_list", "tokens"):
    value = getattr(tokenizer, name, None)
    if isinstance(value, (list, tuple)) and value:
      return list(value)
  for name in ("get_vocab", "vocab_tokens"):
    fn = getattr(tokenizer, name, None)
    if callable(fn):
      return [t.decode("utf-8") if isinstance(t, bytes) else t for t in fn()]
  vocab_file = getattr(tokenizer, "vocab_file", None)
  if vocab_file is not None:
    return vocab_lib.load_vocab(vocab_file if isinstance(vocab_file, str) else
                                vocab_file.asset_path.numpy().decode("utf-8"))
  raise TypeError(f"Cannot find the vocabulary of {type(tokenizer).__name__}")


class _Memo:
  """Tokenizes each distinct string once, in large batches."""

  def __init__(self, tokenize_fn: TokenizeFn):
    self.tokenize_fn = tokenize_fn
    self.cache: Dict[str, List[str]] = {}

  def add(self, texts: Iterable[str]) -> None:
    new = list(dict.fromkeys(t for t in texts if t not in self.cache))
    if new:
      for text, pieces in zip(new, self.tokenize_fn(new)):
        self.cache[text] = pieces

  def __call__(self, text: str) -> List[str]:
    if text not in self.cache:
      self.add([text])
    return self.cache[text]


# --------------------------------------------------------------------------------------
# Features.


def improve_answer_span(doc_tokens: Sequence[str], start: int, end: int,
                        answer_tokens: Sequence[str]) -> Tuple[int, int]:
  """The smallest sub-span of [start, end] whose WordPieces spell the answer's.

  The word-level span can be wider than the answer ("(1895-1943)." for "1895"); when a
  sub-span's tokens equal the tokenized answer text, that sub-span is the label.
  """
  answer_text = " ".join(answer_tokens)
  for new_start in range(start, end + 1):
    for new_end in range(end, new_start - 1, -1):
      if " ".join(doc_tokens[new_start:new_end + 1]) == answer_text:
        return new_start, new_end
  return start, end


def convert_examples_to_features(examples: Sequence[SquadExample], tokenize_fn: TokenizeFn,
                                 vocab: Mapping[str, int], max_seq_length: int = 384,
                                 doc_stride: int = 128, max_query_length: int = 64,
                                 progress: Optional[Callable[[int, int], None]] = None
                                 ) -> List[SquadFeatures]:
  """Cuts every example into model windows.

  Args:
    examples: from read_squad_examples.
    tokenize_fn: texts -> WordPiece token strings (see tokenize_fn_from_tokenizer).
    vocab: token -> id; must hold [CLS], [SEP] and [UNK].
    max_seq_length: tokens per window including [CLS] question [SEP] context [SEP]
      (packed by `bert_tf.text.packing.pack_inputs`).
    doc_stride: tokens between the starts of consecutive windows.
    max_query_length: questions are cut to this many tokens.
    progress: optional callback(examples done, examples total).

  Returns:
    The features, unique ids counting up from FIRST_UNIQUE_ID. A window is labelled with
    the example's located answer when it holds all of it, else with position 0 ([CLS]);
    so is every window of an unanswerable or unlabelled example.
  """
  memo = _Memo(tokenize_fn)
  texts = []
  for example in examples:
    texts.append(example.question_text)
    texts.extend(example.doc_tokens)
    if example.orig_answer_text:
      texts.append(example.orig_answer_text)
  memo.add(texts)
  unk_id = vocab[constants.UNK_TOKEN]
  pad_id = vocab.get(constants.PAD_TOKEN, 0)
  features: List[SquadFeatures] = []
  query_ids: List[List[int]] = []
  window_ids: List[List[int]] = []
  unique_id = FIRST_UNIQUE_ID
  for example_index, example in enumerate(examples):
    query_tokens = memo(example.question_text)[:max_query_length]
    query_id_list = [vocab.get(t, unk_id) for t in query_tokens]
    tok_to_orig_index: List[int] = []
    orig_to_tok_index: List[int] = []
    all_doc_tokens: List[str] = []
    for i, word in enumerate(example.doc_tokens):
      orig_to_tok_index.append(len(all_doc_tokens))
      for piece in memo(word):
        tok_to_orig_index.append(i)
        all_doc_tokens.append(piece)

    tok_start = tok_end = -1
    has_answer = not example.is_impossible and example.start_position >= 0
    if has_answer:
      tok_start = orig_to_tok_index[example.start_position]
      if example.end_position < len(example.doc_tokens) - 1:
        tok_end = orig_to_tok_index[example.end_position + 1] - 1
      else:
        tok_end = len(all_doc_tokens) - 1
      tok_start, tok_end = improve_answer_span(all_doc_tokens, tok_start, tok_end,
                                               memo(example.orig_answer_text))

    max_tokens_for_doc = max_seq_length - len(query_tokens) - 3
    if max_tokens_for_doc < 1:
      raise ValueError(f"max_seq_length {max_seq_length} leaves no room for the context "
                       f"after a {len(query_tokens)}-token question")
    spans = doc_windows(len(all_doc_tokens), max_tokens_for_doc, doc_stride)
    for span_index, (span_start, span_length) in enumerate(spans):
      tokens = [constants.CLS_TOKEN, *query_tokens, constants.SEP_TOKEN]
      token_to_orig_map: Dict[int, int] = {}
      token_is_max_context: Dict[int, bool] = {}
      for i in range(span_length):
        position = span_start + i
        token_to_orig_map[len(tokens)] = tok_to_orig_index[position]
        token_is_max_context[len(tokens)] = is_max_context(spans, span_index, position)
        tokens.append(all_doc_tokens[position])
      tokens.append(constants.SEP_TOKEN)
      window_ids.append([vocab.get(t, unk_id)
                         for t in all_doc_tokens[span_start:span_start + span_length]])
      query_ids.append(query_id_list)

      start_position = end_position = 0
      if has_answer:
        span_end = span_start + span_length - 1
        if span_start <= tok_start and tok_end <= span_end:
          offset = len(query_tokens) + 2
          start_position = tok_start - span_start + offset
          end_position = tok_end - span_start + offset
      features.append(SquadFeatures(
          unique_id=unique_id, example_index=example_index, doc_span_index=span_index,
          tokens=tokens, token_to_orig_map=token_to_orig_map,
          token_is_max_context=token_is_max_context, input_ids=[], input_mask=[],
          segment_ids=[], start_position=start_position, end_position=end_position,
          is_impossible=example.is_impossible))
      unique_id += 1
    if progress is not None:
      progress(example_index + 1, len(examples))
  _pack_windows(features, query_ids, window_ids, max_seq_length,
                vocab[constants.CLS_TOKEN], vocab[constants.SEP_TOKEN], pad_id)
  return features


# Windows packed per packer call (bounds the size of its [N, T] tensors).
_PACK_BATCH = 4096


def _pack_windows(features: Sequence[SquadFeatures], query_ids: Sequence[List[int]],
                  window_ids: Sequence[List[int]], max_seq_length: int, cls_id: int,
                  sep_id: int, pad_id: int) -> None:
  """Fills each feature's input_ids, input_mask and segment_ids with
  `[CLS] query [SEP] window [SEP]` as `bert_tf.text.packing.pack_inputs` packs it, the
  packer of every other task and of serving. The windows are sized to fit, so the
  packer truncates nothing and the labelled positions stay valid."""

  def ragged(rows):
    lengths = np.array([len(r) for r in rows], np.int64)
    values = np.fromiter((i for r in rows for i in r), np.int32, count=int(lengths.sum()))
    return tf.RaggedTensor.from_row_lengths(values, lengths)

  for start in range(0, len(features), _PACK_BATCH):
    stop = start + _PACK_BATCH
    packed = packing.pack_inputs([ragged(query_ids[start:stop]),
                                  ragged(window_ids[start:stop])],
                                 max_seq_length, cls_id, sep_id, pad_id)
    ids, mask, types = (packed[k].numpy().tolist() for k in constants.ENCODER_INPUTS)
    for feature, i, m, t in zip(features[start:stop], ids, mask, types):
      feature.input_ids, feature.input_mask, feature.segment_ids = i, m, t


def features_to_arrays(features: Sequence[SquadFeatures]) -> Dict[str, np.ndarray]:
  """Stacks features into model inputs and labels.

  Returns:
    input_word_ids, input_mask, input_type_ids: int32 [N, T]; unique_ids,
    start_positions, end_positions, is_impossible: int32 [N].
  """
  arrays = {
      constants.INPUT_WORD_IDS: np.array([f.input_ids for f in features], np.int32),
      constants.INPUT_MASK: np.array([f.input_mask for f in features], np.int32),
      constants.INPUT_TYPE_IDS: np.array([f.segment_ids for f in features], np.int32),
      UNIQUE_IDS: np.array([f.unique_id for f in features], np.int32),
      START_POSITIONS: np.array([f.start_position for f in features], np.int32),
      END_POSITIONS: np.array([f.end_position for f in features], np.int32),
      IS_IMPOSSIBLE: np.array([int(f.is_impossible) for f in features], np.int32),
  }
  return arrays


# --------------------------------------------------------------------------------------
# TFRecords.


def feature_record(feature: SquadFeatures) -> bytes:
  """The original release's record, serialized: unique_ids, input_ids, input_mask,
  segment_ids, start_positions, end_positions, is_impossible."""
  return tfrecords.serialize_example({
      UNIQUE_IDS: feature.unique_id,
      constants.TFRECORD_INPUT_IDS: feature.input_ids,
      constants.TFRECORD_INPUT_MASK: feature.input_mask,
      constants.TFRECORD_SEGMENT_IDS: feature.segment_ids,
      START_POSITIONS: feature.start_position,
      END_POSITIONS: feature.end_position,
      IS_IMPOSSIBLE: int(feature.is_impossible),
  })


def write_features_tfrecord(features: Sequence[SquadFeatures], output_file: str) -> int:
  """Writes features to `output_file` through a temporary name; returns the count."""
  return tfrecords.write_records(output_file, (feature_record(f) for f in features))


def write_squad_tfrecords(input_file: str, output_file: str, tokenizer, *,
                          is_training: bool, version_2_with_negative: bool = False,
                          max_seq_length: int = 384, doc_stride: int = 128,
                          max_query_length: int = 64, vocab_file: str = "",
                          progress_interval: Optional[float] = 10.0) -> Dict[str, int]:
  """Reads a SQuAD JSON file, creates features and writes them as one TFRecord file.

  Args:
    input_file: SQuAD v1.1 or v2.0 JSON.
    output_file: the TFRecord path; written atomically (temporary name, then rename).
    tokenizer: a BertWordPieceTokenizer, or a `tokenize_fn` (texts -> WordPiece token
      lists) together with `vocab_file`.
    is_training: whether this is training data (questions whose answer cannot be
      located are then skipped; evaluation data keeps them, labelled [CLS]).
    version_2_with_negative: whether unanswerable questions are allowed.
    max_seq_length, doc_stride, max_query_length: the windowing (384/128/64 in the paper).
    vocab_file: the vocab whose ids are written; defaults to the tokenizer's.
    progress_interval: seconds between progress lines (None: none).

  Returns:
    {"num_examples", "num_features", "num_skipped"}.
  """
  examples, num_skipped = read_squad_examples(input_file, is_training, version_2_with_negative)
  if callable(tokenizer) and not hasattr(tokenizer, "tokenize"):
    tokenize_fn = tokenizer
    vocab_list = vocab_lib.load_vocab(vocab_file)
  else:
    tokenize_fn = tokenize_fn_from_tokenizer(tokenizer)
    vocab_list = vocab_lib.load_vocab(vocab_file) if vocab_file else _vocab_list(tokenizer)
  vocab = {t: i for i, t in enumerate(vocab_list)}
  bar = progress_lib.Progress(os.path.basename(input_file), total=len(examples),
                              unit="examples", interval=progress_interval)
  features = convert_examples_to_features(
      examples, tokenize_fn, vocab, max_seq_length=max_seq_length, doc_stride=doc_stride,
      max_query_length=max_query_length, progress=lambda done, total: bar.update(1))
  write_features_tfrecord(features, output_file)
  return {"num_examples": len(examples), "num_features": len(features),
          "num_skipped": num_skipped}


def decode_record(record: tf.Tensor, seq_length: int) -> Dict[str, tf.Tensor]:
  """Parses one serialized record into model inputs and labels (int32).

  Records without labels (the original release's evaluation files) get 0 labels.
  """
  spec = {
      UNIQUE_IDS: tf.io.FixedLenFeature([], tf.int64),
      constants.TFRECORD_INPUT_IDS: tf.io.FixedLenFeature([seq_length], tf.int64),
      constants.TFRECORD_INPUT_MASK: tf.io.FixedLenFeature([seq_length], tf.int64),
      constants.TFRECORD_SEGMENT_IDS: tf.io.FixedLenFeature([seq_length], tf.int64),
  }
  for name in (START_POSITIONS, END_POSITIONS, IS_IMPOSSIBLE):
    spec[name] = tf.io.FixedLenFeature([], tf.int64, default_value=0)
  parsed = tf.io.parse_single_example(record, spec)
  out = {}
  for name, value in parsed.items():
    out[constants.TFRECORD_TO_MODEL_INPUT.get(name, name)] = tf.cast(value, tf.int32)
  return out


def tfrecord_dataset(input_path: str, seq_length: int) -> tf.data.Dataset:
  """Unbatched examples from comma-separated TFRecord globs (files in sorted order)."""
  return tfrecords.record_dataset(input_path).map(
      lambda r: decode_record(r, seq_length), num_parallel_calls=tf.data.AUTOTUNE)
