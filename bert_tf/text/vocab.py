"""Reading, checking and writing WordPiece vocabularies (one token per line), without
TensorFlow (it reads remote files where TensorFlow is installed).

`load_vocab` is the one reader of vocab files in bert_tf (the tokenizer,
pretraining data creation, dynamic masking, SQuAD features and checkpoint
conversion all go through it): it reads a file exactly as the in-graph lookup
table does (the id of a token is its 0-based line number) and rejects files the
table would misread, and, given the tokenizer's lower_case, a vocab whose casing
contradicts it (`check_casing`). `special_token_ids` is the one lookup of the special
tokens' ids. bert_tf.text.vocab_learning learns a vocab from text files.
"""

from bert_tf import constants
from bert_tf.utils import errors
from bert_tf.utils import files as files_lib

# A vocab is told cased or uncased by its tokens with cased letters, [bracketed]
# tokens left out: cased where at least CASED_SHARE of them hold a capital (BERT's cased
# vocab: 31%), uncased where at most UNCASED_SHARE do among at least UNCASED_MIN_TOKENS
# (BERT's uncased vocab: none of 26,930); a smaller vocab is not judged uncased.
CASED_SHARE, UNCASED_SHARE, UNCASED_MIN_TOKENS = 0.05, 0.005, 1000


class VocabCasingError(errors.InputError):
  """The vocab's casing contradicts the tokenizer's lower_case; the message names the
  vocab file."""


def check_casing(tokens, lower_case, vocab_file="<vocab>"):
  """Raises VocabCasingError for a cased vocab read with lower_case true (lower-cased
  text never meets its tokens with capitals) or an uncased one read with lower_case
  false (capitalized words become [UNK]), as far as the tokens tell.

  Args:
    tokens: the vocab's tokens, as `load_vocab` returns them.
    lower_case: the tokenizer's setting.
    vocab_file: the file they came from, for the message.
  """
  words = [t for t in tokens if not (t.startswith("[") and t.endswith("]"))]
  with_case = [t for t in words if t.lower() != t.upper()]
  capitals = sum(t != t.lower() for t in with_case)
  if lower_case and with_case and capitals >= CASED_SHARE * len(with_case):
    raise VocabCasingError(
        f"{vocab_file}: a cased vocab ({capitals} of its {len(with_case)} tokens with "
        "letters hold capitals, which lower-cased text never meets) read with lower_case "
        "true; set lower_case false, or use an uncased vocab")
  if (not lower_case and len(with_case) >= UNCASED_MIN_TOKENS
      and capitals <= UNCASED_SHARE * len(with_case)):
    raise VocabCasingError(
        f"{vocab_file}: an uncased vocab ({capitals} of its {len(with_case)} tokens with "
        "letters hold capitals: capitalized words would become [UNK]) read with "
        "lower_case false; set lower_case true, or use a cased vocab")


def load_vocab(vocab_file, lower_case=None):
  """Reads and checks a WordPiece vocab file.

  Lines are separated by "\\n"; one trailing "\\r" per line is dropped, as
  TensorFlow's text-file table initializer does.

  Args:
    vocab_file: path (local or remote: bert_tf.utils.files) of a UTF-8 file
      with one token per line.
    lower_case: the tokenizer's setting the vocab is read for, checked against
      the vocab's casing (`check_casing`); None: not checked.

  Returns:
    A list of the tokens; a token's id is its index.

  Raises:
    FileNotFoundError: the file does not exist.
    ValueError: naming the file and line, for invalid UTF-8, an empty line, a
      token with leading or trailing whitespace, or a duplicate token.
    VocabCasingError: the vocab's casing contradicts lower_case.
  """
  if not files_lib.exists(vocab_file):
    raise errors.MissingInputError(f"Vocab file not found: {vocab_file}")
  data = files_lib.read_bytes(vocab_file)
  lines = data.split(b"\n")
  if lines and lines[-1] == b"":
    lines.pop()
  tokens = []
  first_line = {}
  for number, line in enumerate(lines, start=1):
    if line.endswith(b"\r"):
      line = line[:-1]
    try:
      token = line.decode("utf-8")
    except UnicodeDecodeError as e:
      raise errors.InputError(
          f"{vocab_file}, line {number}: invalid UTF-8 ({e.reason})") from None
    if not token:
      raise errors.InputError(f"{vocab_file}, line {number}: empty line")
    if token != token.strip():
      raise errors.InputError(
          f"{vocab_file}, line {number}: token {token!r} has leading or "
          "trailing whitespace")
    if token in first_line:
      raise errors.InputError(
          f"{vocab_file}, line {number}: duplicate token {token!r} (first on "
          f"line {first_line[token]})")
    first_line[token] = number
    tokens.append(token)
  if not tokens:
    raise errors.InputError(f"{vocab_file}: the vocab is empty")
  if lower_case is not None:
    check_casing(tokens, lower_case, vocab_file)
  return tokens


def special_token_ids(tokens, vocab_file="<vocab>"):
  """Looks up the ids of `constants.SPECIAL_TOKENS` by name.

  Args:
    tokens: list of vocab tokens, as returned by `load_vocab`.
    vocab_file: the file they came from, for the error message.

  Returns:
    A dict from each special token string to its int id.

  Raises:
    ValueError: naming every special token missing from the vocab.
  """
  index = {token: i for i, token in enumerate(tokens)}
  missing = [t for t in constants.SPECIAL_TOKENS if t not in index]
  if missing:
    raise errors.InputError(
        f"{vocab_file}: the vocab lacks the special token(s) "
        f"{', '.join(missing)}")
  return {t: index[t] for t in constants.SPECIAL_TOKENS}


def write_vocab(tokens, output_file):
  """Writes one token per line, through a temporary file renamed at the end.

  Args:
    tokens: iterable of token strings (no newlines, no surrounding spaces).
    output_file: destination path (local or `tf.io.gfile`).
  """
  tokens = list(tokens)
  for i, token in enumerate(tokens):
    if not token or token != token.strip() or "\n" in token:
      raise ValueError(f"Token {i} ({token!r}) cannot be written as a line")
  with files_lib.atomic_open(output_file, "wb") as f:
    f.write(("\n".join(tokens) + "\n").encode("utf-8"))
