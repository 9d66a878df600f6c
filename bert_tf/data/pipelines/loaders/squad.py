"""The loaders of SQuAD windows: synthetic ones (format "dummy"), the original release's
records (format "tfrecord", record_specs.squad_spec, written by
bert_tf.data.records.squad_records) and the windows of a SQuAD JSON file, which the task
creates once (format "squad_json": the task's evaluation reports need them too)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from bert_tf.data.pipelines import dummy
from bert_tf.data.pipelines import host_pipeline
from bert_tf.data.pipelines.loaders import registry
from bert_tf.data.records import record_specs
from bert_tf.utils import files

if TYPE_CHECKING:
  import tensorflow as tf  # pylint: disable=g-bad-import-order

SQUAD = "squad"
SQUAD_JSON = "squad_json"


def batched(dataset: tf.data.Dataset, data_config, seed: int,
            input_context: Optional[tf.distribute.InputContext], shuffle: bool = True
            ) -> tf.data.Dataset:
  """Batches of input_word_ids, input_mask, input_type_ids [B, T] and unique_ids,
  start_positions, end_positions, is_impossible [B], all int32: sharded per input
  pipeline, and for training shuffled (unless `shuffle` is off) and repeated."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top,redefined-outer-name
  batch_size = data_config.global_batch_size
  if input_context is not None:
    batch_size = input_context.get_per_replica_batch_size(batch_size)
  if input_context is not None and input_context.num_input_pipelines > 1:
    dataset = dataset.shard(input_context.num_input_pipelines,
                            input_context.input_pipeline_id)
  if data_config.is_training:
    if shuffle:
      dataset = dataset.shuffle(data_config.shuffle_buffer_size, seed=seed)
    dataset = dataset.repeat()
  dataset = dataset.batch(batch_size, drop_remainder=data_config.drop_remainder)
  return dataset.prefetch(tf.data.AUTOTUNE)


@registry.register_loader(SQUAD, registry.DUMMY)
class DummyWindows(registry.DataLoader):
  """Synthetic windows, batched like real ones, in file order."""

  def _arrays(self):
    data = self.data_config
    num = max(4 * data.global_batch_size, 64) if data.is_training else (
        2 * data.global_batch_size)
    return dummy.span_arrays(num, data.seq_length, self.needs.vocab_size)

  def dataset(self, input_context: Optional[tf.distribute.InputContext] = None,
              start: int = 0) -> tf.data.Dataset:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top,redefined-outer-name
    dataset = tf.data.Dataset.from_tensor_slices(self._arrays())
    return registry.skipped(batched(dataset, self.data_config, self.needs.seed,
                                    input_context, shuffle=False), start)

  def _host_batches(self, batch_size, order):
    return host_pipeline.array_batches(self._arrays(), batch_size,
                                       **dict(order, shuffle_window=0))


@registry.register_loader(SQUAD, registry.TFRECORD)
class WindowRecords(registry.DataLoader):
  """Windows of SQuAD records, in the order both engines read records."""

  def _paths(self):
    return files.expand_patterns(self.data_config.input_path,
                                 field=f"{self.section}.input_path")

  def dataset(self, input_context: Optional[tf.distribute.InputContext] = None,
              start: int = 0) -> tf.data.Dataset:
    return registry.tf_data().tfrecords.ordered_record_dataset(
        self._paths(), record_specs.squad_spec(self.data_config.seq_length),
        self.data_config, self.needs.seed, input_context, start)

  def _host_batches(self, batch_size, order):
    return host_pipeline.record_batches(
        self._paths(), record_specs.squad_spec(self.data_config.seq_length), batch_size,
        compression_type=self.data_config.compression_type, **order)


@registry.register_loader(SQUAD, SQUAD_JSON)
class JsonWindows(registry.DataLoader):
  """The windows of the questions of a SQuAD JSON file (tokenized by tensorflow-text)."""

  def dataset(self, input_context: Optional[tf.distribute.InputContext] = None,
              start: int = 0) -> tf.data.Dataset:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top,redefined-outer-name
    dataset = tf.data.Dataset.from_tensor_slices(self.needs.raw_arrays(self.data_config))
    return registry.skipped(batched(dataset, self.data_config, self.needs.seed,
                                    input_context), start)

  def _host_batches(self, batch_size, order):
    return host_pipeline.array_batches(self.needs.raw_arrays(self.data_config),
                                       batch_size, **order)
