"""WordPiece ids and packed encoder inputs of raw text without TensorFlow, for inference
on the JAX backend where TensorFlow is not installed.

The tokenizing is Hugging Face's `tokenizers` library (its BERT normalizer and
pre-tokenizer and WordPiece: the original BERT's cleaning, Chinese-character splitting,
lower-casing with accents stripped for uncased vocabs, words over 100 characters [UNK]),
which gives the ids of `bert_tf.text.tokenizer.BertWordPieceTokenizer` (tf-text), as
tests/text/test_tokenizer.py and tests/text/test_host_tokenizer.py check, but for two
characters of rare text: with lower_case, a word-final capital sigma (Python lower-cases
it to "ς", `tokenizers` to "σ"), and private-use characters, which `tokenizers` drops.

Packing is `[CLS] A [SEP] (B [SEP])` in NumPy with the original truncation rule of
`bert_tf.text.packing` (drop the last piece of the longer segment, of B on a tie), not
`tokenizers`' own truncation, which cuts A on a tie. A literal "[MASK]" in the text is
the [MASK] token, as the fill-mask export reads it.
"""

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from bert_tf import constants
from bert_tf.text import vocab as vocab_lib
from bert_tf.utils import optional


class HostTokenizer:
  """A WordPiece tokenizer and packer of Python strings into NumPy encoder inputs."""

  def __init__(self, vocab_file: str, lower_case: bool):
    """Args:
      vocab_file: the WordPiece vocab (local or remote), read by
        `bert_tf.text.vocab.load_vocab`, its casing checked against lower_case.
      lower_case: True for uncased vocabs.

    Raises:
      InputError: `tokenizers` is not installed (one line naming the install), or the
        vocab is unreadable or lacks a special token.
    """
    library = optional.module("tokenizers", "Tokenizing without TensorFlow",
                              optional.extra_install("jax"))
    self.tokens = vocab_lib.load_vocab(vocab_file, lower_case=bool(lower_case))
    self.special_ids = vocab_lib.special_token_ids(self.tokens, vocab_file)
    self.lower_case = bool(lower_case)
    # Assembled from the library's BERT parts rather than its BertWordPieceTokenizer,
    # which would also read a literal "[CLS]", "[SEP]", "[PAD]" or "[UNK]" in the text as
    # that token; the graph reads only "[MASK]" so (the fill-mask export's marks).
    tokenizer = library.Tokenizer(library.models.WordPiece(
        {token: i for i, token in enumerate(self.tokens)}, unk_token=constants.UNK_TOKEN,
        max_input_chars_per_word=100))
    tokenizer.normalizer = library.normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=self.lower_case,
        lowercase=self.lower_case)
    tokenizer.pre_tokenizer = library.pre_tokenizers.BertPreTokenizer()
    tokenizer.add_special_tokens([constants.MASK_TOKEN])
    self._tokenizer = tokenizer

  @property
  def vocab_size(self) -> int:
    return len(self.tokens)

  @property
  def mask_id(self) -> int:
    return self.special_ids[constants.MASK_TOKEN]

  def pieces(self, texts: Sequence[str]) -> List[List[int]]:
    """WordPiece ids of each text, without special tokens besides literal [MASK]s."""
    encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
    return [encoding.ids for encoding in encodings]

  def pieces_with_offsets(self, texts: Sequence[str]
                          ) -> List[Tuple[List[int], List[int], List[int]]]:
    """(ids, begin, end) of each text's WordPieces, as `pieces`, with each piece's
    character span in the text (end exclusive; a word's [UNK] spans the word)."""
    encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
    return [(e.ids, [b for b, _ in e.offsets], [end for _, end in e.offsets])
            for e in encodings]

  def encode(self, texts: Sequence[str], texts_b: Optional[Sequence[str]] = None,
             seq_length: int = 128) -> Tuple[Dict[str, np.ndarray], np.ndarray]:
    """Tokenizes and packs a batch.

    Args:
      texts: B strings, segment A.
      texts_b: None, or B strings, segment B.
      seq_length: T >= 3, the packed length.

    Returns:
      ({input_word_ids, input_mask, input_type_ids}: int32 [B, T], truncated_tokens:
      int32 [B], the pieces of each row cut to fit).
    """
    segments = [self.pieces(texts)]
    if texts_b is not None:
      segments.append(self.pieces(texts_b))
    return pack(segments, seq_length, self.special_ids)


def truncated_lengths(length_a: int, length_b: int, budget: int) -> Tuple[int, int]:
  """The lengths the original pair truncation keeps (`bert_tf.text.packing`'s rule)."""
  if length_a + length_b <= budget:
    return length_a, length_b
  shorter = min(length_a, length_b)
  if 2 * shorter > budget:
    return (budget + 1) // 2, budget // 2
  return (budget - length_b, length_b) if length_a > length_b else (length_a,
                                                                     budget - length_a)


def pack(segments: Sequence[Sequence[Sequence[int]]], seq_length: int,
         special_ids: Dict[str, int]) -> Tuple[Dict[str, np.ndarray], np.ndarray]:
  """Packs one or two segments of piece ids per row as [CLS] A [SEP] (B [SEP]).

  Args:
    segments: one or two lists of B rows of piece ids.
    seq_length: T >= 3.
    special_ids: the vocab's special tokens' ids (`vocab.special_token_ids`).

  Returns:
    (encoder inputs int32 [B, T], the pieces cut by truncation int32 [B]).
  """
  if seq_length < 3:
    raise ValueError(f"seq_length must be at least 3, got {seq_length}")
  rows = len(segments[0])
  inputs = {name: np.zeros([rows, seq_length], np.int32) for name in constants.ENCODER_INPUTS}
  inputs[constants.INPUT_WORD_IDS][:] = special_ids[constants.PAD_TOKEN]
  truncated = np.zeros([rows], np.int32)
  cls_id, sep_id = special_ids[constants.CLS_TOKEN], special_ids[constants.SEP_TOKEN]
  for row in range(rows):
    pieces = [list(segment[row]) for segment in segments]
    budget = seq_length - len(pieces) - 1
    if len(pieces) == 1:
      kept = [pieces[0][:budget]]
    else:
      length_a, length_b = truncated_lengths(len(pieces[0]), len(pieces[1]), budget)
      kept = [pieces[0][:length_a], pieces[1][:length_b]]
    ids, types = [cls_id], [0]
    for segment_index, segment in enumerate(kept):
      ids += segment + [sep_id]
      types += [segment_index] * (len(segment) + 1)
    inputs[constants.INPUT_WORD_IDS][row, :len(ids)] = ids
    inputs[constants.INPUT_MASK][row, :len(ids)] = 1
    inputs[constants.INPUT_TYPE_IDS][row, :len(ids)] = types
    truncated[row] = sum(map(len, pieces)) - sum(map(len, kept))
  return inputs, truncated
