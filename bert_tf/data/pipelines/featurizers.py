"""What the record kinds' featurizers share: raw examples to model inputs, in tf.data.

Each kind of featurized examples (bert_tf.data.pipelines.loaders: sentence, tagging,
multiple_choice) turns its raw examples into unbatched, unpadded feature dicts in its
own module, in-graph, with the tokenizer, the packer and the batched map of this
module: packed by `bert_tf.text.packing.pack_inputs` exactly as the exported models
pack raw text. The same features feed training directly from task files and are
written as TFRecords (`bert_tf.data.records.tfrecords`), so both paths agree.

Each example is a dict of
  input_word_ids, input_mask, input_type_ids: int32 [T_i] (or [C, T_i] for multiple
    choice), T_i <= seq_length;
  label_ids and the kind's other features;
  example_index: int32, the example's index in its file.
"""

from typing import Callable, Dict, List, Mapping, Optional, Sequence

import tensorflow as tf

from bert_tf import constants
from bert_tf.text import packing
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


def pack(tokenizer: PieceTokenizer, segments: List[tf.Tensor], seq_length: int,
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


def featurize_in_batches(data: Mapping[str, object], featurize: Callable,
                         num_examples: int) -> tf.data.Dataset:
  """`featurize` mapped over batches of the columns `data` ({name: [N, ...]}) of
  `num_examples` examples, then unbatched, ragged features made dense: one feature dict
  per example (or per window)."""
  if num_examples == 0:
    raise ValueError("No examples to featurize")
  ds = tf.data.Dataset.from_tensor_slices(data).batch(_FEATURIZE_BATCH)
  ds = ds.map(featurize, num_parallel_calls=tf.data.AUTOTUNE).unbatch()
  return ds.map(_to_dense)


def _to_dense(features):
  return {k: v.to_tensor() if isinstance(v, tf.RaggedTensor) else v
          for k, v in features.items()}


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
