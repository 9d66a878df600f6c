"""The pretraining record kind's synthetic batches: masked positions inside each
sequence, the masked ids those of the tokens there, and training and evaluation drawn
apart."""

import numpy as np

from bert_tf import configs
from bert_tf import constants
from bert_tf.data.pipelines import loaders
from bert_tf.data.pipelines.loaders import pretraining


def test_masked_positions_point_inside_their_sequence_at_the_ids_they_hold():
  batch = pretraining.pretraining_arrays(6, 16, 4, 50, seed=3)
  positions, weights = batch[constants.MASKED_LM_POSITIONS], batch[constants.MASKED_LM_WEIGHTS]
  lengths = batch[constants.INPUT_MASK].sum(axis=1)
  real = weights > 0
  assert np.all(real.sum(axis=1) >= 2)
  assert np.all((positions > 0) & (positions < lengths[:, None] - 1) | ~real)
  held = np.take_along_axis(batch[constants.INPUT_WORD_IDS], positions, axis=1)
  np.testing.assert_array_equal(batch[constants.MASKED_LM_IDS], held * real)


def test_the_dummy_input_holds_distinct_batches_and_evaluation_draws_other_ones():
  needs = loaders.InputNeeds(task="t", record_kind=pretraining.PRETRAINING, vocab_size=50)
  data = configs.DataConfig(seq_length=16, max_predictions_per_seq=4, global_batch_size=2)
  train = pretraining.KIND.dummy_arrays(needs, data)
  evaluation = pretraining.KIND.dummy_arrays(needs, data.replace(is_training=False))
  ids = train[constants.INPUT_WORD_IDS]
  assert len(ids) == 2 * pretraining.DUMMY_EVAL_BATCHES
  assert not np.array_equal(ids[:2], ids[2:4])
  assert not np.array_equal(ids, evaluation[constants.INPUT_WORD_IDS])
