"""BERT WordPiece tokenizer made of TensorFlow and tensorflow-text graph ops.

It reproduces the original google-research/bert `FullTokenizer` (see
`bert_tf.text.normalization` for the text normalization and word splitting)
and runs eagerly, inside `tf.function`, in `tf.data` pipelines and inside
SavedModels, where the vocab file travels as an asset. Only long-standing ops
are used (listed in `bert_tf.text.serving_ops.TOKENIZER_OP_ALLOWLIST`) so that
TF Serving's older tensorflow-text can load exported models.
"""

import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf import constants
from bert_tf.text import normalization
from bert_tf.text import vocab as vocab_lib

# A UTF-8 character takes at most 4 bytes; the byte limit of the wordpiece op
# is set so that only the character limit below ever applies.
_MAX_BYTES_PER_CHAR = 4


class BertWordPieceTokenizer(tf.Module):
  """Raw text to WordPiece ids, as BERT's original tokenizer does it.

  Uncased (`lower_case=True`): clean the text, lower-case it like Python's
  `str.lower()`, strip accents (NFD, drop Mn), split. Cased: clean and split
  only. Words are split on whitespace, around every punctuation character
  (ASCII 33-47, 58-64, 91-96, 123-126 and Unicode P*) and around CJK
  ideographs; each word becomes its greedy longest-match-first WordPiece
  pieces, or a single [UNK] if that fails or the word has more than
  `max_chars_per_word` characters.

  Special token ids are looked up by name in the vocab (`cls_id`, `sep_id`,
  ...). Token ids are `tf.int64`; offsets are byte offsets into the original
  UTF-8 strings.
  """

  def __init__(self, vocab_file, lower_case, max_chars_per_word=100,
               fast=False, name="bert_wordpiece_tokenizer"):
    """Loads and checks the vocab.

    Args:
      vocab_file: path of the vocab, one token per line (id = line number).
        It must hold the tokens in `bert_tf.constants.SPECIAL_TOKENS`.
      lower_case: Python bool; True for uncased vocabs (lower-case and strip
        accents), False for cased ones.
      max_chars_per_word: words longer than this many characters (after
        normalization) become [UNK]. 100 as in Hugging Face's BERT tokenizers
        and tensorflow-text; the original BERT release used 200.
      fast: if True, the WordPiece step runs tensorflow-text's
        `FastWordpieceTokenizer` (same ids, several times faster for that
        step). Its op is newer than the tensorflow-text in TF Serving, so use
        it for offline data preparation only, never in an exported model.
      name: module name.

    Raises:
      FileNotFoundError: `vocab_file` does not exist.
      ValueError: the vocab is malformed, lacks a special token or its casing
        contradicts lower_case (the message names the file and the token or line).
    """
    super().__init__(name=name)
    if max_chars_per_word < 1:
      raise ValueError(f"max_chars_per_word must be >= 1, got {max_chars_per_word}")
    self._vocab_path = vocab_file
    self._tokens = tuple(vocab_lib.load_vocab(vocab_file, lower_case=bool(lower_case)))
    self._special_ids = vocab_lib.special_token_ids(self._tokens, vocab_file)
    self._lower_case = bool(lower_case)
    self._max_chars_per_word = int(max_chars_per_word)
    with tf.init_scope():
      # The vocab travels with a SavedModel as an asset; the tables hold the tokens
      # read above. (Tables initialized from the asset file are shared by a name made
      # from the Asset's memory address and outlive it: a later tokenizer whose Asset
      # reused the address looked up in the earlier vocab.)
      self.vocab_asset = tf.saved_model.Asset(vocab_file)
      tokens = tf.constant(self._tokens, tf.string)
      ids = tf.range(len(self._tokens), dtype=tf.int64)
      self._token_to_id = tf.lookup.StaticHashTable(
          tf.lookup.KeyValueTensorInitializer(tokens, ids), default_value=-1)
      self._id_to_token = tf.lookup.StaticHashTable(
          tf.lookup.KeyValueTensorInitializer(ids, tokens),
          default_value=constants.UNK_TOKEN)
    self._fast = bool(fast)
    max_bytes_per_word = _MAX_BYTES_PER_CHAR * self._max_chars_per_word
    if self._fast:
      self._wordpiece = tf_text.FastWordpieceTokenizer(
          vocab=list(self._tokens),
          suffix_indicator="##",
          max_bytes_per_word=max_bytes_per_word,
          token_out_type=tf.int64,
          unknown_token=constants.UNK_TOKEN,
          no_pretokenization=True)
    else:
      self._wordpiece = tf_text.WordpieceTokenizer(
          self._token_to_id,
          suffix_indicator="##",
          max_bytes_per_word=max_bytes_per_word,
          token_out_type=tf.int64,
          unknown_token=constants.UNK_TOKEN,
          split_unknown_characters=False)

  # Vocab facts, as Python values.

  @property
  def vocab_file(self):
    """The vocab path given to the constructor (str)."""
    return self._vocab_path

  @property
  def lower_case(self):
    return self._lower_case

  @property
  def max_chars_per_word(self):
    return self._max_chars_per_word

  @property
  def fast(self):
    return self._fast

  @property
  def vocab(self):
    """All tokens, a tuple of str indexed by id."""
    return self._tokens

  @property
  def vocab_size(self):
    return len(self._tokens)

  @property
  def special_token_ids(self):
    """Dict from each of `constants.SPECIAL_TOKENS` to its id."""
    return dict(self._special_ids)

  @property
  def pad_id(self):
    return self._special_ids[constants.PAD_TOKEN]

  @property
  def unk_id(self):
    return self._special_ids[constants.UNK_TOKEN]

  @property
  def cls_id(self):
    return self._special_ids[constants.CLS_TOKEN]

  @property
  def sep_id(self):
    return self._special_ids[constants.SEP_TOKEN]

  @property
  def mask_id(self):
    return self._special_ids[constants.MASK_TOKEN]

  def token_to_id(self, token):
    """Python lookup of one token's id; KeyError if it is not in the vocab."""
    try:
      return self._tokens.index(token)
    except ValueError:
      raise KeyError(f"{token!r} is not in the vocab {self._vocab_path}") from None

  def get_config(self):
    """The constructor arguments (except `name`)."""
    return dict(vocab_file=self._vocab_path, lower_case=self._lower_case,
                max_chars_per_word=self._max_chars_per_word, fast=self._fast)

  # Graph methods.

  def split_words(self, strings):
    """The basic tokenizer: normalized words, before WordPiece.

    Args:
      strings: `tf.string` [B] (or a scalar) of raw UTF-8 text.

    Returns:
      `tf.RaggedTensor` of `tf.string`, shape [B, (words)] (or [(words)]).
    """
    return normalization.split_words(strings, self._lower_case)

  def tokenize(self, strings):
    """Tokenizes raw text into WordPiece ids grouped by word.

    Args:
      strings: `tf.string` [B] (or a scalar) of raw UTF-8 text.

    Returns:
      `tf.RaggedTensor` of `tf.int64`, shape [B, (words), (pieces)] (or
      [(words), (pieces)] for a scalar input).
    """
    ids, _, _ = self._tokenize(strings, with_offsets=False)
    return ids

  def tokenize_pieces(self, strings):
    """Like `tokenize` with the word axis merged away.

    Args:
      strings: `tf.string` [B] (or a scalar) of raw UTF-8 text.

    Returns:
      `tf.RaggedTensor` of `tf.int64`, shape [B, (pieces)] (or a `tf.Tensor`
      of shape [pieces] for a scalar input).
    """
    return _merge_words(self.tokenize(strings))

  def tokenize_with_offsets(self, strings):
    """Tokenizes and locates every piece in the original text.

    Args:
      strings: `tf.string` [B] (or a scalar) of raw UTF-8 text.

    Returns:
      A tuple `(ids, begin, end)` of `tf.RaggedTensor`s of `tf.int64`, all of
      shape [B, (words), (pieces)] (or [(words), (pieces)] for a scalar):
      `strings[b][begin:end]` (bytes, end exclusive) is the smallest span of
      whole characters of the original text that normalizes to the piece (an
      [UNK] covers its whole word; a "##" piece excludes the "##").
    """
    return self._tokenize(strings, with_offsets=True)

  def ids_to_tokens(self, ids):
    """Maps ids to token strings ("[UNK]" for ids outside the vocab).

    Args:
      ids: integer `tf.Tensor` or `tf.RaggedTensor` of any shape.

    Returns:
      `tf.string` tensor or ragged tensor of the same shape.
    """
    if isinstance(ids, tf.RaggedTensor):
      return ids.with_flat_values(self.ids_to_tokens(ids.flat_values))
    return self._id_to_token.lookup(tf.cast(ids, tf.int64))

  def detokenize(self, ids):
    """Joins pieces back into text: words separated by single spaces.

    "##" pieces are glued to the piece before them. The result is the
    normalized text, e.g. "Héllo,world" (uncased) -> "hello , world".

    Args:
      ids: integer ids, a `tf.RaggedTensor` of shape [B, (pieces)] or
        [B, (words), (pieces)], or a dense `tf.Tensor` [B, T] from which every
        [PAD] id is dropped first.

    Returns:
      `tf.string` [B].
    """
    if isinstance(ids, tf.RaggedTensor):
      if ids.ragged_rank == 2:
        ids = ids.merge_dims(1, 2)
    else:
      ids = tf.convert_to_tensor(ids)
      ids = tf.ragged.boolean_mask(ids, ids != tf.cast(self.pad_id, ids.dtype))
    text = tf.strings.reduce_join(self.ids_to_tokens(ids), axis=-1, separator=" ")
    return tf.strings.regex_replace(text, " ##", "")

  def _tokenize(self, strings, with_offsets):
    strings = tf.convert_to_tensor(strings, dtype=tf.string)
    rank = strings.shape.rank
    if rank == 0:
      results = self._tokenize(tf.expand_dims(strings, 0), with_offsets)
      return tuple(None if r is None else r[0] for r in results)
    if rank != 1:
      raise ValueError(
          f"strings must be a scalar or a vector [B], got shape {strings.shape}")
    normalized = normalization.normalize(strings, self._lower_case)
    if with_offsets:
      words, word_begin, _ = normalization.split_words_with_offsets(normalized)
    else:
      words = normalization.split_normalized_words(normalized)
    flat_words = words.flat_values
    too_long = (tf.strings.length(flat_words, unit="UTF8_CHAR")
                > self._max_chars_per_word)
    # The vocab always holds "[UNK]", which WordPiece maps to itself.
    pieces, piece_begin, piece_end = self._wordpiece.tokenize_with_offsets(
        tf.where(too_long, constants.UNK_TOKEN, flat_words))
    ids = words.with_flat_values(pieces)
    if not with_offsets:
      return ids, None, None
    word_bytes = tf.cast(tf.strings.length(flat_words), tf.int64)
    # A too-long word's single [UNK] piece spans the whole word.
    piece_word = pieces.value_rowids()
    piece_end_flat = tf.where(
        tf.gather(too_long, piece_word), tf.gather(word_bytes, piece_word),
        piece_end.flat_values)
    normalized_begin = tf.gather(word_begin.flat_values, piece_word)
    begin_flat = normalized_begin + piece_begin.flat_values
    end_flat = normalized_begin + piece_end_flat
    piece_row = tf.gather(words.value_rowids(), piece_word)
    to_source = normalization.source_offsets_mapper(strings, self._lower_case)
    source_begin, source_end = to_source(piece_row, begin_flat, end_flat)
    return (ids, ids.with_flat_values(source_begin),
            ids.with_flat_values(source_end))


def _merge_words(ids):
  """[B, (words), (pieces)] -> [B, (pieces)]; [(words), (pieces)] -> [pieces]."""
  if ids.ragged_rank == 2:
    return ids.merge_dims(1, 2)
  return ids.flat_values
