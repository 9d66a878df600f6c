"""Host batches without TensorFlow: the JAX engine's input.

Rows (records of TFRecord files, or in-memory examples) are read in the order
bert_tf.data.records.record_order defines for both engines: this process reads its part of every
global batch, and a batch's rows are read and decoded together
(bert_tf.data.records.record_files, bert_tf.data.records.example_decoding) in grain's reader threads.

The position is one number, the batches read, so a resumed run reads exactly the
batches an uninterrupted one would: `HostBatches.get_state()` is a small JSON-able dict
and `set_state` restores it in a fresh pipeline, also under another process count at the
same global batch size, and also one written by the TensorFlow engine's reader of the
same order. Importing and running this module needs no TensorFlow.
"""

import sys
from typing import Callable, Dict, Mapping, Optional, Sequence

import numpy as np

from bert_tf import configs
from bert_tf.data.records import example_decoding
from bert_tf.data.records import record_files
from bert_tf.data.records import record_order
from bert_tf.data.records import record_specs
from bert_tf.utils import errors
from bert_tf.utils import optional

Batch = Dict[str, np.ndarray]
# (batch, global batch number, int64 [b] its rows' places in the global batch) -> the
# batch with values drawn from its place in the order.
Draw = Callable[[Batch, int, np.ndarray], Batch]


class InputStateError(errors.UserError, ValueError):
  """A saved input position that does not belong to this input."""


def _grain():
  # Imported on first use: grain is the `jax` extra's, and the tasks import this module.
  return optional.module("grain", "The host input (TensorFlow-free)",
                         optional.extra_install("jax"))


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
    # A key the state lacks (a position of an earlier version) is not compared.
    differs = [f"{key} {state[key]!r} (now {value!r})"
               for key, value in self._identity.items()
               if key in state and state[key] != value]
    if differs:
      raise InputStateError(f"The saved input position was taken with {', '.join(differs)}; "
                            "it cannot be restored into this input")
    self.seek(int(state["batches_read"]))


def index_batches(row_counts: Sequence[int], batch_size: int,
                  load: Callable[[np.ndarray, int, np.ndarray], Batch], *, shuffle_window: int,
                  repeat: bool, seed: int = 0, process_index: int = 0,
                  process_count: int = 1, drop_remainder: bool = True,
                  num_threads: int = 2, prefetch_batches: int = 8,
                  row_groups: Optional[np.ndarray] = None) -> HostBatches:
  """Batches of `load(row indices)`, the rows in bert_tf.data.records.record_order's order.

  Args:
    row_counts: the rows of each file, in file order (one count for in-memory rows).
    batch_size: rows per batch of this process (the global batch / process_count).
    load: (int64 [b] row indices, global batch number, int64 [b] their places in the
      global batch) -> a batch of those rows, in that order.
    shuffle_window: rows shuffled together (0 or 1: file order).
    repeat: pass after pass without end (training); else one pass.
    process_index, process_count: this process's part of every global batch.
    drop_remainder: drop a last batch of fewer than batch_size rows.
    num_threads: grain reader threads loading batches ahead (0: load on next()).
    prefetch_batches: batches loaded ahead.
    row_groups: int [rows], each row's group (length bucket): record_order's grouping.
  """
  if not 0 <= process_index < process_count:
    raise ValueError(f"process_index {process_index} is not in [0, {process_count})")
  order = record_order.RecordOrder(row_counts, batch_size * process_count,
                                   shuffle_window=shuffle_window, seed=seed,
                                   repeat=repeat, drop_remainder=drop_remainder,
                                   row_groups=row_groups)
  num_batches = order.num_part_batches(process_index, process_count)
  dataset = _grain().MapDataset.range(sys.maxsize if repeat else num_batches).map(
      lambda batch: load(order.rows(batch, process_index, process_count), batch,
                         order.offsets(batch, process_index, process_count)))
  identity = {"seed": order.seed if order.shuffle_window else None,
              "shuffle_window": order.shuffle_window}
  return HostBatches(dataset, batch_size, process_count, order.num_rows, identity, repeat,
                     num_threads, prefetch_batches)


def record_batches(paths: Sequence[str], spec: record_specs.RecordSpec, batch_size: int,
                   *, compression_type: str = "",
                   finish: Optional[Callable[[Batch], Batch]] = None,
                   draw: Optional[Draw] = None, **order) -> HostBatches:
  """Batches of the records of TFRecord files, decoded by `spec`.

  Args:
    paths: the files; rows are their records in file order.
    spec: the records' features (bert_tf.data.records.record_specs).
    batch_size: rows per batch of this process.
    compression_type: "", "GZIP" or "ZLIB".
    finish: applied to each decoded batch (e.g. padding to a length bucket).
    draw: (batch, global batch number, its rows' places in the global batch) -> the
      batch with values drawn from its place in the order (dynamic masking,
      bert_tf.data.pipelines.masking), before `finish`.
    **order: `index_batches`'s shuffle_window, repeat, seed, process_index, process_count,
      drop_remainder, num_threads, prefetch_batches.

  Returns:
    HostBatches of {feature key: int32/float32 [b, *shape]}.

  Raises:
    CorruptRecordError: a record whose framing or checksums fail (when the files are
      indexed, or when the record is read), naming the file and byte offset.
    ExampleFormatError: a record without the spec's features, naming file and offset.
  """
  source = record_files.RecordSource(paths, compression_type)

  def load(rows: np.ndarray, number: int, offsets: np.ndarray) -> Batch:
    records = [source[i] for i in rows]
    batch = example_decoding.decode_examples([r.data for r in records], spec,
                                             [r.where() for r in records])
    batch = draw(batch, number, offsets) if draw else batch
    return finish(batch) if finish else batch

  return index_batches(source.row_counts(), batch_size, load, **order)


def array_batches(arrays: Mapping[str, np.ndarray], batch_size: int,
                  finish: Optional[Callable[[Batch], Batch]] = None,
                  **order) -> HostBatches:
  """Batches of in-memory examples: rows of `arrays` (each [N, ...]), with `finish`
  and **order as `record_batches` takes them."""
  arrays = {key: np.asarray(value) for key, value in arrays.items()}

  def load(rows: np.ndarray, *_) -> Batch:
    batch = {key: value[rows] for key, value in arrays.items()}
    return finish(batch) if finish else batch

  return index_batches([len(next(iter(arrays.values())))], batch_size, load, **order)


def data_order(data_config, process_index: int = 0, process_count: int = 1,
               seed: int = 0):
  """(this process's batch size, `index_batches`'s order arguments) of a data section
  (bert_tf.configs.DataConfig): `record_order.settings`, the shuffle by `seed`, and this
  process among process_count.

  Raises:
    ConfigError: a global batch that the processes cannot share evenly.
  """
  share = configs.check_batch_sizes(
      data_config.global_batch_size, process_count, share_name="processes",
      batch_name=f"{data_config.section_name()}.global_batch_size")
  return share, dict(seed=seed, process_index=process_index, process_count=process_count,
                     **record_order.settings(data_config))
