"""Features of the fine-tuning tasks: tokenization in tf.data, TFRecords, dummy batches.

One in-graph featurizer per task family turns raw examples into model inputs, packed
by `bert_tf.text.packing.pack_inputs` exactly as the exported models pack raw text; the
same pipeline feeds training directly from task files and writes TFRecords
(tools/create_finetuning_data.py), so both paths give identical features.

Batches are dicts of
  input_word_ids, input_mask, input_type_ids: int32 [B, T] (or [B, C, T] for multiple
    choice), padded to the longest example of the batch (dynamic padding);
  label_ids: int32 [B] classes, float32 [B] scores (regression), int32 [B, T] tags
    with IGNORE_LABEL at every piece but a word's first, or int32 [B] choices;
  example_index: int32 [B], the example's index in its file.

TFRecords hold the original BERT fine-tuning feature names (`input_ids`,
`input_mask`, `segment_ids`, `label_ids`) padded to seq_length, plus `example_index`.
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Callable, Dict, Iterable, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from bert_tf import constants
from bert_tf.data import example_packing
from bert_tf.text import packing

LABEL_IDS = "label_ids"
EXAMPLE_INDEX = "example_index"
# Label of word pieces that are not scored (every piece but a word's first; padding).
IGNORE_LABEL = -1

SENTENCE = "sentence"
TAGGING = "tagging"
MULTIPLE_CHOICE = "multiple_choice"
KINDS = (SENTENCE, TAGGING, MULTIPLE_CHOICE)


# --------------------------------------------------------------------------------------
# Tokenization.


class PieceTokenizer:
  """WordPiece ids of strings, in-graph, with the special-token ids of the vocab.

  Wraps bert_tf.text.tokenizer.BertWordPieceTokenizer, merging its word axis.

  Args:
    vocab_file: the WordPiece vocab, one token a line.
    lower_case: whether the tokenizer lower-cases and strips accents.
  """

  def __init__(self, vocab_file: str, lower_case: bool = True):
    from bert_tf.text.tokenizer import BertWordPieceTokenizer  # pylint: disable=g-import-not-at-top
    if not vocab_file:
      raise ValueError("Reading raw task files needs data_config.vocab_file")
    self.tokenizer = BertWordPieceTokenizer(vocab_file, lower_case=lower_case)
    self.cls_id = self.tokenizer.cls_id
    self.sep_id = self.tokenizer.sep_id
    self.pad_id = self.tokenizer.pad_id
    self.unk_id = self.tokenizer.unk_id

  def piece_ids(self, strings: tf.Tensor) -> tf.RaggedTensor:
    """Returns int32 RaggedTensor [N, pieces] for a string tensor [N]."""
    return tf.cast(self.tokenizer.tokenize_pieces(strings), tf.int32)


def _pack(tokenizer: PieceTokenizer, segments: List[tf.Tensor], seq_length: int,
          special_ids: Optional[Sequence[int]] = None) -> Dict[str, tf.RaggedTensor]:
  """Packs like serving and cuts each example to its length (for dynamic padding).

  `[CLS] A [SEP] (B [SEP])` by `bert_tf.text.packing.pack_inputs`, the packer of the
  exported models, so training sees the inputs the served model gets.

  Args:
    tokenizer: gives the [CLS], [SEP] and [PAD] ids.
    segments: one or two ragged int [N, (pieces)] segments.
    seq_length: the longest packed example, special tokens included.
    special_ids: (cls, sep, pad) to use instead of the tokenizer's; the tagging labels
      pass IGNORE_LABEL for all three to be cut exactly as their pieces are.

  Returns:
    {input_word_ids, input_mask, input_type_ids}: ragged int32 [N, (T_i)], T_i <= seq_length.
  """
  cls_id, sep_id, pad_id = special_ids or (tokenizer.cls_id, tokenizer.sep_id,
                                           tokenizer.pad_id)
  packed = packing.pack_inputs(segments, seq_length, cls_id, sep_id, pad_id)
  lengths = tf.reduce_sum(packed[constants.INPUT_MASK], axis=1)
  return {k: tf.RaggedTensor.from_tensor(v, lengths=lengths) for k, v in packed.items()}


# --------------------------------------------------------------------------------------
# Featurizers: raw examples -> unbatched, unpadded feature dicts.

_FEATURIZE_BATCH = 256


def sentence_dataset(examples: Sequence, tokenizer: PieceTokenizer, seq_length: int,
                     label_ids: Sequence, regression: bool) -> tf.data.Dataset:
  """Featurizes SentenceExamples.

  Args:
    examples: bert_tf.data.glue.SentenceExample list.
    tokenizer: a PieceTokenizer.
    seq_length: the longest packed sequence, [CLS] and [SEP]s included.
    label_ids: per example, the class id (int) or score (float).
    regression: whether labels are float scores.

  Returns:
    Dataset of dicts: input_word_ids, input_mask, input_type_ids (int32 [T_i]),
    label_ids (int32 or float32 scalar), example_index (int32 scalar).
  """
  pair = any(e.text_b is not None for e in examples)
  data = {
      "text_a": [e.text_a for e in examples],
      "text_b": [e.text_b or "" for e in examples],
      LABEL_IDS: np.asarray(label_ids, np.float32 if regression else np.int32),
      EXAMPLE_INDEX: np.asarray([e.index for e in examples], np.int32),
  }

  def featurize(batch):
    segments = [tokenizer.piece_ids(batch["text_a"])]
    if pair:
      segments.append(tokenizer.piece_ids(batch["text_b"]))
    return dict(_pack(tokenizer, segments, seq_length), **{
        LABEL_IDS: batch[LABEL_IDS],
        EXAMPLE_INDEX: batch[EXAMPLE_INDEX],
    })

  return _featurize(data, featurize, len(examples))


def _featurize(data, featurize, num_examples) -> tf.data.Dataset:
  if num_examples == 0:
    raise ValueError("No examples to featurize")
  ds = tf.data.Dataset.from_tensor_slices(data).batch(_FEATURIZE_BATCH)
  ds = ds.map(featurize, num_parallel_calls=tf.data.AUTOTUNE).unbatch()
  return ds.map(_to_dense)


def _to_dense(features):
  return {k: v.to_tensor() if isinstance(v, tf.RaggedTensor) else v
          for k, v in features.items()}


def tagging_dataset(examples: Sequence, tokenizer: PieceTokenizer, seq_length: int,
                    label_names: Sequence[str]) -> tf.data.Dataset:
  """Featurizes TaggingExamples: each word's first piece carries the word's tag id.

  A word that tokenizes to nothing becomes [UNK], so that every word keeps one scored
  position; words beyond seq_length - 2 pieces are cut off. Unlabelled examples get
  tag label_names[0] for every word.

  Returns:
    Dataset of dicts: input_word_ids, input_mask, input_type_ids, label_ids (int32
    [T_i], IGNORE_LABEL at [CLS], [SEP] and non-first pieces), example_index.
  """
  label_index = {name: i for i, name in enumerate(label_names)}
  words, tags = [], []
  for e in examples:
    words.append(e.words)
    if e.tags is None:
      tags.append([0] * len(e.words))
    else:
      try:
        tags.append([label_index[t] for t in e.tags])
      except KeyError as err:
        raise ValueError(f"Sentence {e.index}: tag {err} is not in label_names "
                         f"{list(label_names)}") from None
  data = {
      "words": tf.ragged.constant(words, dtype=tf.string),
      "tags": tf.ragged.constant(tags, dtype=tf.int32),
      EXAMPLE_INDEX: np.asarray([e.index for e in examples], np.int32),
  }

  def featurize(batch):
    word_batch = batch["words"]
    pieces = tokenizer.piece_ids(word_batch.flat_values)  # [W, P]
    lengths = tf.maximum(pieces.row_lengths(), 1)
    unk = tf.RaggedTensor.from_tensor(tf.fill([tf.shape(lengths)[0], 1], tokenizer.unk_id))
    with_unk = tf.concat([pieces, unk], axis=1)
    pieces = tf.gather(with_unk, tf.ragged.range(lengths), batch_dims=1)
    first = tf.cast(tf.equal(tf.ragged.range(lengths), 0), tf.int32)
    word_tags = tf.repeat(batch["tags"].flat_values, lengths)
    piece_tags = tf.where(first.flat_values > 0, word_tags, IGNORE_LABEL)
    # Regroup pieces of every word into pieces of every sentence.
    piece_rows = tf.math.segment_sum(lengths, word_batch.value_rowids())
    sentence_pieces = tf.RaggedTensor.from_row_lengths(pieces.flat_values, piece_rows)
    sentence_tags = tf.RaggedTensor.from_row_lengths(piece_tags, piece_rows)
    features = _pack(tokenizer, [sentence_pieces], seq_length)
    # The tags go through the same packer, so they are truncated exactly as the pieces
    # and [CLS], [SEP] get IGNORE_LABEL.
    labels = _pack(tokenizer, [sentence_tags], seq_length, (IGNORE_LABEL,) * 3)
    features[LABEL_IDS] = labels[constants.INPUT_WORD_IDS]
    features[EXAMPLE_INDEX] = batch[EXAMPLE_INDEX]
    return features

  return _featurize(data, featurize, len(examples))


def multiple_choice_dataset(examples: Sequence, tokenizer: PieceTokenizer, seq_length: int,
                            num_choices: int) -> tf.data.Dataset:
  """Featurizes MultipleChoiceExamples: [CLS] context [SEP] ending [SEP] per choice.

  Returns:
    Dataset of dicts: input_word_ids, input_mask, input_type_ids (int32 [C, T_i]),
    label_ids (int32 scalar; 0 when unlabelled), example_index.
  """
  for e in examples:
    if len(e.endings) != num_choices:
      raise ValueError(f"Example {e.index} has {len(e.endings)} endings, expected "
                       f"{num_choices}")
  data = {
      "context": [e.context for e in examples],
      "endings": [list(e.endings) for e in examples],
      LABEL_IDS: np.asarray([e.label or 0 for e in examples], np.int32),
      EXAMPLE_INDEX: np.asarray([e.index for e in examples], np.int32),
  }

  def featurize(batch):
    contexts = tf.repeat(batch["context"], num_choices)
    endings = tf.reshape(batch["endings"], [-1])
    packed = _pack(tokenizer, [tokenizer.piece_ids(contexts), tokenizer.piece_ids(endings)],
                   seq_length)
    features = {k: tf.RaggedTensor.from_uniform_row_length(v, num_choices)
                for k, v in packed.items()}
    features[LABEL_IDS] = batch[LABEL_IDS]
    features[EXAMPLE_INDEX] = batch[EXAMPLE_INDEX]
    return features

  return _featurize(data, featurize, len(examples))


# --------------------------------------------------------------------------------------
# Batching.


def padding_values(kind: str, regression: bool = False) -> Dict[str, object]:
  """The value each feature is padded with."""
  return {
      constants.INPUT_WORD_IDS: 0,
      constants.INPUT_MASK: 0,
      constants.INPUT_TYPE_IDS: 0,
      LABEL_IDS: (IGNORE_LABEL if kind == TAGGING else
                  (np.float32(0) if regression else np.int32(0))),
      EXAMPLE_INDEX: np.int32(0),
  }


def batch_examples(ds: tf.data.Dataset, kind: str, batch_size: int, drop_remainder: bool,
                   regression: bool = False) -> tf.data.Dataset:
  """Pads each batch to its longest example (dynamic padding)."""
  values = padding_values(kind, regression)
  values = {k: tf.constant(v, ds.element_spec[k].dtype) for k, v in values.items()}
  return ds.padded_batch(batch_size, padding_values=values, drop_remainder=drop_remainder)


def trim_to_longest(batch: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
  """Cuts a batch padded to seq_length down to its longest example (last axis)."""
  length = tf.reduce_max(tf.reduce_sum(batch[constants.INPUT_MASK], axis=-1))
  length = tf.maximum(length, 1)
  out = {}
  for key, value in batch.items():
    if key in constants.ENCODER_INPUTS or (key == LABEL_IDS and value.shape.rank == 2):
      value = value[..., :length]
    out[key] = value
  return out


def batch_size_for(global_batch_size: int,
                   input_context: Optional[tf.distribute.InputContext]) -> int:
  if input_context is None:
    return global_batch_size
  return input_context.get_per_replica_batch_size(global_batch_size)


# --------------------------------------------------------------------------------------
# TFRecords.

_TFRECORD_NAMES = {
    constants.INPUT_WORD_IDS: constants.TFRECORD_INPUT_IDS,
    constants.INPUT_MASK: constants.TFRECORD_INPUT_MASK,
    constants.INPUT_TYPE_IDS: constants.TFRECORD_SEGMENT_IDS,
    LABEL_IDS: LABEL_IDS,
    EXAMPLE_INDEX: EXAMPLE_INDEX,
}


def _padded_numpy(features, kind: str, seq_length: int, regression: bool):
  out = {}
  pads = padding_values(kind, regression)
  for key, value in features.items():
    value = np.asarray(value)
    if key in constants.ENCODER_INPUTS or (kind == TAGGING and key == LABEL_IDS):
      width = [(0, 0)] * (value.ndim - 1) + [(0, seq_length - value.shape[-1])]
      value = np.pad(value, width, constant_values=pads[key])
    out[key] = value.reshape([-1])
  return out


def _tf_example(features) -> bytes:
  feature = {}
  for key, value in features.items():
    name = _TFRECORD_NAMES[key]
    if value.dtype.kind == "f":
      feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=value.tolist()))
    else:
      feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=value.tolist()))
  return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_tfrecord(ds: tf.data.Dataset, path: str, kind: str, seq_length: int,
                   metadata: Dict[str, object], regression: bool = False,
                   num_examples: Optional[int] = None,
                   progress: Optional[Callable[[int, Optional[int], float], None]] = None
                   ) -> int:
  """Writes a featurized (unbatched) dataset as a TFRecord file and its metadata.

  The file is written under a temporary name and renamed when complete; `path +
  ".json"` receives `metadata` plus kind, seq_length and the example count.

  Args:
    ds: the output of sentence_dataset, tagging_dataset or multiple_choice_dataset.
    path: the output TFRecord path.
    kind: sentence, tagging or multiple_choice.
    seq_length: every sequence is padded to this length.
    metadata: task facts to record (label names, source files, ...).
    regression: labels are float scores.
    num_examples: for the progress display.
    progress: called with (examples written, num_examples, seconds elapsed) every 1000
      examples.

  Returns:
    The number of examples written.
  """
  directory = os.path.dirname(path)
  if directory:
    tf.io.gfile.makedirs(directory)
  tmp = f"{path}.tmp-{os.getpid()}"
  count = 0
  start = time.time()
  try:
    with tf.io.TFRecordWriter(tmp) as writer:
      for features in ds.as_numpy_iterator():
        writer.write(_tf_example(_padded_numpy(features, kind, seq_length, regression)))
        count += 1
        if progress is not None and count % 1000 == 0:
          progress(count, num_examples, time.time() - start)
  except BaseException:
    if tf.io.gfile.exists(tmp):
      tf.io.gfile.remove(tmp)
    raise
  tf.io.gfile.rename(tmp, path, overwrite=True)
  meta = dict(metadata, kind=kind, seq_length=seq_length, num_examples=count,
              regression=regression)
  meta_tmp = f"{path}.json.tmp-{os.getpid()}"
  with tf.io.gfile.GFile(meta_tmp, "w") as f:
    f.write(json.dumps(meta, indent=2))
  tf.io.gfile.rename(meta_tmp, path + ".json", overwrite=True)
  logging.info("Wrote %d examples to %s", count, path)
  return count


def read_tfrecord_dataset(input_path: str, kind: str, seq_length: int, batch_size: int,
                          is_training: bool, drop_remainder: bool = True,
                          regression: bool = False, num_choices: int = 1,
                          shuffle_buffer_size: int = 10000, seed: Optional[int] = None,
                          input_context: Optional[tf.distribute.InputContext] = None
                          ) -> tf.data.Dataset:
  """Reads fine-tuning TFRecords into batches trimmed to their longest example.

  Args:
    input_path: comma-separated file globs.
    kind: sentence, tagging or multiple_choice.
    seq_length: the length the records were padded to.
    batch_size: examples per batch (per replica).
    is_training: shuffle and repeat.
    regression: label_ids are floats.
    num_choices: choices per example (multiple_choice).
    input_context: shards files (or records) across input pipelines.

  Returns:
    Batches as described in the module docstring.
  """
  files = []
  for pattern in input_path.split(","):
    matched = tf.io.gfile.glob(pattern.strip())
    if not matched:
      raise FileNotFoundError(f"No file matches {pattern.strip()}")
    files.extend(sorted(matched))
  width = seq_length * (num_choices if kind == MULTIPLE_CHOICE else 1)
  spec = {
      constants.TFRECORD_INPUT_IDS: tf.io.FixedLenFeature([width], tf.int64),
      constants.TFRECORD_INPUT_MASK: tf.io.FixedLenFeature([width], tf.int64),
      constants.TFRECORD_SEGMENT_IDS: tf.io.FixedLenFeature([width], tf.int64),
      LABEL_IDS: tf.io.FixedLenFeature([seq_length] if kind == TAGGING else [],
                                       tf.float32 if regression else tf.int64),
      EXAMPLE_INDEX: tf.io.FixedLenFeature([], tf.int64, default_value=0),
  }

  def decode(record):
    parsed = tf.io.parse_single_example(record, spec)
    out = {}
    for model_name, name in _TFRECORD_NAMES.items():
      value = parsed[name]
      if value.dtype == tf.int64:
        value = tf.cast(value, tf.int32)
      if kind == MULTIPLE_CHOICE and model_name in constants.ENCODER_INPUTS:
        value = tf.reshape(value, [num_choices, seq_length])
      out[model_name] = value
    return out

  ds = tf.data.Dataset.from_tensor_slices(files)
  if input_context is not None and input_context.num_input_pipelines > 1:
    if len(files) >= input_context.num_input_pipelines:
      ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
      ds = ds.interleave(tf.data.TFRecordDataset, num_parallel_calls=tf.data.AUTOTUNE,
                         deterministic=not is_training)
    else:
      ds = ds.interleave(tf.data.TFRecordDataset).shard(
          input_context.num_input_pipelines, input_context.input_pipeline_id)
  else:
    ds = ds.interleave(tf.data.TFRecordDataset, num_parallel_calls=tf.data.AUTOTUNE,
                         deterministic=not is_training)
  if is_training:
    ds = ds.shuffle(shuffle_buffer_size, seed=seed).repeat()
  ds = ds.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
  ds = ds.batch(batch_size, drop_remainder=drop_remainder)
  return ds.map(trim_to_longest).prefetch(tf.data.AUTOTUNE)


def bucket_examples(ds: tf.data.Dataset, kind: str, batch_size: int,
                    boundaries: Sequence[int], drop_remainder: bool,
                    regression: bool = False) -> tf.data.Dataset:
  """Batches examples of similar length together: each batch holds the examples of one
  length bucket, padded to its longest.

  Args:
    ds: unbatched featurized examples ([T] or, for multiple choice, [C, T] features).
    boundaries: increasing upper bounds of the buckets, in tokens; the last bucket takes
      every longer example.
  """
  values = padding_values(kind, regression)
  values = {k: tf.constant(v, ds.element_spec[k].dtype) for k, v in values.items()}
  return ds.bucket_by_sequence_length(
      lambda features: tf.shape(features[constants.INPUT_WORD_IDS])[-1],
      [b + 1 for b in boundaries], [batch_size] * (len(boundaries) + 1),
      padding_values=values, drop_remainder=drop_remainder)


def finish_raw_dataset(ds: tf.data.Dataset, kind: str, batch_size: int, is_training: bool,
                       drop_remainder: bool, regression: bool = False,
                       shuffle_buffer_size: int = 10000, seed: Optional[int] = None,
                       input_context: Optional[tf.distribute.InputContext] = None,
                       length_buckets: Sequence[int] = (),
                       pack_to_length: int = 0) -> tf.data.Dataset:
  """Shards, shuffles, repeats and dynamically pads a featurized raw-file dataset; for
  training, by length bucket when `length_buckets` are given, or with each batch's
  examples packed into rows of `pack_to_length` tokens when it is positive
  (bert_tf.data.example_packing; sentence features only)."""
  if input_context is not None and input_context.num_input_pipelines > 1:
    ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
  if is_training:
    ds = ds.cache().shuffle(shuffle_buffer_size, seed=seed).repeat()
  if is_training and pack_to_length:
    ds = example_packing.pack_examples(ds, batch_size, pack_to_length, drop_remainder)
  elif is_training and length_buckets:
    ds = bucket_examples(ds, kind, batch_size, length_buckets, drop_remainder, regression)
  else:
    ds = batch_examples(ds, kind, batch_size, drop_remainder, regression)
  return ds.prefetch(tf.data.AUTOTUNE)


# --------------------------------------------------------------------------------------
# Dummy batches.


def dummy_dataset(kind: str, batch_size: int, seq_length: int, vocab_size: int,
                  num_classes: int, num_choices: int = 1, regression: bool = False,
                  seed: int = 0, num_distinct_batches: int = 4) -> tf.data.Dataset:
  """Endless synthetic batches of the structure `kind`'s real batches have."""
  rng = np.random.default_rng(seed)
  shape = [batch_size, num_choices, seq_length] if kind == MULTIPLE_CHOICE else [
      batch_size, seq_length]
  batches = []
  for _ in range(num_distinct_batches):
    lengths = rng.integers(max(3, seq_length // 2), seq_length + 1, size=shape[:-1])
    mask = (np.arange(seq_length) < lengths[..., None]).astype(np.int32)
    ids = rng.integers(5, vocab_size, size=shape).astype(np.int32) * mask
    type_ids = ((np.arange(seq_length) >= (lengths[..., None] // 2)) * mask).astype(np.int32)
    if kind == TAGGING:
      labels = rng.integers(0, num_classes, size=shape).astype(np.int32)
      labels = np.where(mask > 0, labels, IGNORE_LABEL).astype(np.int32)
      labels[:, 0] = IGNORE_LABEL
    elif kind == MULTIPLE_CHOICE:
      labels = rng.integers(0, num_choices, size=[batch_size]).astype(np.int32)
    elif regression:
      labels = rng.uniform(0, 1, size=[batch_size]).astype(np.float32)
    else:
      labels = rng.integers(0, num_classes, size=[batch_size]).astype(np.int32)
    batches.append({
        constants.INPUT_WORD_IDS: ids, constants.INPUT_MASK: mask,
        constants.INPUT_TYPE_IDS: type_ids, LABEL_IDS: labels,
        EXAMPLE_INDEX: np.arange(batch_size, dtype=np.int32),
    })
  stacked = {k: np.stack([b[k] for b in batches]) for k in batches[0]}
  return tf.data.Dataset.from_tensor_slices(stacked).repeat()


# --------------------------------------------------------------------------------------
# Files.


def expand_input_path(input_path: str) -> List[str]:
  """The files that comma-separated globs name, each glob sorted; none is an error."""
  files = []
  for pattern in input_path.split(","):
    pattern = pattern.strip()
    if not pattern:
      continue
    matched = sorted(tf.io.gfile.glob(pattern))
    if not matched:
      raise FileNotFoundError(f"No file matches {pattern}")
    files.extend(matched)
  if not files:
    raise ValueError("input_path names no file")
  return files


def write_text_atomically(path: str, lines: Iterable[str]) -> str:
  """Writes lines (each ending in a newline) to a temporary name, then renames it."""
  directory = os.path.dirname(path)
  if directory:
    tf.io.gfile.makedirs(directory)
  tmp = f"{path}.tmp-{os.getpid()}"
  with tf.io.gfile.GFile(tmp, "w") as f:
    for line in lines:
      f.write(line + "\n")
  tf.io.gfile.rename(tmp, path, overwrite=True)
  return path
