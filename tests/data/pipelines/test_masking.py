"""Dynamic masking (bert_tf.data.pipelines.masking, one NumPy implementation for both engines):
create_pretraining_data's rule and statistics, whole words, undoing file masks, new masks
each epoch, the same masks on both engines."""

import random

import numpy as np
import pytest

import pretraining_fixtures as fx
from bert_tf import configs
from bert_tf import constants
from bert_tf.data.pipelines import masking
from bert_tf.data.creation import pretraining_instances as pi
from bert_tf.data.pipelines import pretraining_reader

SEQ, PRED = 128, 20


def _unmasked_batch(num_documents=1000, seed=0):
  tokens, so, do = fx.random_id_documents(num_documents, seed, min_sentences=2,
                                          max_sentences=30, min_len=3, max_len=12)
  spans, _ = pi.create_instance_spans(so, do, SEQ, 0.1, 1, random.Random(seed))
  spans = pi.truncate_spans(spans, SEQ, np.random.default_rng(seed))
  ids, _, mask, _ = pi.build_sequences(tokens, spans, SEQ, fx.special_ids())
  return ids, mask


@pytest.fixture(scope="module")
def batch():
  ids, mask = _unmasked_batch()
  return ids, mask


def _mask(ids, mask, whole_word=False, seed=1):
  return masking.DynamicMasking(fx.special_ids(), 0.15, PRED, whole_word).mask(
      ids, mask, np.random.default_rng(seed))


@pytest.mark.parametrize("whole_word", [False, True])
def test_dynamic_masks_cover_15_percent_split_80_10_10(batch, whole_word):
  ids, mask = batch
  assert len(ids) > 2000
  out = _mask(ids, mask, whole_word)
  weights = out[constants.MASKED_LM_WEIGHTS]
  non_special = mask.sum() - 3 * len(ids)
  assert abs(weights.sum() / non_special - 0.15) < 0.01
  rows, slots = np.nonzero(weights)
  positions = out[constants.MASKED_LM_POSITIONS][rows, slots]
  labels = out[constants.MASKED_LM_IDS][rows, slots]
  np.testing.assert_array_equal(labels, ids[rows, positions])
  new = out[constants.INPUT_WORD_IDS][rows, positions]
  special = fx.special_ids()
  became_mask = (new == special.mask_id).mean()
  kept_or_random = new != special.mask_id
  kept = (new[kept_or_random] == labels[kept_or_random]).mean() * (1 - became_mask)
  assert abs(became_mask - 0.8) < 0.02
  # A random id equals the original about 1/vocab of the time, so "kept" is a bit above 10%.
  assert abs(kept - 0.1 - 0.1 / special.vocab_size) < 0.02
  # Unchosen positions are untouched.
  untouched = np.ones_like(ids, dtype=bool)
  untouched[rows, positions] = False
  np.testing.assert_array_equal(out[constants.INPUT_WORD_IDS][untouched], ids[untouched])


def test_number_of_predictions_follows_the_original_formula(batch):
  ids, mask = batch
  out = _mask(ids, mask)
  expected = np.minimum(PRED, np.maximum(1, np.rint(mask.sum(axis=1) * 0.15)))
  np.testing.assert_array_equal(out[constants.MASKED_LM_WEIGHTS].sum(axis=1), expected)


def test_positions_are_sorted_and_never_special_or_padding(batch):
  ids, mask = batch
  out = _mask(ids[:300], mask[:300])
  special = fx.special_ids()
  for row in range(300):
    n = int(out[constants.MASKED_LM_WEIGHTS][row].sum())
    pos = out[constants.MASKED_LM_POSITIONS][row, :n]
    assert np.all(np.diff(pos) > 0)
    assert np.all(mask[row, pos] == 1)
    assert not np.isin(ids[row, pos], [special.cls_id, special.sep_id]).any()
    assert np.all(out[constants.MASKED_LM_POSITIONS][row, n:] == 0)


def test_whole_word_dynamic_masking_takes_every_piece_of_a_word(batch):
  ids, mask = batch
  out = _mask(ids[:500], mask[:500], whole_word=True)
  special = fx.special_ids()
  joined = 0
  for row in range(500):
    n = int(out[constants.MASKED_LM_WEIGHTS][row].sum())
    chosen = set(out[constants.MASKED_LM_POSITIONS][row, :n].tolist())
    for p in chosen:
      nxt = p + 1
      # Skip [SEP]: a "##" piece after it still belongs to the word before it.
      if nxt < SEQ and ids[row, nxt] == special.sep_id:
        nxt += 1
      if nxt < SEQ and mask[row, nxt] and special.is_continuation[ids[row, nxt]]:
        assert nxt in chosen
        joined += 1
  assert joined > 100


def test_dynamic_masks_follow_create_pretraining_data_draw_for_draw(batch):
  ids, mask = batch
  ids, mask = ids[:400], mask[:400]
  special = fx.special_ids()
  candidates = (mask == 1) & ~np.isin(ids, [special.cls_id, special.sep_id])
  for whole_word in (False, True):
    created = pi.mask_sequences(ids, mask, candidates, 0.15, PRED, special,
                                np.random.default_rng(3), whole_word=whole_word)
    dynamic = _mask(ids, mask, whole_word, seed=3)
    np.testing.assert_array_equal(dynamic[constants.INPUT_WORD_IDS], created.input_ids)
    np.testing.assert_array_equal(dynamic[constants.MASKED_LM_POSITIONS],
                                  created.masked_lm_positions)
    np.testing.assert_array_equal(dynamic[constants.MASKED_LM_WEIGHTS],
                                  created.masked_lm_weights)


def test_undo_masking_restores_the_original_ids(batch):
  ids, mask = batch
  out = _mask(ids[:200], mask[:200])
  restored = masking.undo_masking(out[constants.INPUT_WORD_IDS],
                                  out[constants.MASKED_LM_POSITIONS],
                                  out[constants.MASKED_LM_IDS],
                                  out[constants.MASKED_LM_WEIGHTS])
  np.testing.assert_array_equal(restored, ids[:200])


def test_a_batch_s_masks_follow_from_the_seed_and_its_number_however_it_is_shared(batch):
  ids, mask = batch
  features = {constants.INPUT_WORD_IDS: ids[:50], constants.INPUT_MASK: mask[:50],
              constants.MASKED_LM_POSITIONS: np.zeros((50, PRED), np.int32),
              constants.MASKED_LM_IDS: np.zeros((50, PRED), np.int32),
              constants.MASKED_LM_WEIGHTS: np.zeros((50, PRED), np.float32)}

  def positions(seed, number, rows=slice(None)):
    masks = masking.DynamicMasking(fx.special_ids(), 0.15, PRED, seed=seed,
                                   global_batch_size=50)
    part = {key: value[rows] for key, value in features.items()}
    return masks(part, number, np.arange(50)[rows])[constants.MASKED_LM_POSITIONS]

  np.testing.assert_array_equal(positions(1, 4), positions(1, 4))
  for other in [(2, 4), (1, 5)]:
    assert (positions(1, 4) != positions(*other)).any(), other
  # A part of the batch (a process's, a replica's) gets its rows' masks of the whole.
  np.testing.assert_array_equal(positions(1, 4, slice(1, None, 3)),
                                positions(1, 4)[1::3])


def test_reader_draws_new_masks_every_epoch_from_masked_files(tmp_path):
  path = str(tmp_path / "d.tfrecord")
  count = fx.write_record_file(path, num_documents=30)
  vocab = fx.write_vocab(tmp_path)
  # One batch per epoch, the records in file order.
  base = configs.DataConfig(input_path=path, global_batch_size=count, seq_length=32,
                            max_predictions_per_seq=5, shuffle_buffer_size=0)
  static = next(iter(pretraining_reader.build_pretraining_dataset(base)))
  first, second = pretraining_reader.build_pretraining_dataset(
      base.replace(dynamic_masking=True), vocab_file=vocab).take(2)
  assert (first[constants.MASKED_LM_POSITIONS].numpy()
          != second[constants.MASKED_LM_POSITIONS].numpy()).any()
  for out in (first, second):
    restored, original = (masking.undo_masking(*(batch[key].numpy() for key in (
        constants.INPUT_WORD_IDS, constants.MASKED_LM_POSITIONS, constants.MASKED_LM_IDS,
        constants.MASKED_LM_WEIGHTS))) for batch in (out, static))
    np.testing.assert_array_equal(restored, original)


def test_dynamic_masking_without_a_vocab_file_is_an_error_naming_the_setting(tmp_path):
  path = str(tmp_path / "d.tfrecord")
  fx.write_record_file(path, num_documents=5)
  config = configs.DataConfig(input_path=path, seq_length=32, max_predictions_per_seq=5,
                              dynamic_masking=True)
  with pytest.raises(ValueError, match="tokenizer.vocab_file"):
    pretraining_reader.build_pretraining_dataset(config)
