"""Reading, checking and writing WordPiece vocabularies (one token per line), without
TensorFlow (it reads remote files where TensorFlow is installed).

`load_vocab` is the one reader of vocab files in bert_tf (the tokenizer,
pretraining data creation, dynamic masking, SQuAD features and checkpoint
conversion all go through it): it reads a file exactly as the in-graph lookup
table does (the id of a token is its 0-based line number) and rejects files the
table would misread. `special_token_ids` is the one lookup of the special
tokens' ids. bert_tf.text.vocab_learning learns a vocab from text files.
"""

from bert_tf import constants
from bert_tf.utils import errors
from bert_tf.utils import files as files_lib


def load_vocab(vocab_file):
  """Reads and checks a WordPiece vocab file.

  Lines are separated by "\\n"; one trailing "\\r" per line is dropped, as
  TensorFlow's text-file table initializer does.

  Args:
    vocab_file: path (local or remote: bert_tf.utils.files) of a UTF-8 file
      with one token per line.

  Returns:
    A list of the tokens; a token's id is its index.

  Raises:
    FileNotFoundError: the file does not exist.
    ValueError: naming the file and line, for invalid UTF-8, an empty line, a
      token with leading or trailing whitespace, or a duplicate token.
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
