"""Writing a bert_tf model as a checkpoint of any format, each folder complete or absent.

A bert_tf checkpoint folder, as `save_bert_tf` writes it:
  ckpt-1.h5     a portable checkpoint (bert_tf.checkpoints.portable) of the model's
                checkpoint_items (encoder, masked_lm, next_sentence, or a task head),
                which both engines read, the JAX one without TensorFlow
  config.yaml   `model: encoder: ...`, mergeable into any experiment with
                tools/train.py --config_file
  params.yaml   a task model's (a pretrainer's) experiment: the task with its labels,
                the model, the tokenizer, its CRC32C on its first line
                (bert_tf.configs.params_checksum); what the exporter reads beside a
                checkpoint
  vocab.txt
Folders of earlier versions hold a TensorFlow checkpoint (ckpt-1.index, ckpt-1.data-*)
instead of ckpt-1.h5; they are read as before (bert_tf.checkpoints.restore).

Only the original release's format (google_tf1) needs TensorFlow to be written.
"""

from __future__ import annotations

import json
import os
from typing import Dict, Optional

import keras
import yaml

from bert_tf.checkpoints import architectures
from bert_tf.checkpoints import bert_config
from bert_tf.checkpoints import huggingface
from bert_tf.checkpoints import portable
from bert_tf.checkpoints.files import (BERT_TF, CONFIG_YAML, FORMATS, GOOGLE_TF1, HUGGINGFACE,
                                       KERAS_HUB, TRAINER_CONFIG_YAML, VOCAB_FILE,
                                       ConversionError,
                                       atomic_output_dir, check_vocab)
from bert_tf.checkpoints.variables import encoder_of, model_arrays
from bert_tf.configs import params_checksum
from bert_tf.utils import files as files_lib


def _write_yaml(data, path: str) -> None:
  with open(path, "w", encoding="utf-8") as f:
    yaml.safe_dump(data, f, sort_keys=False)


def save_bert_tf(model, vocab_file: str, output_dir: str, overwrite: bool = False,
                 settings: Optional[architectures.HeadSettings] = None) -> str:
  """Writes a bert_tf checkpoint folder (see the module docstring).

  Args:
    settings: a task model's label names, head dropout and tokenizer case, for its
      params.yaml; default: label names LABEL_<i>.

  Returns:
    The checkpoint file, `<output_dir>/ckpt-1.h5`.
  """
  encoder_config = encoder_of(model).encoder_config()
  check_vocab(vocab_file, encoder_config.vocab_size, model.name)
  architecture = architectures.of_items(model.checkpoint_items)
  with atomic_output_dir(output_dir, overwrite) as tmp:
    checkpoint = portable.save(portable.path_for_step(tmp, 1), model.checkpoint_items,
                               backend=keras.backend.backend())
    _write_yaml({"model": {"encoder": encoder_config.as_dict()}},
                os.path.join(tmp, CONFIG_YAML))
    if architecture.task:
      # The vocab beside it, named relative to the folder (bert_tf.configs.run_folder).
      vocab = VOCAB_FILE
      experiment = architectures.experiment(architecture, model,
                                            settings or architectures.HeadSettings(),
                                            encoder_config.as_dict(), vocab)
      with open(os.path.join(tmp, TRAINER_CONFIG_YAML), "w", encoding="utf-8") as f:
        # Its CRC32C first, as a training run's params.yaml.
        f.write(params_checksum.with_checksum(yaml.safe_dump(experiment, sort_keys=False)))
    files_lib.copy(vocab_file, os.path.join(tmp, VOCAB_FILE))
  return os.path.join(files_lib.absolute_path(output_dir), os.path.basename(checkpoint))


def huggingface_config(model, settings: Optional[architectures.HeadSettings] = None
                       ) -> Dict[str, object]:
  """The config.json of `model` as Hugging Face transformers reads it: the encoder, the
  transformers class and, for a task model, its labels (id2label, problem_type)."""
  architecture = architectures.of_items(model.checkpoint_items)
  settings = settings or architectures.HeadSettings()
  config = bert_config.to_bert_config(encoder_of(model).encoder_config())
  config.update(architectures=[architecture.huggingface], model_type="bert", pad_token_id=0,
                position_embedding_type="absolute")
  config.update(architectures.huggingface_fields(architecture, model, settings))
  return config


def save_huggingface(model, vocab_file: str, output_dir: str, overwrite: bool = False,
                     settings: Optional[architectures.HeadSettings] = None) -> str:
  """Writes config.json, model.safetensors and vocab.txt of a Hugging Face BERT.

  The names are those of the model's transformers class (BertModel; with heads,
  BertForPreTraining, BertForSequenceClassification, ...: "bert." prefix, the
  head's names); the tied decoder matrix is not stored, as transformers itself saves
  it, nor the pooler where the class has none. `settings` gives the labels' names.
  """
  arrays = model_arrays(model, HUGGINGFACE)
  check_vocab(vocab_file, encoder_of(model).vocab_size, model.name)
  with atomic_output_dir(output_dir, overwrite) as tmp:
    huggingface.write_huggingface(arrays, huggingface_config(model, settings), tmp)
    if settings is not None and settings.lower_case is not None:
      huggingface.write_tokenizer_config(settings.lower_case, tmp)
    files_lib.copy(vocab_file, os.path.join(tmp, VOCAB_FILE))
  return files_lib.absolute_path(output_dir)


def save_google_tf1(model, vocab_file: str, output_dir: str, overwrite: bool = False,
                    settings: Optional[architectures.HeadSettings] = None) -> str:
  """Writes bert_model.ckpt, bert_config.json and vocab.txt as the original release
  (a classifier's or SQuAD head under run_classifier.py's and run_squad.py's names;
  `settings` is not used: the release kept no labels)."""
  del settings
  from bert_tf.checkpoints import google_tf1  # pylint: disable=g-import-not-at-top
  arrays = model_arrays(model, GOOGLE_TF1)
  check_vocab(vocab_file, encoder_of(model).vocab_size, model.name)
  with atomic_output_dir(output_dir, overwrite) as tmp:
    google_tf1.write_google_tf1(arrays, os.path.join(tmp, google_tf1.CHECKPOINT_PREFIX))
    with open(os.path.join(tmp, google_tf1.CONFIG_FILE), "w", encoding="utf-8") as f:
      json.dump(bert_config.to_bert_config(encoder_of(model).encoder_config()), f, indent=2)
      f.write("\n")
    files_lib.copy(vocab_file, os.path.join(tmp, VOCAB_FILE))
  return os.path.join(files_lib.absolute_path(output_dir), google_tf1.CHECKPOINT_PREFIX)


def save_keras_hub(model, vocab_file: str, output_dir: str, overwrite: bool = False,
                   settings: Optional[architectures.HeadSettings] = None) -> str:
  """Writes a KerasHub preset folder (bert_tf.checkpoints.keras_hub)."""
  from bert_tf.checkpoints import keras_hub  # pylint: disable=g-import-not-at-top
  check_vocab(vocab_file, encoder_of(model).vocab_size, model.name)
  arrays = model_arrays(model, KERAS_HUB)
  with atomic_output_dir(output_dir, overwrite) as tmp:
    keras_hub.write_preset(model, arrays, vocab_file, settings or architectures.HeadSettings(),
                           tmp)
  return files_lib.absolute_path(output_dir)


_WRITERS = {BERT_TF: save_bert_tf, HUGGINGFACE: save_huggingface, GOOGLE_TF1: save_google_tf1,
            KERAS_HUB: save_keras_hub}


def save_checkpoint(model, vocab_file: str, output_dir: str, output_format: str = BERT_TF,
                    overwrite: bool = False,
                    settings: Optional[architectures.HeadSettings] = None) -> str:
  """Writes `model` in `output_format` (bert_tf, huggingface, google_tf1 or keras_hub);
  `settings`: a task model's labels, head dropout and tokenizer case
  (LoadedCheckpoint.settings)."""
  if output_format not in _WRITERS:
    raise ConversionError(f"Unknown output format '{output_format}'; formats: "
                          f"{', '.join(FORMATS)}")
  return _WRITERS[output_format](model, vocab_file, output_dir, overwrite, settings)
