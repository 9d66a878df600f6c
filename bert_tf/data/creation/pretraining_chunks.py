"""One chunk's work in pretraining data creation: read, tokenize, make instances, encode.

A chunk's instances and their order depend only on its bytes, its index (the seed of
its random draws) and the settings, so the local tool's workers and the Beam pipeline
make the same ones, whichever process takes the chunk.
"""

import random
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from bert_tf.data.records import example_encoding
from bert_tf.data.records import pretraining_format as fmt
from bert_tf.utils import files as files_lib
from bert_tf.data.creation import pretraining_instances as pi
from bert_tf.data.creation import pretraining_plan as plan_lib
from bert_tf.data.creation import pretraining_summary as summary_lib

# Instances masked and serialized together (numpy batch size).
_BATCH = 4096
# Lines tokenized per tokenizer call.
_TOKENIZE_BATCH = 8192


def read_chunk(chunk: plan_lib.Chunk) -> Tuple[List[str], int]:
  """Decodes a chunk as UTF-8, replacing invalid bytes.

  Returns:
    (lines, number of invalid byte sequences replaced by U+FFFD).
  """
  with files_lib.open_input(chunk.path) as f:
    f.seek(chunk.start)
    raw = f.read(chunk.end - chunk.start)
  text = raw.decode("utf-8", errors="replace")
  replaced = text.count("\ufffd") - raw.count(b"\xef\xbf\xbd")
  # Lines end at "\n" only, as the original's readline(); other separators stay inside.
  return text.split("\n"), replaced


def make_line_tokenizer(vocab_file: str, lower_case: bool
                        ) -> Callable[[List[str]], Tuple[np.ndarray, np.ndarray]]:
  """Returns tokenize(lines) -> (flat ids int32 [num_tokens], row lengths int64 [lines]).

  The project's WordPiece tokenizer (the original's normalization, words of up to 200
  characters as the original allows) with its fast WordPiece path, over batches of lines.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.text import tokenizer as tokenizer_lib  # pylint: disable=g-import-not-at-top
  tokenizer = tokenizer_lib.BertWordPieceTokenizer(vocab_file, lower_case=lower_case,
                                                   max_chars_per_word=200, fast=True)

  def tokenize(lines):
    ids = tokenizer.tokenize_pieces(tf.constant(lines, dtype=tf.string))
    return (ids.flat_values.numpy().astype(np.int32),
            ids.row_lengths().numpy().astype(np.int64, copy=False))

  return tokenize


def tokenize_documents(lines: Sequence[str], tokenize, batch_size: int = _TOKENIZE_BATCH):
  """Tokenizes lines into documents (a blank line ends one), dropping empty ones.

  Returns:
    (tokens int32 [T], sentence_offsets int64 [S + 1], document_offsets int64 [D + 1]).
  """
  sentences, doc_ids = [], []
  doc = 0
  for line in lines:
    line = line.strip()
    if line:
      sentences.append(line)
      doc_ids.append(doc)
    else:
      doc += 1
  token_parts, length_parts = [], []
  for i in range(0, len(sentences), batch_size):
    flat, lengths = tokenize(sentences[i:i + batch_size])
    token_parts.append(flat)
    length_parts.append(lengths)
  tokens = np.concatenate(token_parts) if token_parts else np.zeros([0], np.int32)
  lengths = np.concatenate(length_parts) if length_parts else np.zeros([0], np.int64)
  # Sentences with no tokens are dropped, as the original does.
  keep = lengths > 0
  lengths = lengths[keep]
  doc_ids = np.asarray(doc_ids, dtype=np.int64)[keep]
  sentence_offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
  np.cumsum(lengths, out=sentence_offsets[1:])
  doc_starts = np.flatnonzero(np.diff(doc_ids, prepend=-1))
  document_offsets = np.append(doc_starts, len(lengths)).astype(np.int64)
  return tokens.astype(np.int32, copy=False), sentence_offsets, document_offsets


def chunk_rngs(random_seed: int, chunk_index: int):
  """The (random.Random, numpy Generator) of one chunk, fixed by seed and index."""
  return (random.Random(random_seed * 1_000_003 + chunk_index),
          np.random.default_rng([random_seed, chunk_index]))


def create_examples_from_documents(tokens: np.ndarray, sentence_offsets, document_offsets,
                                   settings: fmt.PretrainingDataSettings,
                                   special: pi.SpecialIds, rng: random.Random,
                                   np_rng: np.random.Generator,
                                   stats: Optional[Dict[str, int]] = None):
  """Yields lists of serialized tf.train.Example bytes, shuffled, from tokenized documents.

  Args:
    tokens: int32 [T]; sentence_offsets int [S + 1]; document_offsets int [D + 1] (see
      pretraining_instances.create_instance_spans).
    stats: a dict to add counts to (keys of the summary).
  """
  stats = stats if stats is not None else summary_lib.empty_stats()
  num_docs = len(document_offsets) - 1
  if num_docs < 1:
    return
  spans, short_passes = pi.create_instance_spans(
      sentence_offsets, document_offsets, settings.max_seq_length, settings.short_seq_prob,
      settings.dupe_factor, rng)
  stats["document_passes"] += num_docs * settings.dupe_factor
  stats["short_target_passes"] += short_passes
  before = spans.a_length + spans.b_length
  spans = pi.truncate_spans(spans, settings.max_seq_length, np_rng)
  stats["truncated_instances"] += int(np.sum(spans.a_length + spans.b_length < before))
  spans = spans.take(np_rng.permutation(len(spans)))
  for begin in range(0, len(spans), _BATCH):
    batch = spans.take(slice(begin, begin + _BATCH))
    input_ids, segment_ids, input_mask, candidates = pi.build_sequences(
        tokens, batch, settings.max_seq_length, special)
    masked = pi.mask_sequences(input_ids, input_mask, candidates, settings.masked_lm_prob,
                               settings.max_predictions_per_seq, special, np_rng,
                               settings.do_whole_word_mask)
    n = len(batch)
    stats["instances"] += n
    num_tokens = int(input_mask.sum())
    stats["tokens"] += num_tokens
    stats["non_special_tokens"] += num_tokens - 3 * n
    stats["masked"] += int(masked.masked_lm_weights.sum())
    for k, v in masked.outcome_counts.items():
      stats[k] += v
    stats["random_next"] += int(batch.is_random_next.sum())
    stats["single_sentence_chunks"] += int(batch.single_sentence.sum())
    stats["short_target_instances"] += int(batch.short_target.sum())
    yield example_encoding.serialize_examples(pi.example_features(
        input_ids, input_mask, segment_ids, masked, batch.is_random_next))


def chunk_records(chunk: plan_lib.Chunk, settings: fmt.PretrainingDataSettings,
                  special: pi.SpecialIds, tokenize, stats: Dict[str, int]):
  """Reads, tokenizes and turns one chunk into examples; the local tool's and the Beam
  pipeline's one unit of work.

  The instances and their order depend only on the chunk's bytes, its index (the seed)
  and the settings.

  Args:
    stats: a dict from `pretraining_summary.empty_stats` that the chunk's counts are added to.

  Yields:
    lists of serialized tf.train.Example bytes, in the chunk's shuffled order.
  """
  lines, replaced = read_chunk(chunk)
  stats["chunks"] += 1
  stats["bytes"] += chunk.end - chunk.start
  stats["lines"] += len(lines)
  stats["invalid_utf8_replacements"] += replaced
  tokens, sentence_offsets, document_offsets = tokenize_documents(lines, tokenize)
  del lines
  stats["documents"] += len(document_offsets) - 1
  stats["sentences"] += len(sentence_offsets) - 1
  if tokens.size:
    max_id = int(tokens.max())
    stats["max_token_id"] = max(stats["max_token_id"], max_id)
    if max_id >= special.vocab_size or int(tokens.min()) < 0:
      raise fmt.PretrainingDataError(f"{chunk.path}: the tokenizer returned ids outside the "
                                     f"vocab")
  rng, np_rng = chunk_rngs(settings.random_seed, chunk.index)
  yield from create_examples_from_documents(tokens, sentence_offsets, document_offsets,
                                            settings, special, rng, np_rng, stats)

