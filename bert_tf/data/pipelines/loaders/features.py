"""The loaders of fine-tuning features (bert_tf.data.records.record_specs.KINDS: sentence,
tagging, multiple choice): synthetic ones (format "dummy"), the TFRecords
tools/create_finetuning_data.py writes (format "tfrecord", record_specs.finetuning_spec)
and the task's raw files, featurized by the task (GLUE TSV/CSV, TFDS, CoNLL, SWAG CSV).

Host batches have their token features padded to the data section's length buckets
(seq_length without them; bert_tf.data.pipelines.padding).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import numpy as np

from bert_tf import configs
from bert_tf.data.pipelines import dummy
from bert_tf.data.pipelines import host_pipeline
from bert_tf.data.pipelines import padding
from bert_tf.data.pipelines.loaders import registry
from bert_tf.data.records import record_specs
from bert_tf.utils import files

if TYPE_CHECKING:
  import tensorflow as tf  # pylint: disable=g-bad-import-order

RAW_FORMATS = {record_specs.SENTENCE: ("tsv", "csv", "tfds"),
               record_specs.TAGGING: ("conll",),
               record_specs.MULTIPLE_CHOICE: ("swag_csv",)}


class FeatureLoader(registry.DataLoader):
  """What the loaders of one feature kind share."""

  @property
  def kind(self) -> str:
    return self.needs.record_kind

  def _to_bucket(self):
    """Pads a host batch to its length bucket (bert_tf.data.pipelines.padding)."""
    lengths = padding.bucket_lengths(padding.bucket_bounds(self.data_config))
    return lambda batch: padding.pad_batch_to_bucket(batch, lengths)

  def _batch_size(self, input_context) -> int:
    return registry.tf_data().batching.batch_size_for(self.data_config.global_batch_size,
                                                      input_context)


def _register_each_kind(formats_of_kind):
  """Registers a loader class for every feature kind, in the formats
  `formats_of_kind(kind)` gives."""

  def decorator(cls):
    for kind in record_specs.KINDS:
      registry.register_loader(kind, *formats_of_kind(kind))(cls)
    return cls

  return decorator


@_register_each_kind(lambda kind: (registry.DUMMY,))
class DummyFeatures(FeatureLoader):
  """Synthetic batches of the structure real ones have, drawn for the global batch
  (bert_tf.data.pipelines.dummy.finetuning_examples), endless."""

  def dataset(self, input_context: Optional[tf.distribute.InputContext] = None,
              start: int = 0) -> tf.data.Dataset:
    needs = self.needs
    return registry.skipped(dummy.finetuning_dataset(
        self.kind, self._batch_size(input_context), self.data_config.seq_length,
        needs.vocab_size, needs.num_outputs, num_choices=needs.num_choices,
        regression=needs.regression, seed=needs.seed), start)

  def _host_batches(self, batch_size, order):
    needs = self.needs
    examples = dummy.finetuning_examples(
        self.kind, self.data_config.global_batch_size, self.data_config.seq_length,
        needs.vocab_size, needs.num_outputs, num_choices=needs.num_choices,
        regression=needs.regression, seed=needs.seed)
    return host_pipeline.array_batches(examples, batch_size, self._to_bucket(),
                                       **dict(order, shuffle_window=0))


@_register_each_kind(lambda kind: (registry.TFRECORD,))
class FeatureRecords(FeatureLoader):
  """The records tools/create_finetuning_data.py writes, in the order both engines read
  records, cut to their longest example (tf.data) or padded to their length bucket
  (host)."""

  def dataset(self, input_context: Optional[tf.distribute.InputContext] = None,
              start: int = 0) -> tf.data.Dataset:
    needs = self.needs
    return registry.tf_data().tfrecords.read_finetuning_tfrecords(
        self.data_config, self.kind, needs.regression, num_choices=needs.num_choices,
        seed=needs.seed, input_context=input_context, start=start)

  def _host_batches(self, batch_size, order):
    data, needs = self.data_config, self.needs
    paths = files.expand_patterns(data.input_path, field=f"{self.section}.input_path")
    spec = record_specs.finetuning_spec(self.kind, data.seq_length, needs.regression,
                                        needs.num_choices)
    return host_pipeline.record_batches(
        paths, spec, batch_size, compression_type=data.compression_type,
        finish=self._to_bucket(), **order)


@_register_each_kind(lambda kind: RAW_FORMATS[kind])
class RawFeatures(FeatureLoader):
  """The task's raw files, featurized by the task (needs tensorflow-text)."""

  def dataset(self, input_context: Optional[tf.distribute.InputContext] = None,
              start: int = 0) -> tf.data.Dataset:
    data, needs = self.data_config, self.needs
    batching = registry.tf_data().batching
    return registry.skipped(batching.finish_raw_dataset(
        needs.raw_features(data), self.kind, self._batch_size(input_context),
        data.is_training, data.drop_remainder, needs.regression,
        data.shuffle_buffer_size, needs.seed, input_context,
        length_buckets=data.active_length_buckets(),
        pack_to_length=data.seq_length if data.pack_examples else 0), start)

  def _host_batches(self, batch_size, order):
    """The raw files featurized in memory (tf.data, once), padded to seq_length."""
    data, needs = self.data_config, self.needs
    if data.pack_examples:
      raise configs.ConfigError(f"{self.section}.pack_examples: the host input does not "
                                "pack examples; use length_buckets")
    examples = [padding.pad_example(features, self.kind, data.seq_length, needs.regression)
                for features in needs.raw_features(data).as_numpy_iterator()]
    arrays = {key: np.stack([e[key] for e in examples]) for key in examples[0]}
    return host_pipeline.array_batches(arrays, batch_size, self._to_bucket(), **order)
