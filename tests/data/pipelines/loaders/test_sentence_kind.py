"""The sentence record kind: a class id or a score per example, looked up in the task's
label names; its records' features and their fills."""

import numpy as np
import pytest

from bert_tf import configs
from bert_tf import constants
from bert_tf.data.pipelines import loaders
from bert_tf.data.pipelines.loaders import sentence
from bert_tf.data.records import record_specs
from bert_tf.data.task_files import glue


def _needs(**kwargs):
  return loaders.InputNeeds(task="t", record_kind=sentence.SENTENCE, vocab_size=50, **kwargs)


def test_labels_are_class_ids_by_label_names_or_scores_and_an_unknown_one_is_refused():
  examples = [glue.SentenceExample(i, "a", None, label)
              for i, label in enumerate(["b", None, "a"])]
  ids = sentence.label_ids(examples, _needs(label_names=("a", "b")))
  assert ids.dtype == np.int32 and ids.tolist() == [1, 0, 0]
  scores = [glue.SentenceExample(0, "a", None, 0.25), glue.SentenceExample(1, "a", None, None)]
  assert sentence.label_ids(scores, _needs(regression=True)).tolist() == [0.25, 0.0]
  with pytest.raises(ValueError, match="label 'c' is not in label_names"):
    sentence.label_ids([glue.SentenceExample(0, "a", None, "c")], _needs(label_names=("a",)))


def test_a_score_is_a_float_feature_and_only_the_encoder_inputs_are_per_token():
  data = configs.DataConfig(seq_length=8)
  spec = {f.key: f for f in sentence.KIND.spec(_needs(regression=True), data)}
  assert spec[constants.LABEL_IDS].dtype == record_specs.FLOAT32
  assert spec[constants.LABEL_IDS].shape == ()
  assert sentence.KIND.token_fills(_needs(), data) == dict.fromkeys(
      constants.ENCODER_INPUTS, 0)
