"""Writing a bert_tf model as a checkpoint of any format, each folder complete or absent.

A bert_tf checkpoint folder, as `save_bert_tf` writes it:
  ckpt-1.index, ckpt-1.data-*, checkpoint   tf.train.Checkpoint whose root children are the
                                            model's checkpoint_items (encoder, masked_lm,
                                            next_sentence)
  config.yaml                               `model: encoder: ...`, mergeable into any
                                            experiment with tools/train.py --config_file
  vocab.txt
"""

from __future__ import annotations

import json
import os
from typing import Dict

import tensorflow as tf
import yaml

from bert_tf.checkpoints import bert_config
from bert_tf.checkpoints import google_tf1
from bert_tf.checkpoints import huggingface
from bert_tf.checkpoints import name_map
from bert_tf.checkpoints.files import (BERT_TF, CONFIG_YAML, FORMATS, GOOGLE_TF1, HUGGINGFACE,
                                       VOCAB_FILE, ConversionError, atomic_output_dir,
                                       check_vocab)
from bert_tf.checkpoints.variables import encoder_of, model_arrays
from bert_tf.utils import files as files_lib

CHECKPOINT_NAME = "ckpt"


def save_bert_tf(model, vocab_file: str, output_dir: str, overwrite: bool = False) -> str:
  """Writes a bert_tf checkpoint folder (see the module docstring).

  Returns:
    The checkpoint prefix, `<output_dir>/ckpt-1`.
  """
  encoder_config = encoder_of(model).encoder_config()
  check_vocab(vocab_file, encoder_config.vocab_size, model.name)
  with atomic_output_dir(output_dir, overwrite) as tmp:
    checkpoint = tf.train.Checkpoint(**model.checkpoint_items)
    manager = tf.train.CheckpointManager(checkpoint, tmp, max_to_keep=1,
                                         checkpoint_name=CHECKPOINT_NAME)
    prefix = manager.save()
    with open(os.path.join(tmp, CONFIG_YAML), "w", encoding="utf-8") as f:
      yaml.safe_dump({"model": {"encoder": encoder_config.as_dict()}}, f, sort_keys=False)
    files_lib.copy(vocab_file, os.path.join(tmp, VOCAB_FILE))
  return os.path.join(files_lib.absolute_path(output_dir), os.path.basename(prefix))


def huggingface_config(model) -> Dict[str, object]:
  """The config.json of `model` as Hugging Face transformers reads it."""
  items = tuple(model.checkpoint_items)
  config = bert_config.to_bert_config(encoder_of(model).encoder_config())
  if name_map.NEXT_SENTENCE in items:
    architecture = "BertForPreTraining"
  elif name_map.MASKED_LM in items:
    architecture = "BertForMaskedLM"
  else:
    architecture = "BertModel"
  config.update(architectures=[architecture], model_type="bert", pad_token_id=0,
                position_embedding_type="absolute")
  return config


def save_huggingface(model, vocab_file: str, output_dir: str, overwrite: bool = False) -> str:
  """Writes config.json, model.safetensors and vocab.txt of a Hugging Face BERT.

  With the heads, names are BertForPreTraining's ("bert." prefix, cls.*); the tied
  decoder matrix is not stored, as transformers itself saves it.
  """
  arrays = model_arrays(model, HUGGINGFACE)
  check_vocab(vocab_file, encoder_of(model).vocab_size, model.name)
  with atomic_output_dir(output_dir, overwrite) as tmp:
    huggingface.write_huggingface(arrays, huggingface_config(model), tmp)
    files_lib.copy(vocab_file, os.path.join(tmp, VOCAB_FILE))
  return files_lib.absolute_path(output_dir)


def save_google_tf1(model, vocab_file: str, output_dir: str, overwrite: bool = False) -> str:
  """Writes bert_model.ckpt, bert_config.json and vocab.txt as the original release."""
  arrays = model_arrays(model, GOOGLE_TF1)
  check_vocab(vocab_file, encoder_of(model).vocab_size, model.name)
  with atomic_output_dir(output_dir, overwrite) as tmp:
    google_tf1.write_google_tf1(arrays, os.path.join(tmp, google_tf1.CHECKPOINT_PREFIX))
    with open(os.path.join(tmp, google_tf1.CONFIG_FILE), "w", encoding="utf-8") as f:
      json.dump(bert_config.to_bert_config(encoder_of(model).encoder_config()), f, indent=2)
      f.write("\n")
    files_lib.copy(vocab_file, os.path.join(tmp, VOCAB_FILE))
  return os.path.join(files_lib.absolute_path(output_dir), google_tf1.CHECKPOINT_PREFIX)


_WRITERS = {BERT_TF: save_bert_tf, HUGGINGFACE: save_huggingface, GOOGLE_TF1: save_google_tf1}


def save_checkpoint(model, vocab_file: str, output_dir: str, output_format: str = BERT_TF,
                    overwrite: bool = False) -> str:
  """Writes `model` in `output_format` (bert_tf, huggingface or google_tf1)."""
  if output_format not in _WRITERS:
    raise ConversionError(f"Unknown output format '{output_format}'; formats: "
                          f"{', '.join(FORMATS)}")
  return _WRITERS[output_format](model, vocab_file, output_dir, overwrite)
