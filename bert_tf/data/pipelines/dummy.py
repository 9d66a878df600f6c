"""Synthetic tokens, what every record kind's synthetic batches (format "dummy", for
tests and smoke runs without data) are drawn from: well-formed ids above the special
tokens' 0-4 inside each example's length, padding 0 after it. Each kind draws its own
labels and other features (its module's `dummy_arrays`). NumPy only: importing this
module needs no TensorFlow.
"""

from typing import Tuple

import numpy as np


def random_tokens(rng: np.random.Generator, shape, seq_length: int, vocab_size: int,
                  min_length: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(ids int32 [*shape, T], mask int32 [*shape, T], lengths int [*shape]) with each
  length drawn from [min_length, seq_length] and ids from [5, vocab_size)."""
  lengths = rng.integers(min_length, seq_length + 1, size=shape)
  mask = (np.arange(seq_length) < lengths[..., None]).astype(np.int32)
  ids = rng.integers(5, vocab_size, size=[*shape, seq_length]).astype(np.int32) * mask
  return ids, mask, lengths
