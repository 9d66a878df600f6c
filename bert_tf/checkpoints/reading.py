"""Reading a checkpoint of any format (bert_tf, Google TF1, Hugging Face) into a bert_tf model.

The arrays are assigned one by one through the table in `name_map`. Every shape, the vocab
size and the set of names are checked before anything is assigned. A bert_tf folder (as
`writing.save_bert_tf` writes it) or a trainer's model_dir (ckpt-N.*, params.yaml) reads
by object through `restore`.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Optional


from bert_tf import configs
from bert_tf.checkpoints import architectures
from bert_tf.checkpoints import huggingface
from bert_tf.checkpoints import keras_hub
from bert_tf.checkpoints import name_map
from bert_tf.checkpoints import params_upgrade
from bert_tf.checkpoints import portable
from bert_tf.checkpoints import raw_model
from bert_tf.checkpoints import restore
from bert_tf.checkpoints import variables as variables_lib
from bert_tf.checkpoints.files import (BERT_TF, CONFIG_YAML, FORMATS, GOOGLE_TF1, HUGGINGFACE,
                                       KERAS_HUB, TRAINER_CONFIG_YAML, VOCAB_FILE,
                                       ConversionError, check_vocab)
from bert_tf.utils import files as files_lib
from bert_tf.utils import optional

logger = logging.getLogger(__name__)


def _google_tf1(path: str):
  """bert_tf.checkpoints.google_tf1, to read the TensorFlow checkpoint at `path` (the
  original release's, or an earlier conversion's): it imports TensorFlow.

  Raises:
    InputError: TensorFlow is not installed (the message names `path`).
  """
  optional.require("tensorflow", f"Reading the TensorFlow checkpoint at {path}",
                   optional.TENSORFLOW_INSTALL)
  from bert_tf.checkpoints import google_tf1  # pylint: disable=g-import-not-at-top
  return google_tf1


def _tensorflow_errors() -> tuple:
  """TensorFlow's OpError where TensorFlow is loaded (a TensorFlow checkpoint was
  read), else nothing."""
  tf = sys.modules.get("tensorflow")
  return (tf.errors.OpError,) if tf is not None and hasattr(tf, "errors") else ()


def detect_format(path: str) -> str:
  """Guesses the format of the checkpoint at `path` (a folder, prefix or weights file)."""
  if not files_lib.exists(path) and not files_lib.exists(path + ".index"):
    raise ConversionError(f"Checkpoint not found: {path}")
  if portable.is_portable(path) or portable.checkpoints_in(path):
    return BERT_TF  # A trainer's checkpoint, or its model_dir.
  if keras_hub.is_preset(path):
    return KERAS_HUB
  if huggingface.is_huggingface_folder(path):
    return HUGGINGFACE
  if files_lib.is_file(path) and path.endswith((".safetensors", ".bin", ".index.json")):
    return HUGGINGFACE
  unknown = (f"Cannot tell the format of {path}: not a Hugging Face folder (config.json + "
             f"{' or '.join(huggingface.WEIGHT_FILES)}), no KerasHub preset and no")
  if not optional.installed("tensorflow"):
    found = (restore.found_instead(files_lib.listdir(path)) if files_lib.isdir(path)
             else "a file of no known format")
    raise ConversionError(f"{unknown} portable checkpoint (ckpt-N.h5); {found}")
  try:
    google_tf1 = _google_tf1(path)
    prefix = google_tf1.find_checkpoint_prefix(path)
  except ConversionError:
    raise ConversionError(f"{unknown} TensorFlow checkpoint. Pass its format: "
                          f"--input_format={'|'.join(FORMATS)}") from None
  names = google_tf1.variable_names(prefix)
  if any(name.split("/", 1)[0] in name_map.ITEMS for name in names):
    return BERT_TF
  if any(name.startswith(("bert/", "cls/")) for name in names):
    return GOOGLE_TF1
  raise ConversionError(f"{prefix} is neither a bert_tf checkpoint (no root item named "
                        f"{', '.join(name_map.ITEMS)}) nor an original BERT checkpoint "
                        "(no variable under bert/ or cls/).")


def read_checkpoint(path: str, input_format: str = "auto",
                    config_file: Optional[str] = None,
                    vocab_file: Optional[str] = None) -> raw_model.LoadedCheckpoint:
  """Reads a checkpoint of any supported format into a bert_tf model.

  Args:
    path: a folder, checkpoint prefix or weights file.
    input_format: auto, bert_tf, google_tf1, huggingface or keras_hub.
    config_file: the model config (bert_config.json, config.json, or for bert_tf a YAML
      with model.encoder); default: the one beside the checkpoint.
    vocab_file: default: the vocab.txt beside the checkpoint.
    Each path may be remote (bert_tf.utils.files).

  Raises:
    ConversionError: naming the file, variable and shapes at fault.
    StorageError: a remote path whose storage is not served or does not answer.
  """
  for field, named in (("input", path), ("config_file", config_file),
                       ("vocab_file", vocab_file)):
    if named:
      files_lib.check_readable(named, field)
  fmt = detect_format(path) if input_format == "auto" else input_format
  if fmt not in FORMATS:
    raise ConversionError(f"Unknown input format '{fmt}'; formats: auto, {', '.join(FORMATS)}")
  logger.info("Reading %s checkpoint %s", fmt, path)
  if fmt == BERT_TF:
    return _read_bert_tf(path, config_file, vocab_file)
  if fmt == KERAS_HUB:
    return raw_model.model_from_raw(*keras_hub.read_preset(path, vocab_file))
  if fmt == GOOGLE_TF1:
    raw = _google_tf1(path).read_google_tf1(path, config_file, vocab_file)
  else:
    raw = huggingface.read_huggingface(path, config_file, vocab_file)
  return raw_model.model_from_raw(raw)


def _read_bert_tf(path: str, config_file: Optional[str], vocab_file: Optional[str]
                  ) -> raw_model.LoadedCheckpoint:
  try:
    prefix = restore.resolve_checkpoint(
        path[:-len(".index")] if path.endswith(".index") else path)
  except FileNotFoundError as e:
    raise ConversionError(str(e)) from None
  folder = path if files_lib.isdir(path) else os.path.dirname(files_lib.absolute_path(prefix))
  if config_file is None:
    # A converted folder has config.yaml; a trainer's model_dir has params.yaml.
    candidates = [os.path.join(folder, name) for name in (CONFIG_YAML, TRAINER_CONFIG_YAML)]
    config_file = next((c for c in candidates if files_lib.is_file(c)), candidates[0])
  try:
    data = params_upgrade.upgrade_experiment(configs.load_yaml(config_file))
    encoder_config = configs.EncoderConfig.from_dict(
        (data.get("model") or {}).get("encoder") or {}, path="model.encoder")
  except configs.ConfigError as e:
    raise ConversionError(f"{config_file}: {e}") from None
  roots = restore.checkpoint_children(prefix)
  items = tuple(item for item in name_map.ITEMS if item in roots)
  if name_map.ENCODER not in items:
    raise ConversionError(f"{prefix} has no '{name_map.ENCODER}' item; it has {sorted(roots)}")
  architecture = architectures.of_items(items)
  settings = architectures.settings_from_experiment(_with_task(data, folder), architecture)
  num_classes = _stored_head_width(prefix, architecture.head) if architecture.head else 0
  model = variables_lib.build_model(encoder_config, items, num_classes, settings)
  try:
    restore.restore_items(prefix, model.checkpoint_items, items=items)
  except portable.DamagedCheckpointError as e:
    raise ConversionError(str(e)) from None
  except (AssertionError, KeyError, ValueError, *_tensorflow_errors()) as e:
    raise ConversionError(f"{prefix} does not fit the model of {config_file}: {e}") from None
  vocab_file = vocab_file or _vocab_beside(folder, data, config_file)
  if vocab_file:
    check_vocab(vocab_file, encoder_config.vocab_size, prefix)
  return raw_model.LoadedCheckpoint(model, encoder_config, vocab_file, items, prefix, BERT_TF, settings)


def _with_task(data: dict, folder: str) -> dict:
  """`data`, or where it has no task section, the experiment beside it (the params.yaml
  of a converted task checkpoint or a trainer's model_dir), if any."""
  beside = os.path.join(folder, TRAINER_CONFIG_YAML)
  if data.get("task") or not files_lib.is_file(beside):
    return data
  try:
    return params_upgrade.upgrade_experiment(configs.load_yaml(beside))
  except configs.ConfigError as e:
    raise ConversionError(f"{beside}: {e}") from None


def _stored_head_width(prefix: str, item: str) -> int:
  """The outputs of the head `item` stored at `prefix`: its kernel's last axis (the
  one matrix of a head)."""
  if portable.is_portable(prefix):
    shapes = portable.item_shapes(prefix, item)
  else:
    from bert_tf.checkpoints import tf_checkpoints  # pylint: disable=g-import-not-at-top
    shapes = tf_checkpoints.item_shapes(prefix, item)
  widths = {int(shape[-1]) for shape in shapes.values() if len(shape) == 2}
  if len(widths) != 1:
    raise ConversionError(f"{prefix}: the {item} item holds no one kernel; shapes "
                          f"{dict(shapes)}")
  return widths.pop()


def _vocab_beside(folder: str, data: dict, config_file: str) -> Optional[str]:
  """The vocab of a bert_tf folder: its vocab.txt (a converted folder), else the one its
  config names (a trainer's model_dir: params.yaml's tokenizer.vocab_file); None where
  neither is there.

  Raises:
    ConversionError: the config names a vocab that is not there.
  """
  beside = os.path.join(folder, VOCAB_FILE)
  if files_lib.is_file(beside):
    return beside
  named = (data.get("tokenizer") or {}).get("vocab_file")
  if not named:
    return None
  if not files_lib.exists(named):
    raise ConversionError(f"{config_file} names the vocab {named}, which is not there (a "
                          "path relative to where the run started?); pass the vocab file.")
  return named
