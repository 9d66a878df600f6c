"""A run folder (a training's model_dir, a converted checkpoint folder) holds what it
needs: its params.yaml names the vocab the folder holds, `vocab.txt`, relative to the
folder, so that the folder exports, resumes and converts the same once moved, copied
or read from another working directory, local or remote (bert_tf.utils.files).

Reading a params.yaml resolves a relative file entry against the file's folder where
the file is there, else leaves it as given: params.yaml files of earlier versions
recorded the path as the run was given it, relative to its working directory.
"""

import os
from typing import Any, Dict

from bert_tf.utils import files

PARAMS_FILE = "params.yaml"
VOCAB_FILE = "vocab.txt"
# The entries of params.yaml that name files (section, key).
_FILE_ENTRIES = (("tokenizer", "vocab_file"),)


def params_path(checkpoint: str) -> str:
  """The params.yaml of the run folder that holds `checkpoint`: a folder (a model_dir, a
  converted checkpoint) or a checkpoint file or prefix in one."""
  folder = checkpoint if files.isdir(checkpoint) else os.path.dirname(checkpoint)
  return os.path.join(folder, PARAMS_FILE)


def resolve_beside(path: str, folder: str) -> str:
  """A file that a file in `folder` names: an absolute or remote `path` as it is; a
  relative one under `folder` where it is there, else as given."""
  if not path or os.path.isabs(path) or not files.is_local(path):
    return path
  beside = os.path.join(folder, path)
  return beside if files.exists(beside) else path


def resolve_paths(data: Dict[str, Any], path: str) -> Dict[str, Any]:
  """`data` as read from the YAML file at `path`: where `path` is a params.yaml, each
  relative file entry (tokenizer.vocab_file) resolved beside it (`resolve_beside`)."""
  if os.path.basename(path) != PARAMS_FILE:
    return data
  folder = os.path.dirname(path)
  for section, key in _FILE_ENTRIES:
    entries = data.get(section)
    if isinstance(entries, dict) and isinstance(entries.get(key), str):
      data = dict(data, **{section: dict(entries, **{key: resolve_beside(entries[key],
                                                                        folder)})})
  return data


def keep_vocab(vocab_file: str, folder: str) -> str:
  """Copies `vocab_file` into `folder` as vocab.txt (under a temporary name, renamed
  when complete) unless it is that file already.

  Returns:
    what the folder's params.yaml records: vocab.txt, relative to the folder.
  """
  target = os.path.join(folder, VOCAB_FILE)
  if files.absolute_path(vocab_file) != files.absolute_path(target):
    with files.atomic_path(target) as temporary:
      files.copy(vocab_file, temporary)
  return VOCAB_FILE
