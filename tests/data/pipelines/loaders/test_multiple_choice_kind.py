"""The multiple_choice record kind: one sequence per choice, [B, C, T], and the right
choice's index."""

import numpy as np

from bert_tf import configs
from bert_tf import constants
from bert_tf.data.pipelines import loaders
from bert_tf.data.pipelines.loaders import multiple_choice


def _needs(num_choices=3):
  return loaders.InputNeeds(task="t", record_kind=multiple_choice.MULTIPLE_CHOICE,
                            vocab_size=50, options={"num_choices": num_choices})


def test_every_per_token_feature_has_one_sequence_per_choice():
  spec = multiple_choice.KIND.spec(_needs(), configs.DataConfig(seq_length=8))
  shapes = {f.key: f.shape for f in spec if f.token_fill is not None}
  assert shapes == dict.fromkeys(constants.ENCODER_INPUTS, (3, 8))
  assert {f.key: f.shape for f in spec}[constants.LABEL_IDS] == ()


def test_synthetic_examples_choose_one_of_their_choices():
  arrays = multiple_choice.KIND.dummy_arrays(
      _needs(4), configs.DataConfig(seq_length=8, global_batch_size=2))
  assert arrays[constants.INPUT_WORD_IDS].shape == (8, 4, 8)
  labels = arrays[constants.LABEL_IDS]
  assert labels.shape == (8,) and labels.min() >= 0 and labels.max() < 4
  assert np.all(arrays[constants.INPUT_MASK][..., 0] == 1)
