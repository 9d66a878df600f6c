"""The squad record kind: the questions of a SQuAD JSON file, their windows and the
file's answers, what SquadTask's evaluation reads through the kind (it reads no file
itself), read once per file; its synthetic windows hold answers inside the context."""

import json

import numpy as np

import finetuning_helpers
from bert_tf import configs
from bert_tf import constants
from bert_tf.data.pipelines import loaders
from bert_tf.data.pipelines.loaders import squad as squad_kind
from bert_tf.data.task_files import squad

WORDS = finetuning_helpers.WORDS[:12]


def _squad_file(path, num_questions):
  paragraphs = []
  for i in range(num_questions):
    words = [WORDS[(i + j) % len(WORDS)] for j in range(8)]
    paragraphs.append({"context": " ".join(words), "qas": [{
        "id": f"q{i}", "question": f"what follows {words[2]} ?",
        "answers": [{"text": words[3], "answer_start": len(" ".join(words[:3])) + 1}]}]})
  path.write_text(json.dumps({"version": "1.1", "data": [{"title": "t",
                                                          "paragraphs": paragraphs}]}))
  return str(path)


def _needs(tmp_path):
  return loaders.InputNeeds(
      task="squad", record_kind=squad_kind.SQUAD, vocab_size=100,
      vocab_file=finetuning_helpers.write_vocab(tmp_path / "vocab.txt"),
      options={"doc_stride": 8, "max_query_length": 6, "version_2_with_negative": False})


def test_the_questions_of_a_file_come_with_their_windows_and_answers_read_once(tmp_path):
  path = _squad_file(tmp_path / "dev.json", 3)
  needs = _needs(tmp_path)
  data = configs.DataConfig(format=squad_kind.SQUAD_JSON, input_path=path, seq_length=24,
                            is_training=False)
  questions = squad_kind.KIND.questions(needs, data)
  assert [e.qas_id for e in questions.examples] == ["q0", "q1", "q2"]
  assert {w.example_index for w in questions.windows} == {0, 1, 2}
  assert questions.articles == squad.load_squad_json(path)
  # Read once: the file gone, the same questions come back.
  (tmp_path / "dev.json").unlink()
  again = squad_kind.KIND.questions(needs, data)
  assert again.articles is questions.articles and again.windows is questions.windows


def test_synthetic_windows_hold_their_answer_inside_the_context():
  arrays = squad_kind.span_arrays(16, 24, 50)
  mask, types = arrays[constants.INPUT_MASK], arrays[constants.INPUT_TYPE_IDS]
  rows = np.arange(16)
  starts, ends = arrays[squad.START_POSITIONS], arrays[squad.END_POSITIONS]
  assert np.all(starts <= ends)
  assert np.all(types[rows, starts] == 1) and np.all(types[rows, ends] == 1)
  assert np.all(mask[rows, ends + 1] == 1)  # the [SEP] after the context
