"""Entity-level precision, recall and F1 as the CoNLL shared tasks' conlleval computes them.

Tags are `O` or `<prefix>-<type>` with prefix B, I, E or S, so IOB1 (I- inside and at the
start, B- only between two adjacent entities of one type), IOB2 (every entity starts
with B-) and IOBES files all read the same way. An entity counts as correct when the
predicted one has the same type, start and end as a gold one.

The served entities (an export's and the predictor's) read tags more leniently
(`tag_types`, `served_entities`): a tag without a B-/I- prefix is a type of its own.
"""

import collections
import dataclasses
from typing import Dict, List, Sequence, Tuple


@dataclasses.dataclass(frozen=True)
class Entity:
  """A chunk of a tag sequence: tokens [start, end) of one type."""

  type: str
  start: int
  end: int


OUTSIDE = "O"


def tag_types(label_names: Sequence[str]) -> Tuple[Tuple[str, ...], Tuple[int, ...],
                                                   Tuple[bool, ...]]:
  """(entity types, type index per label (-1 for O), starts-an-entity per label) of the
  served entities: `B-X` / `I-X` (IOB1 or IOB2) are of type X, `B-X` starts an entity,
  any other tag but `O` is a type of its own."""
  types, type_index, begins = [], [], []
  for name in label_names:
    if name == OUTSIDE:
      type_index.append(-1)
      begins.append(False)
      continue
    prefix, _, rest = name.partition("-")
    entity_type = rest if prefix in ("B", "I") and rest else name
    if entity_type not in types:
      types.append(entity_type)
    type_index.append(types.index(entity_type))
    begins.append(prefix == "B" and bool(rest))
  return tuple(types), tuple(type_index), tuple(begins)


def served_entities(word_types: Sequence[int], word_begins: Sequence[bool]
                    ) -> List[Tuple[int, int, int]]:
  """The served entities of one text's words: (type index, first word, last word).

  An entity starts at a word of a type (-1: outside) that begins one (`B-X`) or does
  not follow a word of its type, and goes on over the following words of its type
  that do not begin one (`tag_types` gives each label's type and whether it begins).
  """
  entities = []
  for i, (entity_type, begins) in enumerate(zip(word_types, word_begins)):
    if entity_type < 0:
      continue
    if begins or i == 0 or word_types[i - 1] != entity_type:
      entities.append([entity_type, i, i])
    else:
      entities[-1][2] = i
  return [tuple(e) for e in entities]


def _split_tag(tag: str) -> Tuple[str, str]:
  if tag == "O" or not tag:
    return "O", ""
  prefix, sep, entity_type = tag.partition("-")
  if not sep or prefix not in ("B", "I", "E", "S"):
    raise ValueError(f"Tag '{tag}' is neither O nor <B|I|E|S>-<type>")
  return prefix, entity_type


def _end_of_chunk(prev_tag, tag, prev_type, entity_type) -> bool:
  if prev_tag in ("E", "S"):
    return True
  if prev_tag in ("B", "I") and tag in ("B", "S", "O"):
    return True
  return prev_tag != "O" and prev_type != entity_type


def _start_of_chunk(prev_tag, tag, prev_type, entity_type) -> bool:
  if tag in ("B", "S"):
    return True
  if tag in ("I", "E") and prev_tag in ("E", "S", "O"):
    return True
  return tag != "O" and prev_type != entity_type


def extract_entities(tags: Sequence[str]) -> List[Entity]:
  """The entities of one sentence's tag sequence, by conlleval's chunk rules."""
  entities = []
  prev_tag, prev_type, start = "O", "", None
  for i, raw in enumerate(list(tags) + ["O"]):
    tag, entity_type = _split_tag(raw)
    if start is not None and _end_of_chunk(prev_tag, tag, prev_type, entity_type):
      entities.append(Entity(prev_type, start, i))
      start = None
    if _start_of_chunk(prev_tag, tag, prev_type, entity_type):
      start = i
    prev_tag, prev_type = tag, entity_type
  return entities


def _prf(correct: int, predicted: int, gold: int) -> Dict[str, float]:
  precision = correct / predicted if predicted else 0.0
  recall = correct / gold if gold else 0.0
  f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
  return {"precision": precision, "recall": recall, "f1": f1}


def conll_precision_recall_f1(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]
                              ) -> Dict[str, float]:
  """Entity-level scores over sentences.

  Args:
    gold: per sentence, the gold tag of every word.
    predicted: per sentence, the predicted tag of every word (same lengths).

  Returns:
    {"precision", "recall", "f1", "accuracy" (token level)} and, per entity type T,
    "T/precision", "T/recall", "T/f1"; all floats in [0, 1].
  """
  if len(gold) != len(predicted):
    raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted")
  correct, n_pred, n_gold = (collections.Counter() for _ in range(3))
  tokens = tokens_correct = 0
  for i, (gold_tags, pred_tags) in enumerate(zip(gold, predicted)):
    if len(gold_tags) != len(pred_tags):
      raise ValueError(f"Sentence {i}: {len(gold_tags)} gold tags but {len(pred_tags)} "
                       "predicted")
    gold_entities = set(extract_entities(gold_tags))
    pred_entities = set(extract_entities(pred_tags))
    for e in gold_entities:
      n_gold[e.type] += 1
    for e in pred_entities:
      n_pred[e.type] += 1
      if e in gold_entities:
        correct[e.type] += 1
    tokens += len(gold_tags)
    tokens_correct += sum(g == p for g, p in zip(gold_tags, pred_tags))
  result = _prf(sum(correct.values()), sum(n_pred.values()), sum(n_gold.values()))
  result["accuracy"] = tokens_correct / tokens if tokens else 0.0
  for entity_type in sorted(set(n_gold) | set(n_pred)):
    for key, value in _prf(correct[entity_type], n_pred[entity_type],
                           n_gold[entity_type]).items():
      result[f"{entity_type}/{key}"] = value
  return result
