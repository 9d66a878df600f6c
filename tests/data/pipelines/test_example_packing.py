"""Packing a fine-tuning batch's examples into rows: every token kept, positions
restarting, each example findable from its [CLS] slot."""

import numpy as np

from bert_tf import constants
from bert_tf.data.pipelines import example_packing

LENGTHS = [5, 9, 3, 7, 12, 4, 16, 2]


def _examples(lengths=LENGTHS, seed=0):
  """Unbatched sentence features: [CLS]=2, random ids, segment 1 from the middle on."""
  rng = np.random.default_rng(seed)
  examples = []
  for i, n in enumerate(lengths):
    ids = rng.integers(5, 100, n).astype(np.int32)
    ids[0] = 2
    examples.append({constants.INPUT_WORD_IDS: ids,
                     constants.INPUT_MASK: np.ones(n, np.int32),
                     constants.INPUT_TYPE_IDS: (np.arange(n) >= n // 2).astype(np.int32),
                     constants.LABEL_IDS: np.int32(i % 3), constants.EXAMPLE_INDEX: np.int32(i)})
  return examples


def _padded(examples, seq_length=16):
  """The examples as one batch of rows padded to seq_length, as the inputs read them."""
  return {k: np.stack([np.pad(e[k], (0, seq_length - len(e[k]))) if np.ndim(e[k]) else e[k]
                       for e in examples]) for k in examples[0]}


def _packed_batch(examples, seq_length=16):
  return example_packing.pack_batch(_padded(examples, seq_length), seq_length)


def _unpacked(batch, name):
  """Each example's values of feature `name`, found from its [CLS] slot, batch order."""
  cls = batch[constants.PACKED_CLS_POSITIONS]
  out = []
  for slot in batch[constants.PACKED_EXAMPLE_SLOTS]:
    row, k = divmod(int(slot), cls.shape[1])
    members = batch[constants.INPUT_EXAMPLE_IDS][row] == k + 1
    start = int(cls[row, k])
    assert members[start] and (start == 0 or not members[start - 1])
    out.append(batch[name][row][members])
  return out


def test_packing_keeps_every_token_segment_and_label_of_every_example():
  examples = _examples()
  batch = _packed_batch(examples)
  for name in (constants.INPUT_WORD_IDS, constants.INPUT_TYPE_IDS):
    for got, example in zip(_unpacked(batch, name), examples):
      np.testing.assert_array_equal(got, example[name])
  np.testing.assert_array_equal(batch[constants.LABEL_IDS], [e[constants.LABEL_IDS] for e in examples])
  np.testing.assert_array_equal(batch[constants.EXAMPLE_INDEX], np.arange(len(examples)))
  np.testing.assert_array_equal(batch[constants.INPUT_MASK],
                                batch[constants.INPUT_EXAMPLE_IDS] > 0)
  assert batch[constants.INPUT_MASK].sum() == sum(LENGTHS)


def test_positions_restart_at_zero_with_every_example():
  batch = _packed_batch(_examples())
  for got, n in zip(_unpacked(batch, constants.INPUT_POSITION_IDS), LENGTHS):
    np.testing.assert_array_equal(got, np.arange(n))


def test_rows_are_filled_next_fit_up_to_seq_length():
  batch = _packed_batch(_examples())
  # 5+9 | 3+7 | 12+4 | 16 | 2: an example that does not fit opens the next row.
  assert batch[constants.INPUT_WORD_IDS].shape == (5, 16)
  np.testing.assert_array_equal(batch[constants.INPUT_MASK].sum(axis=1), [14, 10, 16, 16, 2])
  np.testing.assert_array_equal(batch[constants.PACKED_CLS_POSITIONS],
                                [[0, 5], [0, 3], [0, 12], [0, 0], [0, 0]])


def test_a_batch_of_short_examples_is_as_wide_as_its_longest_row():
  batch = _packed_batch(_examples([3, 4, 2]), seq_length=16)
  assert batch[constants.INPUT_WORD_IDS].shape == (1, 9)


def test_a_given_width_pads_every_row_to_it_and_changes_nothing_else():
  examples = _examples([3, 4, 2])
  narrow = _packed_batch(examples)
  wide = example_packing.pack_batch(_padded(examples), 16, width=16)
  for key, value in narrow.items():
    if np.ndim(value) == 2 and key != constants.PACKED_CLS_POSITIONS:
      assert wide[key].shape == (1, 16)
      np.testing.assert_array_equal(wide[key][:, :9], value)
      assert not wide[key][:, 9:].any()
    else:
      np.testing.assert_array_equal(wide[key], value)


def test_the_packer_declares_the_dtype_and_rank_of_every_feature_it_returns():
  examples = _padded(_examples())
  packer = example_packing.Packer(examples, 16)
  batch = packer(examples)
  assert set(batch) == set(packer.output_spec)
  for key, (dtype, rank) in packer.output_spec.items():
    assert (np.asarray(batch[key]).dtype, np.ndim(batch[key])) == (dtype, rank), key


def test_a_kind_s_own_token_feature_is_packed_along_the_rows_with_its_fill():
  examples = _examples([3, 4, 2])
  for e in examples:
    e["piece_index"] = np.arange(len(e[constants.INPUT_MASK]), dtype=np.int32)
  fills = {**dict.fromkeys(constants.ENCODER_INPUTS, 0), "piece_index": -1}
  packer = example_packing.Packer(_padded(examples), 16, width=12, fills=fills)
  packed = packer(_padded(examples))
  assert packed["piece_index"].shape == packed[constants.INPUT_WORD_IDS].shape == (1, 12)
  np.testing.assert_array_equal(packed["piece_index"][0], [0, 1, 2, 0, 1, 2, 3, 0, 1,
                                                           -1, -1, -1])
  np.testing.assert_array_equal(packed["piece_index"],
                                packed[constants.INPUT_POSITION_IDS] - (
                                    packed[constants.INPUT_EXAMPLE_IDS] == 0))
  assert packer.output_spec["piece_index"] == (np.dtype(np.int32), 2)
