"""What the checkpoint readers return, their error type, their JSON and vocab reads, and
all-or-nothing output folders."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from typing import Any, Dict, Iterator, Optional

import numpy as np

from bert_tf.configs import run_folder
from bert_tf.text import vocab as vocab_lib
from bert_tf.utils import errors
from bert_tf.utils import files as files_lib
from bert_tf.utils import optional

# Formats conversion reads and writes.
BERT_TF = "bert_tf"
GOOGLE_TF1 = "google_tf1"
HUGGINGFACE = "huggingface"
KERAS_HUB = "keras_hub"
FORMATS = (BERT_TF, GOOGLE_TF1, HUGGINGFACE, KERAS_HUB)

VOCAB_FILE = run_folder.VOCAB_FILE
# The encoder config of a bert_tf checkpoint folder.
CONFIG_YAML = "config.yaml"
# The experiment of a trainer's model_dir and of a converted task checkpoint.
TRAINER_CONFIG_YAML = run_folder.PARAMS_FILE


class ConversionError(errors.UserError, ValueError):
  """A checkpoint, its config or its vocab cannot be converted; the message says why."""


@dataclasses.dataclass
class RawCheckpoint:
  """The arrays of a checkpoint under the names of its own format.

  Attributes:
    fmt: google_tf1, huggingface or keras_hub.
    weights: {name in that format: NumPy array}, as stored (no transposes applied).
    bert_config: the parsed bert_config.json / config.json, or None when absent.
    vocab_file: the vocab.txt beside the checkpoint, or None when absent.
    source: the path read, for messages.
    architecture: the model class the checkpoint's config names (Hugging Face's
      `architectures`, KerasHub's class), or None where it names none.
    lower_case: whether its tokenizer lower-cases, where its files say.
  """

  fmt: str
  weights: Dict[str, np.ndarray]
  bert_config: Optional[Dict[str, Any]]
  vocab_file: Optional[str]
  source: str
  architecture: Optional[str] = None
  lower_case: Optional[bool] = None


def count_vocab(path: str) -> int:
  """Number of tokens in a vocab.txt, read by `bert_tf.text.vocab.load_vocab`.

  Raises:
    ConversionError: naming the file (and line) when it is missing or malformed.
  """
  try:
    return len(vocab_lib.load_vocab(path))
  except (FileNotFoundError, ValueError) as e:
    raise ConversionError(str(e)) from None


def check_vocab(vocab_file: str, vocab_size: int, source: str) -> None:
  """Raises ConversionError unless the vocab has `vocab_size` tokens, the rows of the
  word-embedding table of `source` (a checkpoint or model, named in the message)."""
  size = count_vocab(vocab_file)
  if size != vocab_size:
    raise ConversionError(f"Vocab {vocab_file} has {size} tokens but the word-embedding table "
                          f"of {source} (embeddings/word_embeddings) has {vocab_size} rows.")


def read_json(path: str) -> Dict[str, Any]:
  """A JSON file's content (a config, a shard index), local or remote.

  Raises:
    ConversionError: naming the file when it does not parse.
  """
  data = files_lib.read_bytes(path)
  try:
    return json.loads(data.decode("utf-8"))
  except ValueError as e:  # Not UTF-8, or not JSON.
    raise ConversionError(f"Cannot parse {path}: {e}") from None


@contextlib.contextmanager
def atomic_output_dir(output_dir: str, overwrite: bool = False) -> Iterator[str]:
  """Yields a temporary folder beside `output_dir` that becomes `output_dir` on success.

  Nothing appears at `output_dir` unless the body finishes without an exception, so an
  interrupted conversion never leaves a folder that looks complete.

  Raises:
    ConversionError: `output_dir` exists and `overwrite` is false.
  """
  output_dir = files_lib.absolute_path(output_dir)
  if files_lib.exists(output_dir) and not overwrite:
    raise ConversionError(f"Output folder {output_dir} already exists; choose another or "
                          "pass overwrite=True (--overwrite).")
  # Written locally (the writers of safetensors and JSON write local files), then
  # uploaded where output_dir is remote.
  with files_lib.staged_directory(output_dir) as tmp:
    yield tmp


def prepare_install(input_format: str, output_format: str) -> None:
  """Checks what a conversion needs of this install before anything is read, and picks
  the Keras backend (before Keras is imported): the original release's format
  (google_tf1) is read and written with TensorFlow; every other format converts
  without it, on JAX where TensorFlow is absent and KERAS_BACKEND is unset (Keras's
  default backend is TensorFlow's).

  Raises:
    InputError: a format this install cannot convert, naming the flag and the install.
  """
  if optional.tensorflow_installed():
    optional.tensorflow_for_tools()
    return
  for flag, fmt in (("input_format", input_format), ("output_format", output_format)):
    if fmt == GOOGLE_TF1:
      optional.require_tensorflow(f"--{flag}={GOOGLE_TF1}")
  if not os.environ.get("KERAS_BACKEND"):
    optional.require("jax", "Converting without TensorFlow", optional.extra_install("jax"))
    os.environ["KERAS_BACKEND"] = "jax"
