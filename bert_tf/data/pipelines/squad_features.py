"""SQuAD features: examples cut into model windows, as the original BERT release does.

Each context word is WordPiece tokenized, the labelled answer span is tightened to the
tokens of the answer text, and the document is cut into windows of at most
max_seq_length tokens that start doc_stride tokens apart. A window that does not hold the
whole answer (and every window of an unanswerable v2.0 question) labels the answer at
position 0, the [CLS] token. Each window is packed as `[CLS] question [SEP] window [SEP]`
by `bert_tf.text.packing`, the packer of the other tasks and of serving; the SQuAD
serving signature builds the same windows from the same question and context.

Tokenization goes through a `tokenize_fn(texts) -> [[wordpiece, ...], ...]`; see
`tokenize_fn_from_tokenizer` for the project's BertWordPieceTokenizer.
"""

from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from bert_tf import constants
from bert_tf.data.task_files.squad import (END_POSITIONS, FIRST_UNIQUE_ID, IS_IMPOSSIBLE, START_POSITIONS,
                                UNIQUE_IDS, SquadExample, SquadFeatures)
from bert_tf.text import packing
from bert_tf.text import vocab as vocab_lib
from bert_tf.text.windows import doc_windows, is_max_context

TokenizeFn = Callable[[Sequence[str]], List[List[str]]]


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
  vocab = vocab_list(tokenizer)

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


def vocab_list(tokenizer) -> List[str]:
  """The token strings of a tokenizer, in id order (from its vocab or vocab file)."""
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
