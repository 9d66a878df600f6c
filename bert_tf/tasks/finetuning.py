"""The input pipeline shared by the tasks whose features are one of
bert_tf.data.pipelines.featurizers' kinds (sentence, tagging, multiple choice).

Such a task reads its raw files with `read_examples` and turns them into unbatched
features with `featurize`, which its data loaders (bert_tf.data.pipelines.loaders.features)
batch; `write_tfrecord` writes them as TFRecords (tools/create_finetuning_data.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Optional


import numpy as np

from bert_tf import configs
from bert_tf.data.pipelines import loaders
from bert_tf.data.pipelines import padding
from bert_tf.tasks import base
from bert_tf.utils import errors
from bert_tf.utils import files
from bert_tf.utils import progress

if TYPE_CHECKING:
  import tensorflow as tf  # pylint: disable=g-bad-import-order
  from bert_tf.data.pipelines import featurizers  # pylint: disable=g-bad-import-order


class FeatureTask(base.Task):
  """A task reading bert_tf.data.pipelines.batching batches of `feature_kind`.

  Subclasses define record_kind (one of bert_tf.data.records.record_specs.KINDS),
  read_examples, featurize and `num_outputs`; multiple-choice tasks also set
  `num_choices`.
  """

  # Sequences per example ([B, C, T] inputs when above 1).
  num_choices: int = 1

  def __init__(self, experiment: configs.ExperimentConfig):
    super().__init__(experiment)
    self._raw_cache: Dict[tuple, Dict[str, np.ndarray]] = {}

  def num_outputs(self) -> int:
    """Classes (or tags) the labels of dummy batches are drawn from."""
    raise NotImplementedError

  def read_examples(self, data_config: configs.DataConfig) -> list:
    """The examples of data_config's raw files (a format of input_formats)."""
    raise NotImplementedError

  @staticmethod
  def read_numbered(input_path: str, read_file: Callable[[str], Iterable]) -> list:
    """The examples that `read_file(path)` gives for each file of the comma-separated
    globs `input_path`, their `index` numbering them across the files in order."""
    examples = []
    for path in files.expand_patterns(input_path):
      for example in read_file(path):
        example.index = len(examples)
        examples.append(example)
    return examples

  def featurize(self, examples, data_config: configs.DataConfig) -> tf.data.Dataset:
    """Unbatched features of `examples` (a bert_tf.data.pipelines.featurizers featurizer)."""
    raise NotImplementedError

  def raw_arrays(self, data_config: configs.DataConfig) -> Dict[str, np.ndarray]:
    """The examples of data_config's raw files featurized (read_examples, featurize),
    padded to seq_length and stacked, {feature: [N, ...]} in file order; featurized
    once per file set and length (the trainer builds an input more than once)."""
    key = (data_config.format, data_config.input_path, data_config.seq_length,
           data_config.tfds_name, data_config.tfds_split, data_config.tfds_data_dir)
    if key not in self._raw_cache:
      examples = [padding.pad_example(features, self.record_kind, data_config.seq_length,
                                      self.regression)
                  for features in self.featurize(self.read_examples(data_config),
                                                 data_config).as_numpy_iterator()]
      if not examples:
        raise errors.InputError(f"{data_config.section_name()}.input_path "
                                f"'{data_config.input_path}' holds no examples")
      self._raw_cache[key] = {name: np.stack([e[name] for e in examples])
                              for name in examples[0]}
    return self._raw_cache[key]

  def input_needs(self, **needs):
    """The feature kind's label settings, and the raw files as `raw_arrays`."""
    return super().input_needs(
        regression=self.regression, num_choices=self.num_choices,
        num_outputs=self.num_outputs(), raw_arrays=self.raw_arrays, **needs)

  def piece_tokenizer(self) -> featurizers.PieceTokenizer:
    """The tokenizer of the experiment's tokenizer section, for `featurize`."""
    featurizers = loaders.tf_data().featurizers
    return featurizers.PieceTokenizer(self.experiment.tokenizer.vocab_file,
                                      self.experiment.tokenizer.lower_case)

  def tfrecord_metadata(self) -> Dict[str, Any]:
    """What TFRecords written from this task's raw files record about the task."""
    return {"task": self.name, "label_names": list(self.label_names)}

  def write_tfrecord(self, data_config: configs.DataConfig, output_path: str,
                     progress_interval: Optional[float] = 10.0) -> Dict[str, Any]:
    """Reads data_config's raw files and writes their features as one TFRecord.

    A progress line (examples written, rate, ETA) goes to stderr every
    `progress_interval` seconds (None: none).

    Returns:
      The metadata written beside the file: tfrecord_metadata(), the files'
      settings, num_examples, kind and seq_length.

    Raises:
      ConfigError: data_config.format is not one of this task's raw formats.
    """
    self.data_loader(data_config)
    if data_config.format in loaders.PREPARED_FORMATS:
      raw = [f for f in loaders.formats_of(self.record_kind)
             if f not in loaders.PREPARED_FORMATS]
      raise configs.ConfigError(
          f"{data_config.section_name()}.format is '{data_config.format}'; set it "
          f"to the task files' format ({', '.join(raw)})")
    examples = self.read_examples(data_config)
    metadata = dict(self.tfrecord_metadata(), input_path=data_config.input_path,
                    format=data_config.format,
                    vocab_file=self.experiment.tokenizer.vocab_file,
                    lower_case=self.experiment.tokenizer.lower_case)
    bar = progress.Progress(self.name, total=len(examples), unit="examples",
                            interval=progress_interval)
    tfrecords = loaders.tf_data().tfrecords
    count = tfrecords.write_finetuning_tfrecord(
        self.featurize(examples, data_config), output_path, self.record_kind,
        data_config.seq_length, metadata, regression=self.regression, progress=bar)
    return dict(metadata, num_examples=count, kind=self.record_kind,
                seq_length=data_config.seq_length)
