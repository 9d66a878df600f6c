"""Featurizers of the fine-tuning tasks: raw examples to model inputs, in tf.data.

One in-graph featurizer per kind of task turns raw examples into unbatched, unpadded
feature dicts, packed by `bert_tf.text.packing.pack_inputs` exactly as the exported
models pack raw text. The same features feed training directly from task files and
are written as TFRecords (`bert_tf.data.records.tfrecords`), so both paths agree.

Each example is a dict of
  input_word_ids, input_mask, input_type_ids: int32 [T_i] (or [C, T_i] for multiple
    choice), T_i <= seq_length;
  label_ids: int32 class, float32 score (regression), int32 [T_i] tags with
    IGNORE_LABEL at every piece but a word's first, or int32 choice;
  example_index: int32, the example's index in its file.
"""

from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from bert_tf import constants
from bert_tf.text import packing
from bert_tf.text import windows
from bert_tf.text.tokenizer import BertWordPieceTokenizer


_FEATURIZE_BATCH = 256


class PieceTokenizer:
  """WordPiece ids of strings, in-graph, with the special-token ids of the vocab.

  Wraps bert_tf.text.tokenizer.BertWordPieceTokenizer, merging its word axis.

  Args:
    vocab_file: the WordPiece vocab, one token a line.
    lower_case: whether the tokenizer lower-cases and strips accents.
  """

  def __init__(self, vocab_file: str, lower_case: bool = True):
    if not vocab_file:
      raise ValueError("Reading raw task files needs tokenizer.vocab_file")
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
      pass constants.IGNORE_LABEL for all three to be cut exactly as their pieces are.

  Returns:
    {input_word_ids, input_mask, input_type_ids}: ragged int32 [N, (T_i)], T_i <= seq_length.
  """
  cls_id, sep_id, pad_id = special_ids or (tokenizer.cls_id, tokenizer.sep_id,
                                           tokenizer.pad_id)
  packed = packing.pack_inputs(segments, seq_length, cls_id, sep_id, pad_id)
  lengths = tf.reduce_sum(packed[constants.INPUT_MASK], axis=1)
  return {k: tf.RaggedTensor.from_tensor(v, lengths=lengths) for k, v in packed.items()}


def sentence_dataset(examples: Sequence, tokenizer: PieceTokenizer, seq_length: int,
                     label_ids: Sequence, regression: bool) -> tf.data.Dataset:
  """Featurizes SentenceExamples.

  Args:
    examples: bert_tf.data.task_files.glue.SentenceExample list.
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
      constants.LABEL_IDS: np.asarray(label_ids, np.float32 if regression else np.int32),
      constants.EXAMPLE_INDEX: np.asarray([e.index for e in examples], np.int32),
  }

  def featurize(batch):
    segments = [tokenizer.piece_ids(batch["text_a"])]
    if pair:
      segments.append(tokenizer.piece_ids(batch["text_b"]))
    return dict(_pack(tokenizer, segments, seq_length), **{
        constants.LABEL_IDS: batch[constants.LABEL_IDS],
        constants.EXAMPLE_INDEX: batch[constants.EXAMPLE_INDEX],
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
                    label_names: Sequence[str], window_stride: int) -> tf.data.Dataset:
  """Featurizes TaggingExamples in windows; each word is labelled at its first piece in
  the window giving it the most context.

  A word that tokenizes to nothing becomes [UNK], so that every word keeps one scored
  position. A sentence of more than seq_length - 2 pieces is cut into windows of
  seq_length - 2 pieces starting `window_stride` pieces apart
  (`bert_tf.text.windows`); a word's tag sits on its first piece only in the window
  where that piece has the most context, so every word of the file is scored exactly
  once, in training and evaluation alike. Unlabelled examples get tag label_names[0]
  for every word.

  Returns:
    Dataset of dicts, one per window: input_word_ids, input_mask, input_type_ids,
    label_ids (int32 [T_i], constants.IGNORE_LABEL at [CLS], [SEP], non-first pieces
    and first pieces read from another window), example_index, window_index (int32,
    the window's place in its sentence).
  """
  if window_stride < 1:
    raise ValueError(f"window_stride must be positive, got {window_stride}")
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
      constants.EXAMPLE_INDEX: np.asarray([e.index for e in examples], np.int32),
  }
  max_tokens = seq_length - 2
  overlap = windows.max_overlap(max_tokens, window_stride)

  def featurize(batch):
    word_batch = batch["words"]
    pieces = word_pieces(tokenizer.piece_ids(word_batch.flat_values), tokenizer.unk_id)
    lengths = pieces.row_lengths()
    word_tags = tf.repeat(batch["tags"].flat_values, lengths)
    piece_tags = tf.where(tf.equal(tf.ragged.range(lengths).flat_values, 0), word_tags,
                          constants.IGNORE_LABEL)
    # Pieces of every word regrouped into pieces of every sentence.
    num_pieces = tf.RaggedTensor.from_row_splits(pieces, word_batch.row_splits).merge_dims(
        1, 2).row_lengths()
    w, _ = windows.sequence_windows(num_pieces, max_tokens, window_stride)
    index = tf.ragged.range(w["piece_start"], w["piece_start"] + w["window_length"])
    # Which of each window's pieces have their most context there.
    row = index.value_rowids()
    of_row = lambda name: tf.gather(w[name], row)  # pylint: disable=unnecessary-lambda-assignment
    owner = windows.max_context_window(
        index.flat_values - of_row("piece_start") + of_row("window_start"),
        of_row("num_windows"), of_row("stride"), of_row("max_tokens"), of_row("num_pieces"),
        overlap)
    window_tags = index.with_flat_values(tf.where(
        tf.equal(owner, of_row("window")), tf.gather(piece_tags, index.flat_values),
        constants.IGNORE_LABEL))
    window_pieces = index.with_flat_values(tf.gather(pieces.flat_values, index.flat_values))
    features = _pack(tokenizer, [window_pieces], seq_length)
    # The tags go through the same packer, so they are cut exactly as the pieces and
    # [CLS], [SEP] get constants.IGNORE_LABEL.
    labels = _pack(tokenizer, [window_tags], seq_length, (constants.IGNORE_LABEL,) * 3)
    features[constants.LABEL_IDS] = labels[constants.INPUT_WORD_IDS]
    features[constants.EXAMPLE_INDEX] = tf.gather(batch[constants.EXAMPLE_INDEX], w["example"])
    features[constants.WINDOW_INDEX] = tf.cast(w["window"], tf.int32)
    return features

  return _featurize(data, featurize, len(examples))


def word_pieces(pieces: tf.RaggedTensor, unk_id: int) -> tf.RaggedTensor:
  """The pieces of each word, [UNK] for a word without any.

  Args:
    pieces: ragged int [W, (pieces)].
    unk_id: the [UNK] id.

  Returns:
    ragged [W, (pieces)] like `pieces`, every row non-empty.
  """
  lengths = tf.maximum(pieces.row_lengths(), 1)
  unk = tf.RaggedTensor.from_tensor(
      tf.fill(tf.stack([pieces.nrows(), 1]), tf.constant(unk_id, pieces.dtype)))
  with_unk = tf.concat([pieces, unk], axis=1)
  return tf.gather(with_unk, tf.ragged.range(lengths), batch_dims=1)


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
      constants.LABEL_IDS: np.asarray([e.label or 0 for e in examples], np.int32),
      constants.EXAMPLE_INDEX: np.asarray([e.index for e in examples], np.int32),
  }

  def featurize(batch):
    contexts = tf.repeat(batch["context"], num_choices)
    endings = tf.reshape(batch["endings"], [-1])
    packed = _pack(tokenizer, [tokenizer.piece_ids(contexts), tokenizer.piece_ids(endings)],
                   seq_length)
    features = {k: tf.RaggedTensor.from_uniform_row_length(v, num_choices)
                for k, v in packed.items()}
    features[constants.LABEL_IDS] = batch[constants.LABEL_IDS]
    features[constants.EXAMPLE_INDEX] = batch[constants.EXAMPLE_INDEX]
    return features

  return _featurize(data, featurize, len(examples))
