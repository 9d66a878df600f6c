"""Exports the TF Hub-style pair: a preprocessor SavedModel and an encoder SavedModel.

Each loads alone with `tf.saved_model.load` (tensorflow_text imported for the
preprocessor) and is used like TF Hub's BERT models:

  preprocessor = tf.saved_model.load(paths["preprocessor"])
  encoder = tf.saved_model.load(paths["encoder"])
  outputs = encoder(preprocessor(tf.constant(["hello world"])))
  pair = preprocessor.bert_pack_inputs([preprocessor.tokenize(a), preprocessor.tokenize(b)])
  mlm_logits = encoder.mlm({**inputs, "masked_lm_positions": positions})["mlm_logits"]
"""

import os
from typing import Dict

import tensorflow as tf

from bert_tf.export import hub_encoder
from bert_tf.export import hub_preprocessor
from bert_tf.text.tokenizer import BertWordPieceTokenizer
from bert_tf.utils import files

PREPROCESSOR = "preprocessor"
ENCODER = "encoder"


def _save_atomically(module, path, signatures=None):
  with files.atomic_path(path, overwrite=False) as temporary:
    tf.saved_model.save(module, temporary, signatures=signatures)


def export_hub_pair(encoder, vocab_file: str, export_dir: str, lower_case: bool = True,
                    seq_length: int = 128, pretrainer=None) -> Dict[str, str]:
  """Writes export_dir/preprocessor and export_dir/encoder.

  Args:
    encoder: a BertEncoder.
    vocab_file: its WordPiece vocab (copied into the preprocessor's assets).
    export_dir: directory to create them in.
    lower_case: whether the vocab is uncased.
    seq_length: the preprocessor's default packed length.
    pretrainer: optional BertPretrainer around `encoder`; adds the `mlm` sub-object.

  Returns:
    {"preprocessor": path, "encoder": path}.
  """
  tokenizer = BertWordPieceTokenizer(vocab_file, lower_case=lower_case)
  preprocessor = hub_preprocessor.HubPreprocessor(tokenizer, seq_length)
  preprocessor.trace()
  paths = {PREPROCESSOR: os.path.join(export_dir, PREPROCESSOR),
           ENCODER: os.path.join(export_dir, ENCODER)}
  tf.io.gfile.makedirs(export_dir)
  _save_atomically(preprocessor, paths[PREPROCESSOR],
                   signatures={"serving_default": preprocessor.__call__.get_concrete_function()})
  module = hub_encoder.HubEncoder(encoder, pretrainer)
  _save_atomically(module, paths[ENCODER],
                   signatures={"serving_default": module.serving_signature()})
  return paths
