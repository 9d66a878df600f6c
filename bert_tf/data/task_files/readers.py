"""The readers of raw task files, registered per format.

A reader takes a data section (its format, input_path and, for TFDS, tfds_name,
tfds_split and tfds_data_dir) and the task section's settings that it needs (`options`,
by name: a GLUE task, column names, label names, ...), and returns the examples of every
file of input_path in order, each with its `index`. What a registered reader reads is
trained or evaluated on, so it refuses a file without the labels its task needs (a test
file), naming the file and line (`LABELS_NEEDED`); the format's own reading functions
also read unlabelled files where the format has them. The module of each format registers
its reader with `register_reader` (bert_tf.data.task_files.glue: tsv and csv; tfds_glue:
tfds; conll; swag: swag_csv; squad: squad_json), and importing bert_tf.data.task_files
imports them all. Importing this module needs no TensorFlow.
"""

from typing import Any, Callable, Dict, Iterable, List, Mapping

from bert_tf import configs
from bert_tf.utils import files

Reader = Callable[[configs.DataConfig, Mapping[str, Any]], List[Any]]
# Why the registered readers refuse a file without labels, for their messages.
LABELS_NEEDED = "a file to train or evaluate on needs its labels"

_READERS: Dict[str, Reader] = {}


def register_reader(*formats: str) -> Callable[[Reader], Reader]:
  """Decorator registering a reader of raw task files in `formats`."""

  def decorator(reader):
    for fmt in formats:
      if _READERS.get(fmt, reader) is not reader:
        raise ValueError(f"A reader of format '{fmt}' is registered twice")
      _READERS[fmt] = reader
    return reader

  return decorator


def formats() -> List[str]:
  """The formats a reader is registered for, sorted."""
  return sorted(_READERS)


def read_examples(data_config: configs.DataConfig, options: Mapping[str, Any]) -> List[Any]:
  """The examples of data_config's raw files, by the reader of data_config.format.

  Raises:
    ConfigError: no reader is registered for the format, naming the data section.
  """
  if data_config.format not in _READERS:
    raise configs.ConfigError(f"{data_config.section_name()}.format: no reader of raw "
                              f"files in format '{data_config.format}'; formats: "
                              f"{', '.join(formats())}")
  return _READERS[data_config.format](data_config, options)


def read_numbered(input_path: str, read_file: Callable[[str], Iterable]) -> List[Any]:
  """The examples that `read_file(path)` gives for each file of the comma-separated
  globs `input_path`, their `index` numbering them across the files in order."""
  examples = []
  for path in files.expand_patterns(input_path):
    for example in read_file(path):
      example.index = len(examples)
      examples.append(example)
  return examples
