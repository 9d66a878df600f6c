"""The TensorFlow engine's input: the task's batches placed on the strategy's
replicas, and the training iterator the Trainer's input source positions.

Under OneDeviceStrategy, MirroredStrategy and MultiWorkerMirroredStrategy each worker
(process) has one input pipeline, a plain tf.data iterator of its replicas' batches that
the loop hands to them itself (`next_batch`); worker P of W reads the batches of its
replicas, the W-th part of every global batch as tf.distribute's input pipeline P would
(bert_tf.data.records.tfrecords: its share of the one record order); a TPU reads a
tf.distribute dataset. Either starts at any global batch without reading the ones before
it, the position a checkpoint holds (bert_tf.training.input_source). Checkpoints of
earlier versions saved the plain iterator's state beside them instead (a TensorFlow
checkpoint `ckpt-N.input[-P]`), which `restore_position` still reads.
"""

from typing import Callable, Optional, Tuple

import tensorflow as tf

from bert_tf import configs
from bert_tf import constants
from bert_tf.checkpoints import portable
from bert_tf.data.pipelines import batching
from bert_tf.data.records import record_files
from bert_tf.data.records import tfrecords
from bert_tf.tasks import base as task_base
from bert_tf.training import input_source
from bert_tf.training.tf_engine import strategies
from bert_tf.utils import errors


class TrainerInput:
  """The training and evaluation input of one Trainer.

  Args:
    strategy: the trainer's tf.distribute strategy.
    task: the task whose data loader gives the per-replica batches.
    pads_to_length_buckets: whether training batches are padded to fixed lengths (the
      step compiles once per shape); evaluation batches are too on a TPU.
    log_fn: receives each console line.
  """

  def __init__(self, strategy: tf.distribute.Strategy, task: task_base.Task,
               pads_to_length_buckets: bool, log_fn: Callable[[str], None]):
    self.strategy = strategy
    self.task = task
    self.pads_to_length_buckets = pads_to_length_buckets
    self._is_tpu = isinstance(strategy, tf.distribute.TPUStrategy)
    self.log_fn = log_fn

  @property
  def iterator_checkpointable(self) -> bool:
    """Whether the training input is a plain tf.data iterator (whose state earlier
    versions saved beside checkpoints).

    tf.distribute's iterators are no trackable objects in TF 2.21, but plain tf.data
    iterators are: under OneDeviceStrategy, MirroredStrategy and
    MultiWorkerMirroredStrategy the worker's one input pipeline is a plain tf.data
    iterator whose elements the loop hands to the replicas itself (`next_batch`).
    """
    return isinstance(self.strategy, (tf.distribute.OneDeviceStrategy,
                                      tf.distribute.MirroredStrategy,
                                      tf.distribute.MultiWorkerMirroredStrategy))

  def build_inputs(self, data_config: configs.DataConfig,
                   input_context: tf.distribute.InputContext,
                   start: int = 0) -> tf.data.Dataset:
    """The batches the trainer reads: the task's per-replica batches, the first
    `start` skipped; with `pads_to_length_buckets` (training, or any input on a TPU),
    those cut to their longest example padded to the next of data_config.length_buckets
    and seq_length."""
    loader = self.task.data_loader(data_config)
    dataset = loader.dataset(input_context, start)
    if not (self._is_tpu or (self.pads_to_length_buckets and data_config.is_training)):
      return dataset
    return padded_to_length_buckets(dataset, data_config, loader.token_fills())

  @property
  def layout(self) -> Tuple[int, int]:
    """(workers, replicas): how the worker's pipeline shares each global batch, which
    gives its iterator's position its meaning (saved with it by earlier versions:
    restore_position)."""
    context = self._worker_context()
    return context.num_input_pipelines, context.num_replicas_in_sync

  def _worker_context(self) -> tf.distribute.InputContext:
    """The input context of the worker's one pipeline for all its replicas: pipeline P
    of the W workers (strategies.worker_placement; 0 of 1 on a single worker)."""
    worker, workers = strategies.worker_placement(self.strategy)
    return tf.distribute.InputContext(
        num_input_pipelines=workers, input_pipeline_id=worker,
        num_replicas_in_sync=self.strategy.num_replicas_in_sync)

  def element_spec(self, data_config: configs.DataConfig):
    """The structure of one replica's batch, [per-replica batch, ...] per feature."""
    return self.task.data_loader(data_config).dataset(self._worker_context()).element_spec

  def distribute(self, data_config: configs.DataConfig, skip_steps: int = 0):
    """The tf.distribute dataset: one input pipeline per worker, prefetching to the
    devices (the replicas' batches on a TPU).

    Args:
      skip_steps: global steps whose batches are skipped (resuming without a
        checkpointed iterator: with a deterministic input, fixed files, shuffle seed and
        order, this is the very position an uninterrupted run would be at).
    """
    def dataset_fn(input_context):
      per_pipeline = (input_context.num_replicas_in_sync //
                      input_context.num_input_pipelines)
      return self.build_inputs(data_config, input_context, skip_steps * per_pipeline)

    options = None
    if self._is_tpu:
      options = tf.distribute.InputOptions(experimental_fetch_to_device=True)
    return self.strategy.distribute_datasets_from_function(dataset_fn, options)

  def worker_input(self, data_config: configs.DataConfig, skip_steps: int = 0):
    """The worker's one training input pipeline as a plain (checkpointable) tf.data
    iterator of per-replica batches, one element per local replica and step (see
    iterator_checkpointable): one shuffle buffer and one iterator state for all the
    worker's replicas."""
    local_replicas = len(self.strategy.extended.worker_devices)
    return iter(self.build_inputs(data_config, self._worker_context(),
                                  skip_steps * local_replicas))

  def next_batch(self, iterator):
    """The next step's batch (in the training loop): from the worker's tf.data iterator
    (`worker_input`), the next element for each replica, copied to the replica's
    device as soon as it is read; from a tf.distribute iterator, its next batch."""
    if not isinstance(iterator, tf.data.Iterator):
      return next(iterator)
    devices = self.strategy.extended.worker_devices
    batches = [next(iterator) for _ in devices]

    def on_device(context):
      # Worker P's replicas are numbered P * len(devices) + local replica.
      local = context.replica_id_in_sync_group % len(devices)
      with tf.device(devices[local]):
        return tf.nest.map_structure(tf.identity, batches[local])

    return self.strategy.experimental_distribute_values_from_function(on_device)


class TrainingIterator(input_source.EngineInput):
  """The training iterator the step reads, positioned by the Trainer's input source: a
  plain tf.data iterator where its position is saved (TrainerInput's
  iterator_checkpointable), else a tf.distribute one; built at its position on first
  use.

  Args:
    inputs: the engine's TrainerInput.
    data_config: the training data.
  """

  def __init__(self, inputs: TrainerInput, data_config: configs.DataConfig):
    self.inputs = inputs
    self.data_config = data_config
    self._iterator = None

  @property
  def iterator(self):
    """The iterator at its position (the first batch where none was set)."""
    if self._iterator is None:
      self.skip(0)
    return self._iterator

  def skip(self, steps: int) -> None:
    if self.inputs.iterator_checkpointable:
      self._iterator = self.inputs.worker_input(self.data_config, steps)
    else:
      self._iterator = iter(self.inputs.distribute(self.data_config, skip_steps=steps))

  def restore(self, checkpoint: str, process_index: int) -> bool:
    if not self.inputs.iterator_checkpointable:
      return False
    iterator = self.inputs.worker_input(self.data_config)
    if not restore_position(iterator, checkpoint, process_index, self.inputs.layout,
                            log_fn=self.inputs.log_fn):
      return False
    self._iterator = iterator
    return True

  def corrupt_record_error(self, error: Exception, data_config: configs.DataConfig
                           ) -> Optional[Exception]:
    return corrupt_input_error(self.inputs.task, error, data_config)


def padded_to_length_buckets(dataset: tf.data.Dataset, data_config: configs.DataConfig,
                             fills) -> tf.data.Dataset:
  """Batches cut to their longest example, padded to the next of
  data_config.length_buckets and seq_length along the features of `fills` (the record
  kind's token_fills); others unchanged."""
  spec = dataset.element_spec.get(constants.INPUT_WORD_IDS)
  if spec is None or spec.shape[-1] is not None:
    return dataset
  bounds = [*data_config.active_length_buckets(), data_config.seq_length]
  return dataset.map(lambda batch: batching.pad_to_length_bucket(batch, bounds, fills))


# The (workers, replicas) earlier versions saved with an iterator's position.
LAYOUT_KEY = "layout/.ATTRIBUTES/VARIABLE_VALUE"


def position_prefix(checkpoint: str, process: int = 0) -> str:
  """The TensorFlow checkpoint holding a tf.data iterator's position for `checkpoint`
  (earlier versions): the file beside a portable `ckpt-N.h5` (portable.input_prefix),
  or a TensorFlow trainer checkpoint of an older version itself."""
  if checkpoint.endswith(portable.SUFFIX):
    return portable.input_prefix(checkpoint, process)
  return checkpoint


def restore_position(iterator: tf.data.Iterator, checkpoint: str, process: int = 0,
                     layout: Tuple[int, int] = (1, 1), log_fn=None) -> bool:
  """Restores the iterator's state an earlier version saved with `checkpoint`; False
  (with a log line where one was saved) when there is none, it cannot be read (a
  missing or damaged data file), or it is the state of another pipeline, of another
  `layout` (workers, replicas: its element n is another part of another global batch)
  or of one iterator per replica (older versions, which saved no layout)."""
  prefix = position_prefix(checkpoint, process)
  if not tf.io.gfile.exists(prefix + ".index"):
    return False
  try:
    return _restore_iterator(iterator, prefix, layout, log_fn or (lambda _: None))
  except (AssertionError, ValueError, tf.errors.OpError) as e:
    # E.g. the state of a pipeline of another structure, or a data file deleted.
    (log_fn or (lambda _: None))(
        f"Cannot restore the input iterator from {prefix} "
        f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
    return False


def _restore_iterator(iterator: tf.data.Iterator, prefix: str, layout: Tuple[int, int],
                      log_fn: Callable[[str], None]) -> bool:
  """restore_position's reading of the TensorFlow checkpoint at `prefix` (raising
  what it meets)."""
  saved = saved_iterator_count(prefix)
  if saved != 1:
    if saved:
      log_fn(f"{prefix} holds {saved} input iterators (one per replica, as written by an "
             "older version), this run has one")
    return False
  reader = tf.train.load_checkpoint(prefix)
  if reader.has_tensor(LAYOUT_KEY):
    saved_layout = tuple(int(n) for n in reader.get_tensor(LAYOUT_KEY))
    if saved_layout != tuple(layout):
      log_fn(f"{prefix} holds the input position of {saved_layout[0]} worker(s) with "
             f"{saved_layout[1]} replica(s) in all, this run has {layout[0]} with "
             f"{layout[1]}")
      return False
  status = tf.train.Checkpoint(iterator=[iterator]).read(prefix)
  status.assert_existing_objects_matched()
  status.expect_partial()
  return True


def saved_iterator_count(prefix: str) -> int:
  """How many replicas' input iterators the checkpoint at `prefix` holds (0: none)."""
  keys = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
  return len({key.split("/")[1] for key in keys if key.startswith("iterator/")})


def corrupt_input_error(task: task_base.Task, error: Exception,
                        data_config: configs.DataConfig) -> Optional[Exception]:
  """For a tf.errors.DataLossError of a tf.data input: the task's error naming each
  corrupt file and the offset it breaks at (the files are read again to find them), or
  an InputError with TensorFlow's message where every file reads in full when read
  again; for a record holding a token id beyond the model's vocab, the TokenIdError
  naming it (tfrecords.token_id_error); None for any other error."""
  token_id_error = tfrecords.token_id_error(error)
  if token_id_error is not None:
    return token_id_error
  if (isinstance(error, tf.errors.InvalidArgumentError) and
      "CorruptRecordError" in (error.message or "")):
    # A record read by number (tfrecords.ordered_record_dataset) failed its checksum.
    bad = record_files.find_corrupt_records(data_config.input_path,
                                            data_config.compression_type)
    return record_files.corrupt_records_error(bad) if bad else None
  if not isinstance(error, tf.errors.DataLossError):
    return None
  explained = task.data_loader(data_config).explain_error(error)
  if explained is error or not isinstance(explained, errors.UserError):
    return errors.InputError(f"{' '.join(error.message.split())} (every file of "
                             f"{data_config.section_name()}.input_path reads in full "
                             f"when read again)")
  return explained
