"""The order in which both engines read rows: which row (record of the files, numbered
over the files in order, or in-memory example) each batch holds, computed with NumPy
from the files' row counts, the seed and the batch number alone. The tf.data input
(bert_tf.data.records.tfrecords.ordered_record_dataset) and the host input
(bert_tf.data.pipelines.host_pipeline) both read through it, so that they read the same records
in the same order and a position is one number, the batches read.

Training (`repeat`) reads epoch after epoch. Shuffled (a `shuffle_window` above 1),
epoch e takes the files in an order drawn from (seed, e), their rows one file after the
other, and permutes each window of `shuffle_window` consecutive rows of that stream by
a permutation drawn from (seed, e, window): what a files shuffle and a shuffle buffer
of that size do, as a function of the row's position, so that any batch is found
without reading the ones before it. Rows given a group (their length bucket) are then
ordered by group within each window, so that batches hold rows of similar length, and
the window's whole batches of those rows are read in an order drawn from (seed, e,
window): not shortest first, as tf.data's bucketing hands out its batches as they fill.
Unshuffled, the rows are read in file order.

Global batch n is the rows at stream positions [n * G, (n + 1) * G) (positions count on
over epochs). Of K parts (processes, or replicas), part k takes positions
n * G + k + K * t, t < G / K, so that however the batch is shared, the global batch is
the same rows. Without `repeat` one pass is read: with drop_remainder off, its last
batch may be short and some of its parts empty.
"""

import functools
from typing import Optional, Sequence

import numpy as np

from bert_tf.utils import errors

# The first SeedSequence entropy word after the seed of each kind of draw, so that no
# two kinds share a stream (the dynamic masks, bert_tf.data.pipelines.masking, included).
FILE_ORDER_DRAWS, WINDOW_DRAWS, MASK_DRAWS, GROUPED_BATCH_DRAWS = 0, 1, 2, 3


def settings(data_config) -> dict:
  """RecordOrder's shuffle_window, repeat and drop_remainder for a data section
  (bert_tf.configs.DataConfig): training shuffles windows of shuffle_buffer_size rows
  and repeats, evaluation reads one pass in file order; drop_remainder as the section
  sets it."""
  return dict(
      shuffle_window=data_config.shuffle_buffer_size if data_config.is_training else 0,
      repeat=data_config.is_training, drop_remainder=data_config.drop_remainder)


class RecordOrder:
  """The rows of every batch of one input.

  Args:
    row_counts: the rows of each file, in file order (one count for in-memory rows).
    global_batch_size: G, rows per step over all parts.
    shuffle_window: rows permuted together; 0 or 1 reads in file order.
    seed: of the shuffle (any int; taken modulo 2**64).
    repeat: epoch after epoch without end (training); else one pass.
    drop_remainder: one pass leaves out a last batch of fewer than G rows.
    row_groups: int [num_rows], a group of each row (its length bucket): shuffled, each
      window's rows are then ordered by group (stably), so that a batch holds rows of
      one group (rows of similar length batched together), and the window's whole
      batches are read in a drawn order (the rows of batches the window shares with
      its neighbours keep their place).

  Attributes:
    num_rows: rows of one pass.
    num_batches: global batches of one pass; None when the input repeats.
  """

  def __init__(self, row_counts: Sequence[int], global_batch_size: int, *,
               shuffle_window: int = 0, seed: int = 0, repeat: bool = False,
               drop_remainder: bool = True, row_groups: Optional[np.ndarray] = None):
    counts = np.asarray(row_counts, np.int64).reshape([-1])
    self.num_rows = int(counts.sum())
    if self.num_rows == 0:
      raise errors.InputError("The input holds no rows")
    self.global_batch_size = int(global_batch_size)
    self.shuffle_window = int(shuffle_window) if shuffle_window > 1 else 0
    self.seed = int(seed) % 2**64
    self.repeat = repeat
    self._counts = counts
    self._starts = np.cumsum(counts) - counts
    self._groups = None if row_groups is None else np.asarray(row_groups, np.int64)
    if repeat:
      self.num_batches = None
    elif drop_remainder:
      self.num_batches = self.num_rows // self.global_batch_size
    else:
      self.num_batches = -(-self.num_rows // self.global_batch_size)

  def part_size(self, parts: int) -> int:
    """Rows of each of `parts` parts of a global batch.

    Raises:
      ValueError: G is not a multiple of `parts`.
    """
    if self.global_batch_size % parts:
      raise ValueError(f"A global batch of {self.global_batch_size} rows cannot be shared "
                       f"by {parts} parts")
    return self.global_batch_size // parts

  def num_part_batches(self, part: int = 0, parts: int = 1) -> Optional[int]:
    """The batches of one pass in which part `part` of `parts` holds rows; None when
    the input repeats."""
    if self.num_batches is None:
      return None
    last = self.num_batches - 1
    return self.num_batches - int(last >= 0 and
                                  last * self.global_batch_size + part >= self.num_rows)

  def offsets(self, batch: int, part: int = 0, parts: int = 1) -> np.ndarray:
    """int64 [G / parts] (fewer in a last short batch): the places in global batch
    `batch` of the rows of its part `part` of `parts`."""
    offsets = part + parts * np.arange(self.part_size(parts), dtype=np.int64)
    if not self.repeat:
      offsets = offsets[batch * self.global_batch_size + offsets < self.num_rows]
    return offsets

  def rows(self, batch: int, part: int = 0, parts: int = 1) -> np.ndarray:
    """int64 [G / parts] (fewer in a last short batch): the rows of part `part` of
    `parts` of global batch `batch`, in the order they are batched."""
    return self.rows_at(batch * self.global_batch_size + self.offsets(batch, part, parts))

  def rows_at(self, positions: np.ndarray) -> np.ndarray:
    """int64 [n]: the rows at stream positions int64 [n] (see the module docstring)."""
    epochs, within = np.divmod(np.asarray(positions, np.int64), self.num_rows)
    if not self.shuffle_window:
      return within
    out = np.empty_like(within)
    for epoch in np.unique(epochs):
      chosen = epochs == epoch
      out[chosen] = self._shuffled(int(epoch), within[chosen])
    return out

  def _shuffled(self, epoch: int, stream: np.ndarray) -> np.ndarray:
    """The rows at positions `stream` of epoch `epoch`'s shuffled stream."""
    width = self.shuffle_window
    windows = stream // width
    out = np.empty_like(stream)
    for window in np.unique(windows):
      chosen = windows == window
      start = int(window) * width
      rows = self._window_rows(epoch, int(window), min(width, self.num_rows - start))
      out[chosen] = rows[stream[chosen] - start]
    return out

  @functools.lru_cache(maxsize=16)
  def _window_rows(self, epoch: int, window: int, size: int) -> np.ndarray:
    """int64 [size]: the rows of one window of epoch `epoch`'s shuffled stream, in the
    order read (by group where rows are grouped)."""
    permuted = window * self.shuffle_window + self._window_permutation(epoch, window, size)
    files = self._file_order(epoch)
    counts = self._counts[files]
    stream_starts = np.cumsum(counts) - counts
    # Empty files share their successor's start: side="right" picks the one with rows.
    slot = np.searchsorted(stream_starts, permuted, side="right") - 1
    rows = self._starts[files[slot]] + permuted - stream_starts[slot]
    if self._groups is not None:
      rows = rows[np.argsort(self._groups[rows], kind="stable")]
      rows = self._batches_drawn(epoch, window, rows)
    return rows

  def _batches_drawn(self, epoch: int, window: int, rows: np.ndarray) -> np.ndarray:
    """int64 [size]: a window's rows in group order, with the window's whole global
    batches (G stream positions each) permuted by a draw from (seed, epoch, window); the
    rows at its ends, in batches it shares with the windows beside it, stay."""
    g = self.global_batch_size
    start = window * self.shuffle_window
    head = min(-start % g, len(rows))
    whole = (len(rows) - head) // g
    if whole < 2:
      return rows
    rng = np.random.default_rng([self.seed, GROUPED_BATCH_DRAWS, epoch, window])
    batches = rows[head:head + whole * g].reshape(whole, g)[rng.permutation(whole)]
    return np.concatenate([rows[:head], batches.reshape(-1), rows[head + whole * g:]])

  @functools.lru_cache(maxsize=4)
  def _file_order(self, epoch: int) -> np.ndarray:
    rng = np.random.default_rng([self.seed, FILE_ORDER_DRAWS, epoch])
    return rng.permutation(len(self._counts))

  @functools.lru_cache(maxsize=16)
  def _window_permutation(self, epoch: int, window: int, size: int) -> np.ndarray:
    rng = np.random.default_rng([self.seed, WINDOW_DRAWS, epoch, window])
    return rng.permutation(size).astype(np.int64)
