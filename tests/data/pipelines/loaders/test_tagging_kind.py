"""The tagging record kind: per-token tag ids padded with IGNORE_LABEL, which the
padding and the synthetic batches keep off [CLS] and the padding."""

import numpy as np

from bert_tf import configs
from bert_tf import constants
from bert_tf.data.pipelines import loaders
from bert_tf.data.pipelines.loaders import tagging


def _needs():
  return loaders.InputNeeds(task="t", record_kind=tagging.TAGGING, vocab_size=50,
                            label_names=("O", "B-X", "I-X"))


def test_its_tags_have_a_token_axis_padded_with_the_ignored_label():
  data = configs.DataConfig(seq_length=8)
  fills = tagging.KIND.token_fills(_needs(), data)
  assert fills == {**dict.fromkeys(constants.ENCODER_INPUTS, 0),
                   constants.LABEL_IDS: constants.IGNORE_LABEL}
  padded = tagging.KIND.example_padder(_needs(), 8)({
      constants.INPUT_MASK: np.ones(3, np.int32),
      constants.LABEL_IDS: np.array([-1, 2, -1], np.int32),
      constants.WINDOW_INDEX: np.int32(1)})
  assert padded[constants.INPUT_MASK].tolist() == [1, 1, 1, 0, 0, 0, 0, 0]
  assert padded[constants.LABEL_IDS].tolist() == [-1, 2, -1, -1, -1, -1, -1, -1]
  assert padded[constants.WINDOW_INDEX] == 1


def test_synthetic_tags_are_valid_ids_on_the_tokens_and_ignored_elsewhere():
  arrays = tagging.KIND.dummy_arrays(_needs(), configs.DataConfig(seq_length=12,
                                                                  global_batch_size=4))
  labels, mask = arrays[constants.LABEL_IDS], arrays[constants.INPUT_MASK]
  assert labels.shape == mask.shape == (16, 12)
  assert np.all(labels[:, 0] == constants.IGNORE_LABEL)
  assert np.all(labels[mask == 0] == constants.IGNORE_LABEL)
  scored = labels[(mask == 1) & (np.arange(12) > 0)]
  assert scored.min() >= 0 and scored.max() < 3
