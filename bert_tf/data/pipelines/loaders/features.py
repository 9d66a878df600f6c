"""Record kinds of featurized examples (sentence, tagging, multiple choice: one module
each in this package) and their loaders: synthetic ones (format "dummy"), the TFRecords
tools/create_finetuning_data.py writes (format "tfrecord", the kind's spec) and the
task's raw files, read by the reader of their format (bert_tf.data.task_files.readers)
and featurized by the kind (its module's featurizer, over the tokenizer and packer of
bert_tf.data.pipelines.featurizers). TFRecords and raw files are read in the one order
(bert_tf.data.records.record_order).

Host batches have their token features padded to the data section's length buckets
(seq_length without them; bert_tf.data.pipelines.padding).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np

from bert_tf import configs
from bert_tf import constants
from bert_tf.data.pipelines import dummy
from bert_tf.data.pipelines import example_packing
from bert_tf.data.pipelines import host_pipeline
from bert_tf.data.pipelines import padding
from bert_tf.data.pipelines.loaders import registry
from bert_tf.data.records import record_specs
from bert_tf.data.task_files import readers
from bert_tf.utils import errors
from bert_tf.utils import files
from bert_tf.utils import progress

if TYPE_CHECKING:
  import tensorflow as tf  # pylint: disable=g-bad-import-order
  from bert_tf.data.pipelines import featurizers  # pylint: disable=g-bad-import-order

RecordFeature = record_specs.RecordFeature
# Distinct synthetic global batches a "dummy" input holds (training repeats them).
DUMMY_BATCHES = 4


class FeatureKind(registry.RecordKind):
  """A kind of featurized examples: encoder inputs, label_ids and example_index per
  example, padded to seq_length in records, cut to the longest example of each batch.

  A subclass sets `name` and `raw_formats` (a reader of each registered in
  bert_tf.data.task_files.readers) and defines `label_feature`, `dummy_labels` and
  `featurize`; one with more features per example defines `extra_features` (scalars,
  or features with a token axis: `token_feature`); one of several sequences per
  example overrides `token_shape`. Its features with a token axis are cut and padded
  along it with their fill (their `token_fill`), by every loader, on both forms. Its
  loaders are DummyFeatures, FeatureRecords and one RawFeatures per raw format.
  """

  raw_formats: Tuple[str, ...] = ()

  @property
  def formats(self):
    return {registry.DUMMY: DummyFeatures, registry.TFRECORD: FeatureRecords,
            **{fmt: RawFeatures for fmt in self.raw_formats}}

  def token_shape(self, needs: registry.InputNeeds, seq_length: int) -> Tuple[int, ...]:
    """The shape of each encoder input per example."""
    del needs
    return (seq_length,)

  def token_feature(self, needs: registry.InputNeeds, seq_length: int, name: str,
                    fill=0, dtype: str = record_specs.INT64) -> RecordFeature:
    """A feature `name` of the encoder inputs' shape (`token_shape`), padded with
    `fill` past an example's tokens."""
    return RecordFeature(name, name, self.token_shape(needs, seq_length), dtype,
                         token_fill=fill)

  def label_feature(self, needs: registry.InputNeeds, seq_length: int) -> RecordFeature:
    """label_ids' record feature."""
    raise NotImplementedError

  def extra_features(self, needs: registry.InputNeeds, seq_length: int
                     ) -> record_specs.RecordSpec:
    """Features after label_ids and example_index (default none)."""
    del needs, seq_length
    return ()

  def record_features(self, needs: registry.InputNeeds, seq_length: int
                      ) -> record_specs.RecordSpec:
    """The features of examples padded to seq_length: input_word_ids (below
    needs.vocab_size), input_mask, input_type_ids int32 [*token_shape]; label_ids as
    `label_feature` says; example_index int32 []; the `extra_features`."""
    return record_specs.encoder_inputs(self.token_shape(needs, seq_length),
                                       needs.vocab_size) + (
        self.label_feature(needs, seq_length),
        RecordFeature(constants.EXAMPLE_INDEX, constants.EXAMPLE_INDEX, (), default=0),
    ) + tuple(self.extra_features(needs, seq_length))

  def spec(self, needs, data_config):
    """`record_features` of data_config.seq_length."""
    return self.record_features(needs, data_config.seq_length)

  def example_padder(self, needs: registry.InputNeeds, seq_length: int
                     ) -> Callable[[Mapping[str, Any]], Dict[str, np.ndarray]]:
    """A function of one featurized example that pads its token features to seq_length
    with their fills (asked of the spec once, not per example)."""
    fills = record_specs.token_fills(self.record_features(needs, seq_length))
    return lambda features: padding.pad_example(features, fills, seq_length)

  def dummy_labels(self, rng: np.random.Generator, needs: registry.InputNeeds,
                   mask: np.ndarray) -> Dict[str, np.ndarray]:
    """Random valid labels of a synthetic batch whose input_mask is `mask`: label_ids
    and the extra features."""
    raise NotImplementedError

  def dummy_arrays(self, needs, data_config):
    """DUMMY_BATCHES synthetic global batches of this kind's structure as one set of
    examples: arrays [DUMMY_BATCHES * global_batch_size, ...] padded to
    seq_length, the encoder inputs (lengths from max(3, seq_length // 2) up, two
    segments), example_index (counting within each batch) and `dummy_labels`."""
    seq_length, batch_size = data_config.seq_length, data_config.global_batch_size
    rng = np.random.default_rng(needs.seed)
    shape = [batch_size, *self.token_shape(needs, seq_length)[:-1]]
    batches = []
    for _ in range(DUMMY_BATCHES):
      ids, mask, lengths = dummy.random_tokens(rng, shape, seq_length, needs.vocab_size,
                                               max(3, seq_length // 2))
      type_ids = ((np.arange(seq_length) >= (lengths[..., None] // 2)) * mask).astype(
          np.int32)
      batch = {
          constants.INPUT_WORD_IDS: ids, constants.INPUT_MASK: mask,
          constants.INPUT_TYPE_IDS: type_ids,
          constants.EXAMPLE_INDEX: np.arange(batch_size, dtype=np.int32),
      }
      batch.update(self.dummy_labels(rng, needs, mask))
      batches.append(batch)
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}

  def tokenizer(self, needs: registry.InputNeeds) -> featurizers.PieceTokenizer:
    """The tokenizer of needs' vocab, for `featurize`."""
    return registry.tf_data().featurizers.PieceTokenizer(needs.vocab_file, needs.lower_case)

  def featurize(self, needs: registry.InputNeeds, examples: List[Any], seq_length: int
                ) -> tf.data.Dataset:
    """Unbatched, unpadded features of the examples the readers of raw_formats give
    (the featurizer of the kind's module, over bert_tf.data.pipelines.featurizers'
    tokenizer and packer)."""
    raise NotImplementedError

  def tfrecord_metadata(self, needs: registry.InputNeeds) -> Dict[str, Any]:
    """What TFRecords written from raw files record about the task."""
    return {"task": needs.task, "label_names": list(needs.label_names)}


class FeatureLoader(registry.DataLoader):
  """What the loaders of one feature kind share."""

  def _to_bucket(self):
    """Pads a host batch to its length bucket (bert_tf.data.pipelines.padding) along
    the kind's token features."""
    lengths = padding.bucket_lengths(padding.bucket_bounds(self.data_config))
    fills = self.token_fills()
    return lambda batch: padding.pad_batch_to_bucket(batch, lengths, fills)


class FeatureArrays(FeatureLoader, registry.InMemoryLoader):
  """In-memory features padded to seq_length, cut to their longest example (tf.data)
  or padded to their length bucket (host); with pack_examples each batch's examples
  packed into rows of seq_length (bert_tf.data.pipelines.example_packing, the same code
  on both forms; the host form's rows padded to seq_length, so that a compiled step sees
  fewer shapes)."""

  def _packer(self, arrays, width=None):
    if not self.data_config.pack_examples:
      return None
    return example_packing.Packer(arrays, self.data_config.seq_length, width,
                                  self.token_fills())

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
        arrays, data_config, self.token_fills(), self.needs.seed, input_context, start,
        self._packer(arrays), row_groups)

  def _host_finish(self, arrays):
    return self._packer(arrays, self.data_config.seq_length) or self._to_bucket()


class DummyFeatures(FeatureArrays):
  """Synthetic batches of the structure real ones have, drawn for the global batch
  (FeatureKind.dummy_arrays), in file order: endless for
  training, one pass for evaluation."""

  in_file_order = True

  def arrays(self):
    return self.kind.dummy_arrays(self.needs, self.data_config)


class FeatureRecords(FeatureLoader):
  """The records tools/create_finetuning_data.py writes, in the order both engines read
  records, cut to their longest example (tf.data) or padded to their length bucket
  (host)."""

  def dataset(self, input_context: Optional[tf.distribute.InputContext] = None,
              start: int = 0) -> tf.data.Dataset:
    return registry.tf_data().tfrecords.read_finetuning_tfrecords(
        self.data_config, self.kind.spec(self.needs, self.data_config), seed=self.needs.seed,
        input_context=input_context, start=start)

  def _host_batches(self, batch_size, order):
    data = self.data_config
    paths = files.expand_patterns(data.input_path, field=f"{data.section_name()}.input_path")
    return host_pipeline.record_batches(
        paths, self.kind.spec(self.needs, data), batch_size,
        compression_type=data.compression_type, finish=self._to_bucket(), **order)


class RawFeatures(FeatureArrays):
  """The task's raw files, read by the reader of their format and featurized once by
  the kind (needs tensorflow-text), numbered as rows in file order, read in the order
  both engines read records: the same batches as TFRecords written from them
  (tools/create_finetuning_data.py)."""

  def _key(self, what: str) -> tuple:
    data = self.data_config
    return (what, data.format, data.input_path, data.is_training, data.tfds_name,
            data.tfds_split, data.tfds_data_dir)

  def check_files(self) -> None:
    """Reads the raw files (kept for the run), so that one its task cannot use (a
    malformed row, no labels) is refused, naming the file and line, before training."""
    self.examples()

  def examples(self) -> List[Any]:
    """The examples of the raw files (read once per file set)."""
    return self.needs.cached(self._key("examples"), lambda: readers.read_examples(
        self.data_config, self.needs.options))

  def features(self) -> tf.data.Dataset:
    """The examples featurized by the kind: unbatched, unpadded feature dicts."""
    return self.kind.featurize(self.needs, self.examples(), self.data_config.seq_length)

  def arrays(self):
    """The examples featurized, padded to seq_length and stacked, {feature: [N, ...]}
    in file order (once per file set and length)."""
    return self.needs.cached(self._key("arrays") + (self.data_config.seq_length,),
                             self._make_arrays)

  def _make_arrays(self) -> Dict[str, np.ndarray]:
    data = self.data_config
    pad = self.kind.example_padder(self.needs, data.seq_length)
    examples = [pad(features) for features in self.features().as_numpy_iterator()]
    if not examples:
      raise errors.InputError(f"{data.section_name()}.input_path '{data.input_path}' "
                              "holds no examples")
    return {name: np.stack([e[name] for e in examples]) for name in examples[0]}


def write_tfrecord(loader: registry.DataLoader, output_path: str,
                   progress_interval: Optional[float] = 10.0) -> Dict[str, Any]:
  """Writes the features of a loader's raw files as one TFRecord
  (tools/create_finetuning_data.py).

  A progress line (examples written, rate, ETA) goes to stderr every
  `progress_interval` seconds (None: none).

  Returns:
    The metadata written beside the file: the kind's tfrecord_metadata, the files'
    settings, num_examples, kind and seq_length.

  Raises:
    ConfigError: the loader reads no raw files (format dummy or tfrecord), naming the
      formats that are.
  """
  data = loader.data_config
  if not isinstance(loader, RawFeatures):
    raw = [f for f in loader.kind.formats if f not in registry.PREPARED_FORMATS]
    raise configs.ConfigError(
        f"{data.section_name()}.format is '{data.format}'; set it "
        f"to the task files' format ({', '.join(raw)})")
  kind, needs = loader.kind, loader.needs
  examples = loader.examples()
  metadata = dict(kind.tfrecord_metadata(needs), input_path=data.input_path,
                  format=data.format, vocab_file=needs.vocab_file,
                  lower_case=needs.lower_case)
  bar = progress.Progress(needs.task, total=len(examples), unit="examples",
                          interval=progress_interval)
  count = registry.tf_data().tfrecords.write_finetuning_tfrecord(
      kind.featurize(needs, examples, data.seq_length), output_path,
      kind.spec(needs, data), kind.example_padder(needs, data.seq_length),
      dict(metadata, kind=kind.name, seq_length=data.seq_length,
           regression=needs.regression), progress=bar)
  return dict(metadata, num_examples=count, kind=kind.name, seq_length=data.seq_length)
