"""Reads and writes checkpoints of the original Google BERT release (TensorFlow 1).

Those are name-based checkpoints (`bert_model.ckpt.index` / `.data-*`) beside
`bert_config.json` and `vocab.txt`. Reading goes through `tf.train.load_checkpoint`, so no
TF1 graph is built; writing builds a TF1 graph and saves it with `tf.compat.v1.train.Saver`,
which produces the very format the release used.
"""

from __future__ import annotations

import glob
import os
from typing import Dict, Optional

import numpy as np
import tensorflow as tf

from bert_tf.checkpoints import name_map
from bert_tf.checkpoints.files import (ConversionError, GOOGLE_TF1, RawCheckpoint, VOCAB_FILE,
                                      read_json)

CHECKPOINT_PREFIX = "bert_model.ckpt"
CONFIG_FILE = "bert_config.json"


def find_checkpoint_prefix(path: str) -> str:
  """Resolves a checkpoint prefix from a prefix, an `.index` file or a folder.

  A folder must hold a `checkpoint` state file, `bert_model.ckpt.index`, or exactly one
  `*.index` file.
  """
  if path.endswith(".index"):
    path = path[:-len(".index")]
  if tf.io.gfile.exists(path + ".index"):
    return path
  if os.path.isdir(path):
    latest = tf.train.latest_checkpoint(path)
    if latest:
      return latest
    if os.path.exists(os.path.join(path, CHECKPOINT_PREFIX + ".index")):
      return os.path.join(path, CHECKPOINT_PREFIX)
    indexes = sorted(glob.glob(os.path.join(path, "*.index")))
    if len(indexes) == 1:
      return indexes[0][:-len(".index")]
    if indexes:
      raise ConversionError(f"{path} holds several checkpoints "
                            f"({', '.join(os.path.basename(i) for i in indexes)}); "
                            "pass the prefix of one of them.")
  raise ConversionError(f"No TensorFlow checkpoint at {path} (looked for {path}.index, a "
                        f"'checkpoint' file and {CHECKPOINT_PREFIX}.index).")


def variable_names(prefix: str) -> List[str]:
  """The names of the variables of the TensorFlow checkpoint at `prefix`."""
  return [name for name, _ in tf.train.list_variables(prefix)]


def read_google_tf1(path: str, config_file: Optional[str] = None,
                    vocab_file: Optional[str] = None) -> RawCheckpoint:
  """Reads an original BERT checkpoint's arrays.

  Args:
    path: the checkpoint prefix (`.../bert_model.ckpt`) or its folder.
    config_file: bert_config.json; default: the one beside the checkpoint, if any.
    vocab_file: vocab.txt; default: the one beside the checkpoint, if any.

  Returns:
    A RawCheckpoint whose weights are keyed by TF1 variable name, as stored. The global
    step and optimizer slots are left out.
  """
  prefix = find_checkpoint_prefix(path)
  try:
    reader = tf.train.load_checkpoint(prefix)
  except (tf.errors.OpError, ValueError) as e:
    raise ConversionError(f"Cannot read checkpoint {prefix}: {e}") from None
  weights = {}
  for name in reader.get_variable_to_shape_map():
    if name_map.TF1_IGNORED.match(name):
      continue
    weights[name] = np.asarray(reader.get_tensor(name))
  folder = os.path.dirname(os.path.abspath(prefix))
  config_file = config_file or _existing(os.path.join(folder, CONFIG_FILE))
  bert_config = None
  if config_file:
    bert_config = read_json(config_file)
  vocab_file = vocab_file or _existing(os.path.join(folder, VOCAB_FILE))
  return RawCheckpoint(GOOGLE_TF1, weights, bert_config, vocab_file, prefix)


def write_google_tf1(weights: Dict[str, np.ndarray], prefix: str) -> str:
  """Writes arrays as a name-based TF1 checkpoint, one variable per entry.

  Args:
    weights: {TF1 variable name: array}.
    prefix: the checkpoint prefix to write (`<folder>/bert_model.ckpt`).

  Returns:
    The prefix written.
  """
  with tf.Graph().as_default():
    feeds, variables = {}, {}
    for name, array in weights.items():
      array = np.asarray(array)
      # A placeholder keeps large tables out of the graph definition.
      placeholder = tf.compat.v1.placeholder(array.dtype, array.shape)
      variables[name] = tf.compat.v1.Variable(placeholder, name=name, use_resource=True)
      feeds[placeholder] = array
    saver = tf.compat.v1.train.Saver(var_list=variables)
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.variables_initializer(list(variables.values())), feeds)
      saver.save(session, prefix, write_meta_graph=False, write_state=False)
  return prefix


def _existing(path: str) -> Optional[str]:
  return path if os.path.isfile(path) else None
