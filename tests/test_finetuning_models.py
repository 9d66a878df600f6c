"""BertClassifier, BertTokenClassifier and BertMultipleChoice."""

import numpy as np
import pytest
import keras

from bert_tf import constants
from bert_tf.models.bert_classifier import LOGITS, BertClassifier
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.bert_multiple_choice import BertMultipleChoice
from bert_tf.models.bert_token_classifier import BertTokenClassifier


def _encoder():
  return BertEncoder(vocab_size=50, hidden_size=16, num_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=32, dropout_rate=0.0,
                     attention_dropout_rate=0.0)


def _inputs(shape, seed=0):
  rng = np.random.default_rng(seed)
  mask = np.ones(shape, np.int32)
  mask[..., -2:] = 0
  return {constants.INPUT_WORD_IDS: rng.integers(5, 50, shape).astype(np.int32) * mask,
          constants.INPUT_MASK: mask,
          constants.INPUT_TYPE_IDS: np.zeros(shape, np.int32)}


CASES = [
    (lambda: BertClassifier(_encoder(), 3), (2, 7), (2, 3)),
    (lambda: BertClassifier(_encoder(), 1), (2, 7), (2, 1)),
    (lambda: BertTokenClassifier(_encoder(), 5), (2, 7), (2, 7, 5)),
    (lambda: BertMultipleChoice(_encoder(), 4), (2, 4, 7), (2, 4)),
]


@pytest.mark.parametrize("make,input_shape,logits_shape", CASES)
def test_logits_have_task_shape_and_float32(make, input_shape, logits_shape):
  logits = make()(_inputs(input_shape))[LOGITS]
  assert tuple(logits.shape) == logits_shape
  assert logits.dtype == "float32"


@pytest.mark.parametrize("make,input_shape,logits_shape", CASES)
def test_checkpoint_items_cover_every_weight(make, input_shape, logits_shape):
  model = make()
  model(_inputs(input_shape))
  covered = {id(v) for item in model.checkpoint_items.values() for v in item.weights}
  assert covered == {id(v) for v in model.weights}
  assert "encoder" in model.checkpoint_items


@pytest.mark.parametrize("make,input_shape,logits_shape", CASES)
def test_keras_save_and_load_give_equal_outputs(make, input_shape, logits_shape, tmp_path):
  model = make()
  inputs = _inputs(input_shape)
  expected = model(inputs)[LOGITS]
  path = str(tmp_path / "model.keras")
  model.save(path)
  restored = keras.saving.load_model(path)
  np.testing.assert_allclose(restored(inputs)[LOGITS], expected, rtol=1e-5, atol=1e-6)
  assert restored.get_config() == model.get_config()


def test_multiple_choice_scores_each_choice_independently():
  model = BertMultipleChoice(_encoder(), 3)
  inputs = _inputs((1, 3, 6))
  logits = model(inputs)[LOGITS].numpy()
  swapped = {k: v[:, ::-1] for k, v in inputs.items()}
  np.testing.assert_allclose(model(swapped)[LOGITS].numpy()[0], logits[0][::-1], rtol=1e-5,
                             atol=1e-6)


def test_multiple_choice_needs_two_choices():
  with pytest.raises(ValueError, match="num_choices"):
    BertMultipleChoice(_encoder(), 1)
