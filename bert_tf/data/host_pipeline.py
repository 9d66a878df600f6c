"""Host batches without TensorFlow: the JAX engine's input.

Rows (records of TFRecord files, or in-memory examples) are ordered by grain's
MapDataset: for training, a global shuffle of every row, reseeded each epoch, repeated
without end; then each process takes every process_count-th row from process_index
(its share of each global batch) and batches them to the per-process batch; a batch's
rows are then read and decoded together (bert_tf.data.record_files,
bert_tf.data.example_decoding) in grain's reader threads.

The position is one number, the batches read, so a resumed run reads exactly the
batches an uninterrupted one would: `HostBatches.get_state()` is a small JSON-able dict
and `set_state` restores it in a fresh pipeline, also under another process count at the
same global batch size (batch n is rows [n * G, (n + 1) * G) of the global order, however
the processes share them). Importing and running this module needs no TensorFlow.
"""

from typing import Callable, Dict, Mapping, Optional, Sequence

import numpy as np

from bert_tf import configs
from bert_tf.data import example_decoding
from bert_tf.data import record_files
from bert_tf.data import record_specs
from bert_tf.utils import errors
from bert_tf.utils import optional

Batch = Dict[str, np.ndarray]


class InputStateError(errors.UserError, ValueError):
  """A saved input position that does not belong to this input."""


def _grain():
  # Imported on first use: grain is the `jax` extra's, and the tasks import this module.
  return optional.module("grain", "The host input (TensorFlow-free)",
                         "pip install 'bert_tf[jax]'")


class HostBatches:
  """Batches (dicts of NumPy arrays) with a checkpointable position.

  Iterate it, or call next(); `get_state()` / `set_state(state)` save and restore the
  position, `seek(n)` skips to batch n unread; `close()` stops its reader threads. Built by `index_batches`,
  `record_batches` or `array_batches`.

  Attributes:
    batch_size: rows in each of this process's batches.
    global_batch_size: rows in each step's batch over all processes.
    num_rows: rows of one pass over the data (all processes).
    num_batches: this process's batches in one pass; None when the input repeats.
  """

  def __init__(self, dataset, batch_size: int, process_count: int,
               num_rows: int, identity: Mapping[str, object], repeat: bool,
               num_threads: int, prefetch_batches: int):
    self.batch_size = batch_size
    self.global_batch_size = batch_size * process_count
    self.num_rows = num_rows
    self.num_batches = None if repeat else len(dataset)
    self._identity = dict(identity, global_batch_size=self.global_batch_size,
                          num_rows=num_rows)
    options = _grain().ReadOptions(num_threads=num_threads,
                                prefetch_buffer_size=prefetch_batches)
    self._iterator = iter(dataset.to_iter_dataset(options))

  def __iter__(self) -> "HostBatches":
    return self

  def __next__(self) -> Batch:
    return next(self._iterator)

  def seek(self, batches_read: int) -> None:
    """Positions the input after its first `batches_read` batches without reading them
    (a run resumed at a step whose checkpoint holds no input position)."""
    _grain().experimental.set_next_index(self._iterator, int(batches_read))

  def close(self) -> None:
    """Stops the reader threads (an evaluation that stops early)."""
    self._iterator.close()

  def get_state(self) -> Dict[str, object]:
    """{"batches_read": the batches this iterator has returned, and what identifies the
    input (rows, global batch size, seed, shuffle)}; JSON-able."""
    return dict(self._identity,
                batches_read=_grain().experimental.get_next_index(self._iterator))

  def set_state(self, state: Mapping[str, object]) -> None:
    """Moves to the position `get_state` returned (of this input, any process count).

    Raises:
      InputStateError: the state belongs to another input (other rows, global batch
        size, seed or shuffling), naming what differs.
    """
    differs = [f"{key} {state.get(key)!r} (now {value!r})"
               for key, value in self._identity.items() if state.get(key) != value]
    if differs:
      raise InputStateError(f"The saved input position was taken with {', '.join(differs)}; "
                            "it cannot be restored into this input")
    self.seek(int(state["batches_read"]))


def index_batches(num_rows: int, batch_size: int, load: Callable[[np.ndarray], Batch], *,
                  shuffle: bool, repeat: bool, seed: int = 0, process_index: int = 0,
                  process_count: int = 1, drop_remainder: bool = True,
                  num_threads: int = 2, prefetch_batches: int = 8) -> HostBatches:
  """Batches of `load(row indices)`, the rows in the order the module docstring gives.

  Args:
    num_rows: rows of one pass (all processes).
    batch_size: rows per batch of this process (the global batch / process_count).
    load: int64 [b] row indices -> a batch of those rows, in that order.
    shuffle: a global shuffle of each pass by `seed`.
    repeat: pass after pass without end (training); else one pass.
    process_index, process_count: this process's share of the rows.
    drop_remainder: drop a last batch of fewer than batch_size rows.
    num_threads: grain reader threads loading batches ahead (0: load on next()).
    prefetch_batches: batches loaded ahead.
  """
  if not 0 <= process_index < process_count:
    raise ValueError(f"process_index {process_index} is not in [0, {process_count})")
  if num_rows == 0:
    raise errors.InputError("The input holds no rows")
  dataset = _grain().MapDataset.range(num_rows)
  if shuffle:
    dataset = dataset.shuffle(seed=seed)
  if repeat:
    dataset = dataset.repeat()
  if process_count > 1:
    dataset = dataset[process_index::process_count]
  dataset = dataset.batch(batch_size, drop_remainder=drop_remainder,
                          batch_fn=lambda rows: load(np.asarray(rows, np.int64)))
  identity = {"seed": seed if shuffle else None, "shuffle": shuffle}
  return HostBatches(dataset, batch_size, process_count, num_rows, identity, repeat,
                     num_threads, prefetch_batches)


def record_batches(paths: Sequence[str], spec: record_specs.RecordSpec, batch_size: int,
                   *, compression_type: str = "",
                   finish: Optional[Callable[[Batch], Batch]] = None,
                   **order) -> HostBatches:
  """Batches of the records of TFRecord files, decoded by `spec`.

  Args:
    paths: the files; rows are their records in file order.
    spec: the records' features (bert_tf.data.record_specs).
    batch_size: rows per batch of this process.
    compression_type: "", "GZIP" or "ZLIB".
    finish: applied to each decoded batch (e.g. padding to a length bucket).
    **order: `index_batches`'s shuffle, repeat, seed, process_index, process_count,
      drop_remainder, num_threads, prefetch_batches.

  Returns:
    HostBatches of {feature key: int32/float32 [b, *shape]}.

  Raises:
    CorruptRecordError: a record whose framing or checksums fail (when the files are
      indexed, or when the record is read), naming the file and byte offset.
    ExampleFormatError: a record without the spec's features, naming file and offset.
  """
  source = record_files.RecordSource(paths, compression_type)

  def load(rows: np.ndarray) -> Batch:
    records = [source[i] for i in rows]
    batch = example_decoding.decode_examples([r.data for r in records], spec,
                                             [r.where() for r in records])
    return finish(batch) if finish else batch

  return index_batches(len(source), batch_size, load, **order)


def array_batches(arrays: Mapping[str, np.ndarray], batch_size: int,
                  finish: Optional[Callable[[Batch], Batch]] = None,
                  **order) -> HostBatches:
  """Batches of in-memory examples: rows of `arrays` (each [N, ...]), with `finish`
  and **order as `record_batches` takes them."""
  arrays = {key: np.asarray(value) for key, value in arrays.items()}

  def load(rows: np.ndarray) -> Batch:
    batch = {key: value[rows] for key, value in arrays.items()}
    return finish(batch) if finish else batch

  return index_batches(len(next(iter(arrays.values()))), batch_size, load, **order)


def data_order(data_config, process_index: int = 0, process_count: int = 1,
               seed: int = 0):
  """(this process's batch size, `index_batches`'s order arguments) of a data section
  (bert_tf.configs.DataConfig): training shuffles by `seed` and repeats, evaluation
  reads one pass in order; drop_remainder as the section sets it. A
  shuffle_buffer_size of 0 or 1 reads training rows in file order too, as tf.data's
  buffer of one does.

  Raises:
    ConfigError: a global batch that the processes cannot share evenly.
  """
  batch = data_config.global_batch_size
  if batch % process_count:
    section = "train_data" if data_config.is_training else "eval_data"
    raise configs.ConfigError(f"{section}.global_batch_size ({batch}) must be divisible "
                              f"by the number of processes ({process_count})")
  return batch // process_count, dict(
      shuffle=data_config.is_training and data_config.shuffle_buffer_size > 1,
      repeat=data_config.is_training, seed=seed,
      process_index=process_index, process_count=process_count,
      drop_remainder=data_config.drop_remainder)
