"""The loaders of fine-tuning features (bert_tf.data.records.record_specs.KINDS: sentence,
tagging, multiple choice): synthetic ones (format "dummy"), the TFRecords
tools/create_finetuning_data.py writes (format "tfrecord", record_specs.finetuning_spec)
and the task's raw files, featurized by the task (GLUE TSV/CSV, TFDS, CoNLL, SWAG CSV).
TFRecords and raw files are read in the one order (bert_tf.data.records.record_order).

Host batches have their token features padded to the data section's length buckets
(seq_length without them; bert_tf.data.pipelines.padding).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import numpy as np

from bert_tf import constants
from bert_tf.data.pipelines import dummy
from bert_tf.data.pipelines import example_packing
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


def _register_each_kind(formats_of_kind):
  """Registers a loader class for every feature kind, in the formats
  `formats_of_kind(kind)` gives."""

  def decorator(cls):
    for kind in record_specs.KINDS:
      registry.register_loader(kind, *formats_of_kind(kind))(cls)
    return cls

  return decorator


class FeatureArrays(FeatureLoader, registry.InMemoryLoader):
  """In-memory features padded to seq_length, cut to their longest example (tf.data)
  or padded to their length bucket (host); with pack_examples each batch's examples
  packed into rows of seq_length (bert_tf.data.pipelines.example_packing, the same code
  on both forms; the host form's rows padded to seq_length, so that a compiled step sees
  fewer shapes)."""

  def _packer(self, arrays, width=None):
    if not self.data_config.pack_examples:
      return None
    return example_packing.Packer(arrays, self.data_config.seq_length, width)

  def _row_groups(self, arrays) -> Optional[np.ndarray]:
    """Training with length buckets: each example's bucket (record_order groups the
    rows of each shuffle window by it, on both forms), else None."""
    data = self.data_config
    if self.in_file_order or not (data.is_training and data.active_length_buckets()):
      return None
    mask = arrays[constants.INPUT_MASK]
    longest = np.sum(mask, axis=-1).reshape([len(mask), -1]).max(axis=1)
    return np.searchsorted(padding.bucket_bounds(data), longest, side="left")

  def _tf_batches(self, arrays, data_config, input_context, start, row_groups):
    return registry.tf_data().tfrecords.read_finetuning_arrays(
        arrays, data_config, self.needs.seed, input_context, start, self._packer(arrays),
        row_groups)

  def _host_finish(self, arrays):
    return self._packer(arrays, self.data_config.seq_length) or self._to_bucket()


@_register_each_kind(lambda kind: (registry.DUMMY,))
class DummyFeatures(FeatureArrays):
  """Synthetic batches of the structure real ones have, drawn for the global batch
  (bert_tf.data.pipelines.dummy.finetuning_examples), in file order: endless for
  training, one pass for evaluation."""

  in_file_order = True

  def arrays(self):
    needs = self.needs
    return dummy.finetuning_examples(
        self.kind, self.data_config.global_batch_size, self.data_config.seq_length,
        needs.vocab_size, needs.num_outputs, num_choices=needs.num_choices,
        regression=needs.regression, seed=needs.seed)


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
    paths = files.expand_patterns(data.input_path, field=f"{data.section_name()}.input_path")
    spec = record_specs.finetuning_spec(self.kind, data.seq_length, needs.regression,
                                        needs.num_choices)
    return host_pipeline.record_batches(
        paths, spec, batch_size, compression_type=data.compression_type,
        finish=self._to_bucket(), **order)


@_register_each_kind(lambda kind: RAW_FORMATS[kind])
class RawFeatures(FeatureArrays):
  """The task's raw files, featurized once by the task (needs tensorflow-text) and
  numbered as rows in file order, read in the order both engines read records: the
  same batches as TFRecords written from them (tools/create_finetuning_data.py)."""

  def arrays(self):
    return self.needs.raw_arrays(self.data_config)
