"""The paper's feature-based approach: per-token vectors of chosen encoder layers.

Each input line is one text, or a pair written "text A ||| text B". It is tokenized and
packed as [CLS] A [SEP] (B [SEP]) into seq_length tokens by `bert_tf.text.packing`, the
packer of fine-tuning and serving (the longer segment loses its last tokens first, B on
a tie, as in the original release), and the encoder's outputs at the chosen layers are written for every
real token as one JSON object per line, in the original release's layout:

  {"linex_index": 0, "features": [{"token": "[CLS]", "layers": [
      {"index": -1, "values": [0.1, ...]}, {"index": -2, "values": [...]}]}, ...]}

With concat_layers, each token has one entry whose "index" lists the layers and whose
"values" are their vectors concatenated in that order.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from bert_tf import constants
from bert_tf.checkpoints import files as checkpoint_files
from bert_tf.checkpoints import reading
from bert_tf.checkpoints import restore
from bert_tf.configs import run_folder
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.text import packing
from bert_tf.utils import errors
from bert_tf.utils import files
from bert_tf.utils import progress

_PAIR = re.compile(r"^(.*) \|\|\| (.*)$")


def parse_line(line: str) -> Tuple[str, Optional[str]]:
  """("A", "B") for "A ||| B", else (line, None); surrounding white space is dropped."""
  line = line.strip()
  match = _PAIR.match(line)
  if match is None:
    return line, None
  return match.group(1), match.group(2)


def parse_layers(spec: str) -> List[int]:
  """"-1,-2,-3,-4" -> [-1, -2, -3, -4]; raises ValueError naming a bad item."""
  layers = []
  for item in spec.split(","):
    item = item.strip()
    try:
      layers.append(int(item))
    except ValueError:
      raise errors.InputError(f"--layers must be comma-separated integers, got '{item}'") from None
  if not layers:
    raise errors.InputError("--layers names no layer")
  return layers


def pack_lines(lines: Sequence[str], tokenizer, seq_length: int
               ) -> Tuple[Dict[str, np.ndarray], List[List[str]]]:
  """Tokenizes and packs lines into encoder inputs with `bert_tf.text.packing`.

  Args:
    lines: texts or "A ||| B" pairs.
    tokenizer: a BertWordPieceTokenizer.
    seq_length: T, including the special tokens.

  Returns:
    ({input_word_ids, input_mask, input_type_ids: int32 [N, T]}, the token strings of
    each line's real positions).
  """
  if seq_length < 3:
    raise errors.InputError(f"seq_length must be at least 3, got {seq_length}")
  pairs = [parse_line(line) for line in lines]
  inputs = {k: np.zeros([len(pairs), seq_length], np.int32) for k in constants.ENCODER_INPUTS}
  # Single texts and pairs are packed apart: an empty B would still get its [SEP].
  for is_pair in (False, True):
    rows = [i for i, (_, b) in enumerate(pairs) if (b is not None) == is_pair]
    if not rows:
      continue
    segments = [tokenizer.tokenize_pieces(tf.constant([pairs[i][j] for i in rows]))
                for j in range(1 + is_pair)]
    packed = packing.pack_inputs(segments, seq_length, tokenizer.cls_id, tokenizer.sep_id,
                                 tokenizer.pad_id)
    for key, value in packed.items():
      inputs[key][rows] = value.numpy()
  vocab = tokenizer.vocab
  tokens = [[vocab[t] for t in ids[:length]] for ids, length in
            zip(inputs[constants.INPUT_WORD_IDS], inputs[constants.INPUT_MASK].sum(axis=1))]
  return inputs, tokens


def extract_features(encoder, tokenizer, lines: Iterable[str], layers: Sequence[int] = (-1,),
                     seq_length: int = 128, batch_size: int = 8, concat_layers: bool = False,
                     precision: int = 6) -> Iterator[dict]:
  """Yields one record per line (see the module docstring).

  Args:
    encoder: a BertEncoder (its encoder_outputs are the layers; -1 is the last).
    tokenizer: a BertWordPieceTokenizer with the encoder's vocab.
    lines: texts or "A ||| B" pairs.
    layers: layer indexes into encoder_outputs, negative from the top.
    seq_length: tokens per line, including [CLS] and [SEP]s.
    batch_size: lines per encoder call.
    concat_layers: one concatenated vector per token instead of one per layer.
    precision: decimals kept in the written values (6 as the original).
  """
  num_layers = encoder.num_layers
  for layer in layers:
    if not -num_layers <= layer < num_layers:
      raise errors.InputError(f"Layer {layer} does not exist in a {num_layers}-layer encoder")
  if seq_length > encoder.max_position_embeddings:
    raise errors.InputError(f"--seq_length {seq_length} exceeds the encoder's "
                            f"max_position_embeddings {encoder.max_position_embeddings}")

  @tf.function
  def run(inputs):
    outputs = encoder(inputs, training=False)[constants.ENCODER_OUTPUTS]
    return tf.stack([tf.cast(outputs[layer], tf.float32) for layer in layers], axis=1)

  index = 0
  batch: List[str] = []

  def flush(batch_lines, first_index):
    inputs, tokens = pack_lines(batch_lines, tokenizer, seq_length)
    values = run({k: tf.constant(v) for k, v in inputs.items()}).numpy()  # [B, L, T, H]
    values = np.round(values.astype(np.float64), precision)
    for b, line_tokens in enumerate(tokens):
      features = []
      for t, token in enumerate(line_tokens):
        if concat_layers:
          entry = [{"index": list(layers), "values": values[b, :, t, :].reshape(-1).tolist()}]
        else:
          entry = [{"index": layer, "values": values[b, j, t, :].tolist()}
                   for j, layer in enumerate(layers)]
        features.append({"token": token, "layers": entry})
      yield {"linex_index": first_index + b, "features": features}

  for line in lines:
    batch.append(line)
    if len(batch) == batch_size:
      yield from flush(batch, index)
      index += len(batch)
      batch = []
  if batch:
    yield from flush(batch, index)


def read_lines(path: str) -> List[str]:
  """The non-empty lines of a UTF-8 text file.

  Raises:
    ValueError: naming the file and line of a byte sequence that is not UTF-8.
  """
  with tf.io.gfile.GFile(path, "rb") as f:
    raw = f.read()
  lines = []
  for number, data in enumerate(raw.split(b"\n"), start=1):
    try:
      text = data.decode("utf-8").strip()
    except UnicodeDecodeError as e:
      raise errors.InputError(
          f"{path}:{number}: not UTF-8 ({e.reason} at byte {e.start})") from None
    if text:
      lines.append(text)
  return lines


def extract_features_to_file(input_file: str, output_file: str, encoder, tokenizer,
                             layers: Sequence[int] = (-1, -2, -3, -4), seq_length: int = 128,
                             batch_size: int = 8, concat_layers: bool = False,
                             progress_interval: Optional[float] = 10.0
                             ) -> Dict[str, float]:
  """Writes the features of every line of input_file as JSON lines to output_file.

  The output is written under a temporary name and renamed when complete. A progress
  line (lines done, rate, ETA) goes to stderr every `progress_interval` seconds (None:
  none).

  Returns:
    {"num_lines", "num_tokens", "seconds"}.
  """
  lines = read_lines(input_file)
  bar = progress.Progress("extract_features", total=len(lines), unit="lines",
                          interval=progress_interval)
  start = time.time()
  num_tokens = 0
  with files.atomic_open(output_file) as f:
    for record in extract_features(encoder, tokenizer, lines, layers, seq_length,
                                   batch_size, concat_layers):
      f.write(json.dumps(record, ensure_ascii=False) + "\n")
      num_tokens += len(record["features"])
      bar.update(1)
  return {"num_lines": len(lines), "num_tokens": num_tokens, "seconds": time.time() - start}


def encoder_from_folder(folder: str, vocab_file: Optional[str] = None
                        ) -> Tuple[BertEncoder, str, Optional[bool]]:
  """The encoder of a bert_tf checkpoint folder (a training's model_dir, with its
  params.yaml; a converted folder, with its config.yaml), read as the converter reads
  it (bert_tf.checkpoints.reading.read_checkpoint), with the folder's vocab and case.

  Args:
    folder: the folder, or a checkpoint in it.
    vocab_file: replaces the folder's vocab (its vocab.txt, or the one its params.yaml
      names).

  Returns:
    (the restored BertEncoder, the vocab file, whether the tokenizer lower-cases: None
    where the folder does not say).

  Raises:
    MissingInputError: the folder holds no config (naming --bert_config_file and
      --encoder_size), or no vocab is known (naming --vocab_file).
    ConversionError: the checkpoint does not fit its config, or the vocab its params.yaml
      names is not there.
  """
  params = run_folder.params_path(folder)
  configs_there = [os.path.join(os.path.dirname(params), name)
                   for name in (checkpoint_files.CONFIG_YAML, run_folder.PARAMS_FILE)]
  if not any(files.exists(path) for path in configs_there):
    raise errors.MissingInputError(
        f"--init_checkpoint {folder}: no {' or '.join(configs_there)} to describe the "
        "encoder (not a training's model_dir or a converted folder); pass "
        "--bert_config_file or --encoder_size")
  loaded = reading.read_checkpoint(folder, input_format=checkpoint_files.BERT_TF,
                                   vocab_file=vocab_file)
  if not loaded.vocab_file:
    raise errors.MissingInputError(f"No vocab in or named by {folder}: pass --vocab_file")
  encoder = getattr(loaded.model, "encoder", loaded.model)
  return encoder, loaded.vocab_file, loaded.settings.lower_case


def load_encoder(encoder_config, init_checkpoint: str = ""):
  """A BertEncoder for an EncoderConfig, restored from a bert_tf checkpoint if given.

  Args:
    encoder_config: bert_tf.configs.EncoderConfig.
    init_checkpoint: a checkpoint prefix or directory holding an `encoder` item (any
      checkpoint bert_tf writes); empty for freshly initialized weights.
  """
  encoder = BertEncoder.from_config_object(encoder_config)
  if init_checkpoint:
    restore.restore_items(init_checkpoint, encoder.checkpoint_items, items=("encoder",))
  return encoder
