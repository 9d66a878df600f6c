"""tf.data input pipeline over pretraining TFRecords (the original release's features).

`build_pretraining_dataset` yields per-replica batches keyed by the model's input names
(the features of bert_tf.data.record_specs.pretraining_spec). The checks before training
(bert_tf.data.pretraining_files) are shared with the TensorFlow-free reader.

Everything in the pipeline is a TensorFlow op (no tf.py_function), so the iterator can be
checkpointed and the pipeline runs on TPU hosts.
"""

from typing import Optional

import tensorflow as tf

from bert_tf.data import masking
from bert_tf.data import pretraining_files
from bert_tf.data import record_specs
from bert_tf.data import tfrecords


def parse_batch(serialized, seq_length: int, max_predictions_per_seq: int):
  """Parses serialized Examples [B] into the model's inputs.

  Returns:
    dict: input_word_ids, input_mask, input_type_ids int32 [B, S]; masked_lm_positions,
    masked_lm_ids int32 [B, P]; masked_lm_weights float32 [B, P]; next_sentence_labels
    int32 [B] (bert_tf.data.record_specs.pretraining_spec).
  """
  return tfrecords.parse_records(
      serialized, record_specs.pretraining_spec(seq_length, max_predictions_per_seq))


def build_pretraining_dataset(data_config, input_context: Optional[tf.distribute.InputContext]
                              = None, vocab_file: str = "") -> tf.data.Dataset:
  """The pretraining input pipeline.

  Args:
    data_config: bert_tf.configs.DataConfig. Uses input_path (comma-separated globs),
      compression_type, seq_length, max_predictions_per_seq, global_batch_size,
      is_training (shuffle and repeat), drop_remainder, shuffle_buffer_size,
      cycle_length, deterministic, and for dynamic masking dynamic_masking,
      masked_lm_prob and whole_word_masking.
    input_context: from `strategy.distribute_datasets_from_function`; files are sharded
      over its input pipelines (records, when there are fewer files than pipelines) and
      the batch is the per-replica size.
    vocab_file: the WordPiece vocab dynamic masking draws replacement tokens from (the
      experiment's tokenizer.vocab_file).

  Returns:
    tf.data.Dataset of dicts: input_word_ids, input_mask, input_type_ids int32 [b, S];
    masked_lm_positions, masked_lm_ids int32 [b, P]; masked_lm_weights float32 [b, P];
    next_sentence_labels int32 [b], where b is the per-replica batch size.
  """
  files = pretraining_files.list_record_files(data_config.input_path)
  seq_length = data_config.seq_length
  max_predictions = data_config.max_predictions_per_seq
  deterministic = data_config.deterministic
  vocab = None
  if data_config.dynamic_masking:
    vocab = masking.read_masking_vocab(vocab_file)

  num_pipelines, pipeline_id = 1, 0
  if input_context is not None:
    num_pipelines = input_context.num_input_pipelines
    pipeline_id = input_context.input_pipeline_id
  shard_files = num_pipelines > 1 and len(files) >= num_pipelines

  dataset = tf.data.Dataset.from_tensor_slices(files)
  if shard_files:
    dataset = dataset.shard(num_pipelines, pipeline_id)
  if data_config.is_training:
    dataset = dataset.shuffle(len(files)).repeat()
  compression = data_config.compression_type
  dataset = dataset.interleave(
      lambda f: tf.data.TFRecordDataset(f, compression_type=compression),
      cycle_length=max(1, min(data_config.cycle_length, len(files))),
      num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
  if num_pipelines > 1 and not shard_files:
    dataset = dataset.shard(num_pipelines, pipeline_id)
  if data_config.is_training:
    dataset = dataset.shuffle(data_config.shuffle_buffer_size)

  batch_size = data_config.global_batch_size
  if input_context is not None:
    batch_size = input_context.get_per_replica_batch_size(batch_size)
  dataset = dataset.batch(batch_size, drop_remainder=data_config.drop_remainder)
  dataset = dataset.map(lambda s: parse_batch(s, seq_length, max_predictions),
                        num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
  if vocab is not None:
    remask = masking.dynamic_masking_fn(vocab, data_config.masked_lm_prob, max_predictions,
                                        data_config.whole_word_masking)
    # A checkpointable random stream gives every batch its own seed, so each epoch (and
    # each pass of an evaluation) draws new masks.
    seeds = tf.data.Dataset.random(rerandomize_each_iteration=True)
    dataset = tf.data.Dataset.zip((seeds, dataset)).map(
        remask, num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
  options = tf.data.Options()
  options.deterministic = deterministic
  dataset = dataset.with_options(options)
  return dataset.prefetch(tf.data.AUTOTUNE)
