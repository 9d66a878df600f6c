"""SQuAD features as TFRecords (the original release's records), read back through
the squad record kind's spec (bert_tf.data.pipelines.loaders.squad.squad_spec)."""

from __future__ import annotations

import os
from typing import Dict, Optional, Sequence

from bert_tf import constants
from bert_tf.data.pipelines import squad_features
from bert_tf.data.records import tfrecords
from bert_tf.data.task_files.squad import (END_POSITIONS, IS_IMPOSSIBLE, START_POSITIONS, UNIQUE_IDS,
                                SquadFeatures, read_squad_examples)
from bert_tf.text import vocab as vocab_lib
from bert_tf.utils import progress as progress_lib


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
    tokenize_fn = squad_features.tokenize_fn_from_tokenizer(tokenizer)
    vocab_list = (vocab_lib.load_vocab(vocab_file) if vocab_file
                  else squad_features.vocab_list(tokenizer))
  vocab = {t: i for i, t in enumerate(vocab_list)}
  bar = progress_lib.Progress(os.path.basename(input_file), total=len(examples),
                              unit="examples", interval=progress_interval)
  features = squad_features.convert_examples_to_features(
      examples, tokenize_fn, vocab, max_seq_length=max_seq_length, doc_stride=doc_stride,
      max_query_length=max_query_length, progress=lambda done, total: bar.update(1))
  write_features_tfrecord(features, output_file)
  return {"num_examples": len(examples), "num_features": len(features),
          "num_skipped": num_skipped}

