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


@registry.register_loader(SQUAD, registry.DUMMY)
class DummyWindows(registry.InMemoryLoader):
  """Synthetic windows in file order."""

  in_file_order = True

  def arrays(self):
    data = self.data_config
    num = max(4 * data.global_batch_size, 64) if data.is_training else (
        2 * data.global_batch_size)
    return dummy.span_arrays(num, data.seq_length, self.needs.vocab_size)


@registry.register_loader(SQUAD, registry.TFRECORD)
class WindowRecords(registry.DataLoader):
  """Windows of SQuAD records, in the order both engines read records."""

  def _paths(self):
    return files.expand_patterns(self.data_config.input_path,
                                 field=f"{self.data_config.section_name()}.input_path")

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
class JsonWindows(registry.InMemoryLoader):
  """The windows of the questions of a SQuAD JSON file (tokenized by tensorflow-text),
  numbered in file order, read in the order both engines read records."""

  def arrays(self):
    return self.needs.raw_arrays(self.data_config)
