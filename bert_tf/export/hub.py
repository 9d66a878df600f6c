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
from bert_tf.utils import errors
from bert_tf.utils import files

PREPROCESSOR = "preprocessor"
ENCODER = "encoder"


def check_hub_dir(hub_dir: str) -> None:
  """Checks that `hub_dir` may be written: absent, or an earlier pair (only `preprocessor`
  and `encoder` in it), which a new export replaces.

  Raises:
    OutputExistsError: `hub_dir` holds anything else (a new pair would delete it).
  """
  others = sorted(set(files.listdir(hub_dir)) - {PREPROCESSOR, ENCODER})
  if others:
    raise errors.OutputExistsError(
        f"hub_dir {hub_dir} holds {', '.join(others[:3])}{', ...' if len(others) > 3 else ''}"
        f", not only an earlier {PREPROCESSOR}/{ENCODER} pair; choose an empty or new folder")


def export_hub_pair(encoder, vocab_file: str, export_dir: str, lower_case: bool = True,
                    seq_length: int = 128, pretrainer=None) -> Dict[str, str]:
  """Writes export_dir/preprocessor and export_dir/encoder, both or neither.

  The pair is written under a temporary name beside `export_dir` and renamed to it when
  complete (replacing an earlier pair there), so a failed export leaves no partial
  folder and an earlier pair intact.

  Args:
    encoder: a BertEncoder.
    vocab_file: its WordPiece vocab (copied into the preprocessor's assets).
    export_dir: directory to create them in (local or remote): absent or an earlier pair.
    lower_case: whether the vocab is uncased.
    seq_length: the preprocessor's default packed length.
    pretrainer: optional BertPretrainer around `encoder`; adds the `mlm` sub-object.

  Returns:
    {"preprocessor": path, "encoder": path}.

  Raises:
    OutputExistsError: `export_dir` holds more than an earlier pair.
  """
  check_hub_dir(export_dir)
  tokenizer = BertWordPieceTokenizer(vocab_file, lower_case=lower_case)
  preprocessor = hub_preprocessor.HubPreprocessor(tokenizer, seq_length)
  preprocessor.trace()
  module = hub_encoder.HubEncoder(encoder, pretrainer)
  # A remote pair is written to a local folder and uploaded through the package's file
  # layer, which reaches storage TensorFlow's own client does not (an emulator).
  with files.staged_directory(export_dir) as temporary:
    tf.saved_model.save(
        preprocessor, os.path.join(temporary, PREPROCESSOR),
        signatures={"serving_default": preprocessor.__call__.get_concrete_function()})
    tf.saved_model.save(module, os.path.join(temporary, ENCODER),
                        signatures={"serving_default": module.serving_signature()})
  return {PREPROCESSOR: os.path.join(export_dir, PREPROCESSOR),
          ENCODER: os.path.join(export_dir, ENCODER)}
