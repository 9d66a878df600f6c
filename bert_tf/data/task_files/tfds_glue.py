"""GLUE from TensorFlow Datasets (glue/<task>), when prepared in a local data_dir.

Nothing is downloaded: the dataset must already be built under `data_dir`. TensorFlow
Datasets is the optional extra `tfds` (`pip install "bert_tf[tfds]"`), imported only here.
"""

from __future__ import annotations

from typing import List, Optional

from bert_tf.data.task_files import readers
from bert_tf.data.task_files.glue import GLUE_TASKS, GlueFormatError, SentenceExample

# TFDS glue config name -> (our GLUE task, text_a feature, text_b feature).
TFDS_GLUE = {
    "cola": ("cola", "sentence", None),
    "sst2": ("sst2", "sentence", None),
    "mrpc": ("mrpc", "sentence1", "sentence2"),
    "qqp": ("qqp", "question1", "question2"),
    "stsb": ("stsb", "sentence1", "sentence2"),
    "mnli": ("mnli", "premise", "hypothesis"),
    "mnli_matched": ("mnli", "premise", "hypothesis"),
    "mnli_mismatched": ("mnli", "premise", "hypothesis"),
    "qnli": ("qnli", "question", "sentence"),
    "rte": ("rte", "sentence1", "sentence2"),
    "wnli": ("wnli", "sentence1", "sentence2"),
}


def glue_task_of(tfds_name: str) -> str:
  """'glue/sst2' -> 'sst2' (our GLUE task name)."""
  config = tfds_name.split("/", 1)[1] if "/" in tfds_name else tfds_name
  if not tfds_name.startswith("glue/") or config not in TFDS_GLUE:
    raise ValueError(f"Unsupported TFDS name '{tfds_name}'; use glue/<task> with task one of "
                     f"{', '.join(TFDS_GLUE)}")
  return TFDS_GLUE[config][0]


def read_tfds_glue(tfds_name: str, split: str, data_dir: Optional[str] = None,
                   require_labels: bool = False) -> List[SentenceExample]:
  """Reads a prepared TFDS GLUE split as SentenceExamples.

  Labels become the GLUE TSV label names (so TSV and TFDS data train the same
  model): TFDS class ids map through the dataset's own label names for the named
  tasks (MNLI, QNLI, RTE) and to "0"/"1" for the binary ones; -1 (test) becomes None.

  Args:
    tfds_name: e.g. "glue/mrpc".
    split: e.g. "train", "validation", "validation_matched", "test".
    data_dir: where the prepared dataset lives.
    require_labels: refuse a row labelled -1 (a test split).

  Raises:
    GlueFormatError: with `require_labels`, naming the dataset, split and row of the
      first unlabelled row.
  """
  try:
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise ImportError('format: tfds reads TensorFlow Datasets, which is not installed: '
                      'pip install "bert_tf[tfds]"') from None
  config = tfds_name.split("/", 1)[1]
  task, key_a, key_b = TFDS_GLUE.get(config, (None, None, None))
  if task is None:
    glue_task_of(tfds_name)
  spec = GLUE_TASKS[task]
  builder = tfds.builder(tfds_name, data_dir=data_dir or None)
  ds = builder.as_dataset(split=split, shuffle_files=False)
  label_feature = builder.info.features["label"]
  names = getattr(label_feature, "names", None)
  examples = []
  for row in tfds.as_numpy(ds):
    raw = row["label"]
    if spec.score_range:
      label = float(raw)
    elif int(raw) < 0:
      if require_labels:
        raise GlueFormatError(f"{tfds_name} split {split}: row {len(examples)} has no "
                              f"label (-1); {readers.LABELS_NEEDED}")
      label = None
    elif spec.label_names == ("0", "1"):
      label = str(int(raw))
    else:
      label = names[int(raw)]
    text_b = row[key_b].decode("utf-8") if key_b else None
    examples.append(SentenceExample(int(row.get("idx", len(examples))),
                                    row[key_a].decode("utf-8"), text_b, label))
  return examples


@readers.register_reader("tfds")
def read_tfds_section(data_config, options) -> List[SentenceExample]:
  """The split data_config.tfds_split of data_config.tfds_name under tfds_data_dir; a
  split without labels is refused."""
  del options
  return read_tfds_glue(data_config.tfds_name, data_config.tfds_split,
                        data_config.tfds_data_dir, require_labels=True)
