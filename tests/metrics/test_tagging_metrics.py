"""conlleval-style entity scores against hand-counted cases; the served entities' reading
of tags."""

import pytest

from bert_tf.metrics import tagging
from bert_tf.metrics.tagging import Entity, conll_precision_recall_f1, extract_entities


def test_iob1_entities_split_only_at_b_tags():
  tags = ["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-ORG"]
  assert extract_entities(tags) == [Entity("PER", 0, 2), Entity("LOC", 3, 4),
                                    Entity("LOC", 4, 5), Entity("ORG", 5, 6)]


def test_iob2_and_iob1_spellings_give_the_same_entities():
  iob1 = ["I-PER", "I-PER", "O", "I-MISC", "O", "I-LOC", "B-LOC"]
  iob2 = ["B-PER", "I-PER", "O", "B-MISC", "O", "B-LOC", "B-LOC"]
  assert extract_entities(iob1) == extract_entities(iob2)


def test_type_change_inside_i_run_starts_a_new_entity():
  assert extract_entities(["B-PER", "I-LOC"]) == [Entity("PER", 0, 1), Entity("LOC", 1, 2)]


def test_iobes_entities_end_at_e_and_s():
  assert extract_entities(["B-PER", "E-PER", "S-LOC", "S-LOC"]) == [
      Entity("PER", 0, 2), Entity("LOC", 2, 3), Entity("LOC", 3, 4)]


def test_scores_match_hand_count():
  gold = [["I-PER", "I-PER", "O", "I-LOC", "B-LOC"], ["B-ORG", "O"]]
  pred = [["B-PER", "I-PER", "O", "B-LOC", "I-LOC"], ["B-ORG", "B-MISC"]]
  # Gold: PER, LOC, LOC, ORG (4). Predicted: PER, LOC(3-5), ORG, MISC (4). Correct: PER, ORG.
  result = conll_precision_recall_f1(gold, pred)
  assert result["precision"] == pytest.approx(0.5)
  assert result["recall"] == pytest.approx(0.5)
  assert result["f1"] == pytest.approx(0.5)
  # Token accuracy compares tag strings, as conlleval does: I-PER != B-PER.
  assert result["accuracy"] == pytest.approx(3 / 7)
  assert result["LOC/recall"] == 0.0 and result["PER/f1"] == 1.0
  assert result["MISC/precision"] == 0.0


def test_partial_boundary_match_is_not_correct():
  result = conll_precision_recall_f1([["B-PER", "I-PER", "I-PER"]], [["B-PER", "I-PER", "O"]])
  assert result["f1"] == 0.0


def test_malformed_tag_and_length_mismatch_are_errors():
  with pytest.raises(ValueError, match="X-PER"):
    extract_entities(["X-PER"])
  with pytest.raises(ValueError, match="Sentence 0"):
    conll_precision_recall_f1([["O"]], [["O", "O"]])


def test_served_tag_types_split_iob_prefixes_and_an_unprefixed_tag_is_its_own_type():
  assert tagging.tag_types(["O", "B-PER", "I-PER", "MISC"]) == (
      ("PER", "MISC"), (-1, 0, 0, 1), (False, True, False, False))


def test_served_entities_start_at_b_or_a_change_of_type_and_go_on_over_their_type():
  # Words tagged: I-PER B-PER I-PER O I-PER MISC MISC B-PER (IOB1, an unprefixed type).
  _, type_index, begins = tagging.tag_types(["O", "B-PER", "I-PER", "MISC"])
  tags = [2, 1, 2, 0, 2, 3, 3, 1]
  assert tagging.served_entities([type_index[t] for t in tags], [begins[t] for t in tags]) == [
      (0, 0, 0), (0, 1, 2), (0, 4, 4), (1, 5, 6), (0, 7, 7)]
