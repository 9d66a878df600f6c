"""Records of a sentence's words tagged at their first piece, in windows (CoNLL), read
from CoNLL files (bert_tf.data.task_files.conll)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from bert_tf import constants
from bert_tf.data.pipelines.loaders import features
from bert_tf.data.pipelines.loaders import registry
from bert_tf.data.records import record_specs

if TYPE_CHECKING:
  import tensorflow as tf  # pylint: disable=g-bad-import-order
  from bert_tf.data.pipelines import featurizers  # pylint: disable=g-bad-import-order

TAGGING = "tagging"


def tagging_dataset(examples: Sequence, tokenizer: featurizers.PieceTokenizer,
                    seq_length: int, label_names: Sequence[str], window_stride: int
                    ) -> tf.data.Dataset:
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
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.data.pipelines import featurizers  # pylint: disable=g-import-not-at-top
  from bert_tf.text import windows  # pylint: disable=g-import-not-at-top

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
    pieces = featurizers.word_pieces(tokenizer.piece_ids(word_batch.flat_values),
                                     tokenizer.unk_id)
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
    out = featurizers.pack(tokenizer, [window_pieces], seq_length)
    # The tags go through the same packer, so they are cut exactly as the pieces and
    # [CLS], [SEP] get constants.IGNORE_LABEL.
    labels = featurizers.pack(tokenizer, [window_tags], seq_length,
                              (constants.IGNORE_LABEL,) * 3)
    out[constants.LABEL_IDS] = labels[constants.INPUT_WORD_IDS]
    out[constants.EXAMPLE_INDEX] = tf.gather(batch[constants.EXAMPLE_INDEX], w["example"])
    out[constants.WINDOW_INDEX] = tf.cast(w["window"], tf.int32)
    return out

  return featurizers.featurize_in_batches(data, featurize, len(examples))


class TaggingKind(features.FeatureKind):
  """label_ids: int32 tag ids [B, T], constants.IGNORE_LABEL where no word is scored;
  window_index int32 [B], the window's place in its sentence."""

  name = TAGGING
  raw_formats = ("conll",)

  def label_feature(self, needs, seq_length):
    return self.token_feature(needs, seq_length, constants.LABEL_IDS,
                              fill=constants.IGNORE_LABEL)

  def extra_features(self, needs, seq_length):
    return (record_specs.RecordFeature(constants.WINDOW_INDEX, constants.WINDOW_INDEX, (),
                                       default=0),)

  def dummy_labels(self, rng, needs, mask):
    labels = rng.integers(0, len(needs.label_names), size=mask.shape).astype(np.int32)
    labels = np.where(mask > 0, labels, constants.IGNORE_LABEL).astype(np.int32)
    labels[:, 0] = constants.IGNORE_LABEL
    return {constants.LABEL_IDS: labels,
            constants.WINDOW_INDEX: np.zeros([len(mask)], np.int32)}

  def featurize(self, needs, examples, seq_length):
    """tagging_dataset, in windows options["window_stride"] pieces apart."""
    return tagging_dataset(
        examples, self.tokenizer(needs), seq_length, needs.label_names,
        needs.options["window_stride"])


KIND = registry.register_kind(TaggingKind())
