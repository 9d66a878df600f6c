"""tf.data input pipeline over pretraining TFRecords (the original release's features).

`build_pretraining_dataset` yields per-replica batches keyed by the model's input names
(the features of bert_tf.data.records.record_specs.pretraining_spec). The checks before training
(bert_tf.data.records.pretraining_files) are shared with the TensorFlow-free reader.

The records are read by number in the order of bert_tf.data.records.record_order (in a
tf.numpy_function, its state only the element number, so the iterator checkpoints and
its position is the batches read) and parsed in tf.data.
"""

from typing import Optional

import tensorflow as tf

from bert_tf.data.pipelines import masking
from bert_tf.data.records import pretraining_files
from bert_tf.data.records import record_specs
from bert_tf.data.records import tfrecords


def build_pretraining_dataset(data_config, input_context: Optional[tf.distribute.InputContext]
                              = None, vocab_file: str = "", seed: int = 0,
                              start: int = 0, vocab_size: int = 0) -> tf.data.Dataset:
  """The pretraining input pipeline: the records in the order both engines read them
  (bert_tf.data.records.tfrecords.ordered_record_dataset, bert_tf.data.records.record_order).

  Args:
    data_config: bert_tf.configs.DataConfig. Uses input_path (comma-separated globs),
      compression_type, seq_length, max_predictions_per_seq, global_batch_size,
      is_training (shuffle windows of shuffle_buffer_size records, repeat),
      drop_remainder, and for dynamic masking dynamic_masking, masked_lm_prob and
      whole_word_masking.
    input_context: from `strategy.distribute_datasets_from_function`: this pipeline
      reads its replicas' parts of every global batch, each a per-replica batch.
    vocab_file: the WordPiece vocab dynamic masking draws replacement tokens from (the
      experiment's tokenizer.vocab_file).
    seed: of the training shuffle and of the dynamic masks (bert_tf.data.pipelines.masking; the
      experiment's runtime.seed).
    start: the pipeline's batches to skip (resuming), without reading them.
    vocab_size: the model's; a record with a token id at or beyond it fails its batch
      with a TokenIdError naming the record (0: unchecked).

  Returns:
    tf.data.Dataset of dicts: input_word_ids, input_mask, input_type_ids int32 [b, S];
    masked_lm_positions, masked_lm_ids int32 [b, P]; masked_lm_weights float32 [b, P];
    next_sentence_labels int32 [b], where b is the per-replica batch size.
  """
  files = pretraining_files.list_record_files(data_config.input_path)
  draw = None
  if data_config.dynamic_masking:
    draw = masking.DynamicMasking.of(data_config, vocab_file, seed)
  dataset = tfrecords.ordered_record_dataset(
      files, record_specs.pretraining_spec(data_config.seq_length,
                                           data_config.max_predictions_per_seq, vocab_size),
      data_config, seed, input_context, start, draw)
  return dataset.prefetch(tf.data.AUTOTUNE)
