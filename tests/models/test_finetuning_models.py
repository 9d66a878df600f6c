"""BertClassifier, BertTokenClassifier, BertSpanLabeler and BertMultipleChoice."""

import numpy as np
import pytest

import harness
from bert_tf import constants
from bert_tf.models.bert_classifier import LOGITS, BertClassifier
from bert_tf.models.bert_multiple_choice import BertMultipleChoice
from bert_tf.models.bert_span_labeler import END_LOGITS, START_LOGITS, BertSpanLabeler
from bert_tf.models.bert_token_classifier import BertTokenClassifier


def _inputs(shape, seed=0):
  rng = np.random.default_rng(seed)
  mask = np.ones(shape, np.int32)
  mask[..., -2:] = 0
  vocab_size = harness.TINY_ENCODER["vocab_size"]
  return {constants.INPUT_WORD_IDS: rng.integers(5, vocab_size, shape).astype(np.int32) * mask,
          constants.INPUT_MASK: mask,
          constants.INPUT_TYPE_IDS: (np.arange(shape[-1]) >= shape[-1] // 2) * mask}


def _case(make, input_shape, family, no_gradient=()):
  return harness.ModelCase(build=lambda: make(harness.tiny_encoder()),
                           inputs=lambda: _inputs(input_shape),
                           float32_outputs=(LOGITS, START_LOGITS, END_LOGITS),
                           no_gradient=no_gradient, family=family)


# (case, logits shape); heads that read the sequence output leave the pooler unused. The
# encoder sees [4, 16] batches, as in the encoder's and the pretrainer's cases: eager JAX
# compiles each op once per shape, so the backend checks share those compilations.
CASES = {
    "classifier": (_case(lambda e: BertClassifier(e, 3, dropout_rate=0.0), (4, 16),
                         "classification"), (4, 3)),
    "regression": (_case(lambda e: BertClassifier(e, 1, dropout_rate=0.0), (4, 16),
                         "regression"), (4, 1)),
    "token_classifier": (_case(lambda e: BertTokenClassifier(e, 5, dropout_rate=0.0), (4, 16),
                               "tagging", no_gradient=("pooler",)), (4, 16, 5)),
    "multiple_choice": (_case(lambda e: BertMultipleChoice(e, 4, dropout_rate=0.0), (1, 4, 16),
                              "multiple_choice"), (1, 4)),
}
SPAN_LABELER = _case(BertSpanLabeler, (4, 16), "span", no_gradient=("pooler",))
ALL_CASES = {**{name: case for name, (case, _) in CASES.items()}, "span_labeler": SPAN_LABELER}
for _name, _model_case in ALL_CASES.items():
  harness.register_backend_case(_name, _model_case)


@pytest.mark.parametrize("name", sorted(CASES))
def test_logits_have_task_shape(name):
  case, logits_shape = CASES[name]
  assert tuple(case.build()(case.inputs())[LOGITS].shape) == logits_shape


def test_span_labeler_gives_start_and_end_logits_per_token():
  outputs = SPAN_LABELER.build()(SPAN_LABELER.inputs())
  assert set(outputs) == {START_LOGITS, END_LOGITS}
  assert outputs[START_LOGITS].shape == outputs[END_LOGITS].shape == (4, 16)


@pytest.mark.parametrize("name", sorted(ALL_CASES))
def test_harness_checks(name, tmp_path):
  harness.run_model_checks(ALL_CASES[name], tmp_path)


@pytest.mark.parametrize("name", sorted(ALL_CASES))
def test_saved_model_export_reloads_with_equal_outputs(name, tmp_path):
  case = ALL_CASES[name]
  harness.run_saved_model_export(case.build(), case.inputs(), tmp_path)


# JAX and torch in processes of their own for every registered model: about 40 s.
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ALL_CASES))
def test_tensorflow_jax_and_torch_give_the_same_outputs_loss_and_step(name):
  harness.run_backend_parity(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ALL_CASES))
def test_fit_on_torch_trains_every_variable(name):
  harness.run_torch_fit(name)


@pytest.mark.parametrize("name", sorted(ALL_CASES))
def test_checkpoint_items_cover_every_weight(name):
  case = ALL_CASES[name]
  model = case.build()
  model(case.inputs())
  covered = {id(v) for item in model.checkpoint_items.values() for v in item.weights}
  assert covered == {id(v) for v in model.weights}
  assert "encoder" in model.checkpoint_items


def test_multiple_choice_scores_each_choice_independently():
  model = BertMultipleChoice(harness.tiny_encoder(), 3)
  inputs = _inputs((1, 3, 6))
  logits = model(inputs)[LOGITS].numpy()
  swapped = {k: v[:, ::-1] for k, v in inputs.items()}
  np.testing.assert_allclose(model(swapped)[LOGITS].numpy()[0], logits[0][::-1], rtol=1e-5,
                             atol=1e-6)


def test_multiple_choice_needs_two_choices():
  with pytest.raises(ValueError, match="num_choices"):
    BertMultipleChoice(harness.tiny_encoder(), 1)
