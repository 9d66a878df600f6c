"""Asking an export (bert_tf.export.query): the kind read from serving_default's outputs,
texts grouped into questions, readable answers of every kind, and the one-line errors.
The exports themselves are asked in the tests that make them (test_export.py, fill-mask;
test_export_hub.py; test_export_multiple_choice.py; integration/test_export_tasks.py)."""

import pytest

from bert_tf import constants
from bert_tf.export import classifier_serving as cs
from bert_tf.export import fill_mask_serving as fm
from bert_tf.export import multiple_choice_serving as mcs
from bert_tf.export import query
from bert_tf.export import squad_serving as ss
from bert_tf.export import tagging_serving as ts
from bert_tf.utils import errors

OUTPUTS = {
    "fill_mask": {fm.MASK_COUNT, fm.MASKS_DROPPED, fm.MASK_POSITIONS, fm.TOP_K_IDS,
                  fm.TOP_K_TOKENS, fm.TOP_K_PROBABILITIES, fm.TOP_K_LOGITS},
    "squad": {ss.START_INDEX, ss.END_INDEX, ss.WINDOW_INDEX, ss.NUM_WINDOWS, ss.SCORE,
              ss.NULL_SCORE, ss.HAS_ANSWER, ss.ANSWER_TEXT, ss.ANSWER_START, ss.ANSWER_END,
              ss.START_LOGITS, ss.END_LOGITS},
    "tagging": {ts.ENTITY_COUNT, ts.ENTITY_TYPES, ts.ENTITY_START, ts.ENTITY_END,
                ts.ENTITY_TEXT, ts.NUM_WINDOWS},
    "multiple_choice": {mcs.LOGITS, mcs.PROBABILITIES, mcs.CHOICE, mcs.CHOSEN_ENDING,
                        mcs.TRUNCATED_TOKENS},
    "classifier": {cs.LOGITS, cs.PROBABILITIES, cs.LABEL_IDS, cs.LABEL_NAMES,
                   cs.TRUNCATED_TOKENS},
    "encoder": {constants.POOLED_OUTPUT, constants.SEQUENCE_OUTPUT},
}


@pytest.mark.parametrize("kind", sorted(OUTPUTS))
def test_the_kind_is_read_from_the_signatures_outputs(kind):
  assert query.kind_of(OUTPUTS[kind]) == kind


def test_a_regressor_is_a_classifier_export_with_a_score_alone():
  assert query.kind_of({cs.SCORE, cs.TRUNCATED_TOKENS}) == "classifier"


def test_outputs_of_no_kind_are_an_error_naming_them():
  with pytest.raises(errors.InputError, match="logits"):
    query.kind_of({"logits"})


def _export(kind, inputs):
  return query.Export(kind, tuple(inputs), call=None)


def test_texts_form_questions_of_the_inputs_in_order():
  export = _export("squad", ("question", "context"))
  assert query.rows(export, ["q1", "c1", "q2", "c2"]) == [
      {"question": "q1", "context": "c1"}, {"question": "q2", "context": "c2"}]


@pytest.mark.parametrize("count", [0, 3])
def test_a_count_of_texts_that_fits_no_question_is_one_line_naming_the_inputs(count):
  with pytest.raises(errors.InputError) as raised:
    query.rows(_export("classifier", ("text", "text_b")), ["a"] * count)
  message = str(raised.value)
  assert "takes 2 text(s) per question (text, text_b); got " + str(count) in message
  assert "\n" not in message


def test_inputs_are_ordered_question_context_then_endings_by_number():
  names = ["ending10", "ending2", "context", "ending0"]
  assert sorted(names, key=query._input_rank) == [  # pylint: disable=protected-access
      "context", "ending0", "ending2", "ending10"]
  assert sorted(["context", "question"], key=query._input_rank) == [  # pylint: disable=protected-access
      "question", "context"]


def test_a_missing_directory_and_one_without_a_saved_model_are_errors(tmp_path):
  with pytest.raises(errors.MissingInputError, match="No export directory"):
    query.load(str(tmp_path / "absent"))
  (tmp_path / "3").mkdir()
  with pytest.raises(errors.InputError, match="is not a SavedModel"):
    query.load(str(tmp_path))


ANSWERS = {
    "fill_mask": ({"text": "a [MASK] b", "masks": [[["cat", 0.5], ["dog", 0.25]]]},
                  "  [MASK] 1: cat 0.500, dog 0.250"),
    "squad": ({"question": "q", "context": "in Paris", "has_answer": True, "answer": "Paris",
               "start": 3, "end": 8, "score": 4.0, "null_score": 1.0},
              '  answer: "Paris" (characters 3-8 of the context, score 4.000)'),
    "tagging": ({"text": "John ran", "entities": [
        {"type": "PER", "text": "John", "start": 0, "end": 4}]}, '  entities: PER "John" (0-4)'),
    "multiple_choice": ({"context": "c", "ending0": "x", "ending1": "y", "choice": 1,
                         "ending": "y", "probabilities": [0.25, 0.75]},
                        '  choice 1: "y" (probabilities 0.250, 0.750)'),
    "classifier": ({"text": "t", "label": "pos", "label_id": 1, "probabilities": [0.1, 0.9]},
                   "  label: pos (probabilities by label id: 0.100, 0.900)"),
}


@pytest.mark.parametrize("kind", sorted(ANSWERS))
def test_each_kind_is_described_as_its_texts_then_its_answer(kind):
  answer, expected = ANSWERS[kind]
  lines = query.describe({"kind": kind, **answer})
  assert lines[1] == expected
  texts = [k for k in answer if k in ("text", "question", "context", "ending0", "ending1")]
  assert lines[0] == " | ".join(f"{k}: {answer[k]}" for k in texts)


def test_no_answer_no_mask_no_entity_and_a_score_are_said_in_words():
  assert query.describe({"kind": "squad", "question": "q", "context": "c",
                         "has_answer": False, "answer": "", "start": -1, "end": -1,
                         "score": 0.5, "null_score": 2.0})[1] == (
                             "  no answer (null score 2.000, best span 0.500)")
  assert query.describe({"kind": "fill_mask", "text": "t", "masks": []})[1] == (
      "  no [MASK] in the text")
  assert query.describe({"kind": "tagging", "text": "t", "entities": []})[1] == (
      "  entities: none")
  assert query.describe({"kind": "classifier", "text": "t", "score": 3.25})[1] == (
      "  score: 3.2500")
