"""The input pipeline shared by the tasks whose features are one of
bert_tf.data.pipelines.featurizers' kinds (sentence, tagging, multiple choice).

Such a task reads its raw files with `read_examples`, turns them into unbatched
features with `featurize`, and gets dummy batches, TFRecord batches and raw-file
batches of its `feature_kind` from here, and TFRecords of its raw files from
`write_tfrecord` (tools/create_finetuning_data.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Optional

import numpy as np

from bert_tf import configs
from bert_tf.data.pipelines import dummy
from bert_tf.data.pipelines import host_pipeline
from bert_tf.data.pipelines import padding
from bert_tf.data.records import record_specs
from bert_tf.tasks import base
from bert_tf.utils import files
from bert_tf.utils import progress

if TYPE_CHECKING:
  import tensorflow as tf  # pylint: disable=g-bad-import-order
  from bert_tf.data.pipelines import featurizers  # pylint: disable=g-bad-import-order


class FeatureTask(base.Task):
  """A task reading bert_tf.data.pipelines.batching batches of `feature_kind`.

  Subclasses define feature_kind, input_formats, read_examples, featurize and
  `num_outputs`; multiple-choice tasks also set `num_choices`.
  """

  # One of bert_tf.data.records.record_specs.KINDS.
  feature_kind: str = ""
  # Sequences per example ([B, C, T] inputs when above 1).
  num_choices: int = 1

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

  def piece_tokenizer(self) -> featurizers.PieceTokenizer:
    """The tokenizer of the experiment's tokenizer section, for `featurize`."""
    featurizers = base.tf_data().featurizers
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
    self.check_format(data_config)
    if data_config.format in base.PREPARED_FORMATS:
      raise configs.ConfigError(
          f"{base.section_name(data_config)}.format is '{data_config.format}'; set it to the task files' format "
          f"({', '.join(f for f in self.input_formats if f not in base.PREPARED_FORMATS)})")
    examples = self.read_examples(data_config)
    metadata = dict(self.tfrecord_metadata(), input_path=data_config.input_path,
                    format=data_config.format,
                    vocab_file=self.experiment.tokenizer.vocab_file,
                    lower_case=self.experiment.tokenizer.lower_case)
    bar = progress.Progress(self.name, total=len(examples), unit="examples",
                            interval=progress_interval)
    tfrecords = base.tf_data().tfrecords
    count = tfrecords.write_finetuning_tfrecord(
        self.featurize(examples, data_config), output_path, self.feature_kind,
        data_config.seq_length, metadata, regression=self.regression, progress=bar)
    return dict(metadata, num_examples=count, kind=self.feature_kind,
                seq_length=data_config.seq_length)

  # ----- data -----
  def dummy_inputs(self, data_config: configs.DataConfig,
                   input_context: Optional[tf.distribute.InputContext] = None
                   ) -> tf.data.Dataset:
    batching = base.tf_data().batching
    return dummy.finetuning_dataset(
        self.feature_kind, batching.batch_size_for(data_config.global_batch_size, input_context),
        data_config.seq_length, self.experiment.model.encoder.vocab_size, self.num_outputs(),
        num_choices=self.num_choices, regression=self.regression,
        seed=self.experiment.runtime.seed)

  def tfrecord_inputs(self, data_config: configs.DataConfig,
                      input_context: Optional[tf.distribute.InputContext] = None,
                      start: int = 0) -> tf.data.Dataset:
    tfrecords = base.tf_data().tfrecords
    return tfrecords.read_finetuning_tfrecords(
        data_config, self.feature_kind, self.regression, num_choices=self.num_choices,
        seed=self.experiment.runtime.seed, input_context=input_context, start=start)

  def raw_inputs(self, data_config: configs.DataConfig,
                 input_context: Optional[tf.distribute.InputContext] = None
                 ) -> tf.data.Dataset:
    batching = base.tf_data().batching
    ds = self.featurize(self.read_examples(data_config), data_config)
    batch_size = batching.batch_size_for(data_config.global_batch_size, input_context)
    return batching.finish_raw_dataset(
        ds, self.feature_kind, batch_size, data_config.is_training, data_config.drop_remainder, self.regression,
        data_config.shuffle_buffer_size, self.experiment.runtime.seed, input_context,
        length_buckets=data_config.active_length_buckets(),
        pack_to_length=data_config.seq_length if data_config.pack_examples else 0)

  # ----- host input (no TensorFlow) -----
  def _to_bucket(self, data_config: configs.DataConfig):
    """Pads a host batch to its length bucket (bert_tf.data.pipelines.padding)."""
    lengths = padding.bucket_lengths(padding.bucket_bounds(data_config))
    return lambda batch: padding.pad_batch_to_bucket(batch, lengths)

  def dummy_host_inputs(self, data_config, batch_size, order):
    """finetuning_dataset's synthetic batches (drawn for the global batch), in order."""
    examples = dummy.finetuning_examples(
        self.feature_kind, data_config.global_batch_size, data_config.seq_length,
        self.experiment.model.encoder.vocab_size, self.num_outputs(),
        num_choices=self.num_choices, regression=self.regression,
        seed=self.experiment.runtime.seed)
    return host_pipeline.array_batches(examples, batch_size, self._to_bucket(data_config),
                                       **dict(order, shuffle_window=0))

  def tfrecord_host_inputs(self, data_config, batch_size, order):
    """Host batches of the records tools/create_finetuning_data.py writes
    (record_specs.finetuning_spec), padded to their length bucket."""
    paths = files.expand_patterns(data_config.input_path,
                                  field=f"{base.section_name(data_config)}.input_path")
    spec = record_specs.finetuning_spec(self.feature_kind, data_config.seq_length,
                                        self.regression, self.num_choices)
    return host_pipeline.record_batches(
        paths, spec, batch_size, compression_type=data_config.compression_type,
        finish=self._to_bucket(data_config), **order)

  def raw_host_inputs(self, data_config, batch_size, order):
    """The raw files featurized in memory (tf.data, once), padded to seq_length, as
    host batches padded to their length bucket."""
    if data_config.pack_examples:
      raise configs.ConfigError(f"{base.section_name(data_config)}.pack_examples: the host "
                                "input does not pack examples; use length_buckets")
    examples = [padding.pad_example(features, self.feature_kind, data_config.seq_length,
                                    self.regression)
                for features in self.featurize(self.read_examples(data_config),
                                               data_config).as_numpy_iterator()]
    arrays = {key: np.stack([e[key] for e in examples]) for key in examples[0]}
    return host_pipeline.array_batches(arrays, batch_size, self._to_bucket(data_config),
                                       **order)
