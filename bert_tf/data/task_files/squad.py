"""SQuAD v1.1 / v2.0: the examples and their windows' features, and the JSON reader.

The context is split on white space into words (with a character -> word map) and the
labelled answer located in them, as the original BERT release's run_squad does. The
windows (`squad_features`) and their TFRecords and tf.data input (`squad_records`) build
on these examples.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from bert_tf.data.task_files import readers
from bert_tf.utils import errors

# Model-input names of the span labels (TFRecord features carry the same names).
START_POSITIONS = "start_positions"
END_POSITIONS = "end_positions"
IS_IMPOSSIBLE = "is_impossible"
UNIQUE_IDS = "unique_ids"

# Unique ids of features count up from here, as in the original release.
FIRST_UNIQUE_ID = 1000000000


class SquadFormatError(errors.UserError, ValueError):
  """A SQuAD JSON file cannot be read; the message names the file and position."""


@dataclasses.dataclass
class SquadExample:
  """One question about one context.

  doc_tokens are the context's whitespace-separated words; start_position and
  end_position index them (inclusive), -1 when the question has no answer or no label.
  answers holds every gold answer text (for evaluation).
  """

  qas_id: str
  question_text: str
  doc_tokens: List[str]
  orig_answer_text: str = ""
  start_position: int = -1
  end_position: int = -1
  is_impossible: bool = False
  answers: List[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class SquadFeatures:
  """One window of one example, ready for the model.

  token_to_orig_map maps a position of `tokens` inside the window's context to the index
  of its word in example.doc_tokens; token_is_max_context says whether this window is
  the one where that token has the most context on both sides.
  """

  unique_id: int
  example_index: int
  doc_span_index: int
  tokens: List[str]
  token_to_orig_map: Dict[int, int]
  token_is_max_context: Dict[int, bool]
  input_ids: List[int]
  input_mask: List[int]
  segment_ids: List[int]
  start_position: int = 0
  end_position: int = 0
  is_impossible: bool = False


def is_whitespace(ch: str) -> bool:
  """White space as the original SQuAD reader splits on (including U+202F)."""
  return ch in (" ", "\t", "\r", "\n") or ord(ch) == 0x202F


def split_context(text: str) -> Tuple[List[str], List[int]]:
  """Splits a context on white space.

  Returns:
    (words, char_to_word_offset): the words, and for every character of `text` the index
    of the word it belongs to (white space maps to the preceding word, -1 before any).
  """
  words: List[str] = []
  char_to_word_offset: List[int] = []
  prev_is_whitespace = True
  for ch in text:
    if is_whitespace(ch):
      prev_is_whitespace = True
    else:
      if prev_is_whitespace:
        words.append(ch)
      else:
        words[-1] += ch
      prev_is_whitespace = False
    char_to_word_offset.append(len(words) - 1)
  return words, char_to_word_offset


def load_squad_json(path: str) -> List[Mapping]:
  """Returns the `data` list of a SQuAD JSON file.

  Raises:
    SquadFormatError: naming the file and the line/column of a JSON syntax error, or
      the missing top-level field.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  with tf.io.gfile.GFile(path, "r") as f:
    text = f.read()
  try:
    data = json.loads(text)
  except json.JSONDecodeError as e:
    raise SquadFormatError(f"{path}: invalid JSON at line {e.lineno}, column {e.colno} "
                           f"(character {e.pos}): {e.msg}") from None
  if not isinstance(data, dict) or not isinstance(data.get("data"), list):
    raise SquadFormatError(f"{path}: a SQuAD file is a JSON object with a 'data' list")
  return data["data"]


def _locate_answer(text: str, offset, doc_tokens: Sequence[str],
                   char_to_word_offset: Sequence[int]) -> Optional[Tuple[int, int]]:
  """(first word, last word) of an answer, or None when its text is not found there."""
  if not text or not isinstance(offset, int) or offset < 0:
    return None
  end_char = offset + len(text) - 1
  if end_char >= len(char_to_word_offset):
    return None
  start_word = char_to_word_offset[offset]
  end_word = char_to_word_offset[end_char]
  if start_word < 0:
    return None
  actual = " ".join(doc_tokens[start_word:end_word + 1])
  if actual.find(" ".join(text.split())) == -1:
    return None
  return start_word, end_word


def read_squad_examples(path_or_data, is_training: bool, version_2_with_negative: bool,
                        require_answers: bool = False) -> Tuple[List[SquadExample], int]:
  """Reads the examples of a SQuAD file.

  Args:
    path_or_data: a JSON file path, or the already loaded `data` list.
    is_training: whether this is training data. Answer spans are located for the first
      gold answer of each question either way (evaluation data uses them for an eval
      loss); in training a question whose answer cannot be located is skipped.
    version_2_with_negative: whether questions may be unanswerable (`is_impossible`).
    require_answers: refuse a question without answers that is not marked
      is_impossible in evaluation data too (it always is in training data).

  Returns:
    (examples, num_skipped): training questions whose answer text cannot be found at
    its answer_start in the context are skipped and counted, as the original does.

  Raises:
    SquadFormatError: naming the file and the article/paragraph/question of a field
      that is missing or out of range.
  """
  source = path_or_data if isinstance(path_or_data, str) else "<squad data>"
  data = load_squad_json(path_or_data) if isinstance(path_or_data, str) else path_or_data
  examples: List[SquadExample] = []
  num_skipped = 0
  for a, article in enumerate(data):
    for p, paragraph in enumerate(article.get("paragraphs", [])):
      where = f"{source}: data[{a}].paragraphs[{p}]"
      if "context" not in paragraph or "qas" not in paragraph:
        raise SquadFormatError(f"{where} needs 'context' and 'qas'")
      context = paragraph["context"]
      doc_tokens, char_to_word_offset = split_context(context)
      for q, qa in enumerate(paragraph["qas"]):
        qwhere = f"{where}.qas[{q}]"
        if "id" not in qa or "question" not in qa:
          raise SquadFormatError(f"{qwhere} needs 'id' and 'question'")
        answers = qa.get("answers", [])
        is_impossible = bool(qa.get("is_impossible", False)) if version_2_with_negative else False
        example = SquadExample(qas_id=qa["id"], question_text=qa["question"],
                               doc_tokens=doc_tokens, is_impossible=is_impossible,
                               answers=[ans.get("text", "") for ans in answers])
        if is_impossible or not answers:
          if (is_training or require_answers) and not is_impossible:
            raise SquadFormatError(f"{qwhere} has no answers and is not marked "
                                   f"is_impossible; {readers.LABELS_NEEDED}")
          examples.append(example)
          continue
        answer = answers[0]
        if "text" not in answer or "answer_start" not in answer:
          raise SquadFormatError(f"{qwhere}.answers[0] needs 'text' and 'answer_start'")
        span = _locate_answer(answer["text"], answer["answer_start"], doc_tokens,
                              char_to_word_offset)
        if span is None:
          if is_training:
            logging.warning("Skipping %s: answer %r at character %s is not in its context",
                            qwhere, answer["text"], answer["answer_start"])
            num_skipped += 1
            continue
        else:
          example.orig_answer_text = answer["text"]
          example.start_position, example.end_position = span
        examples.append(example)
  if num_skipped:
    logging.warning("%s: skipped %d questions whose answer is not in their context", source,
                    num_skipped)
  return examples, num_skipped


@readers.register_reader("squad_json")
def read_squad_file(data_config, options) -> List[SquadExample]:
  """The questions of the SQuAD JSON file data_config.input_path (training questions
  whose answer is not in their context skipped), unanswerable ones with
  options["version_2_with_negative"]; a question without answers that is not marked
  is_impossible is refused."""
  examples, _ = read_squad_examples(
      data_config.input_path, is_training=data_config.is_training,
      version_2_with_negative=bool(options.get("version_2_with_negative", False)),
      require_answers=True)
  return examples
