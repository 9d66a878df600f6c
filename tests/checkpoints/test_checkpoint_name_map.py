"""Tests of bert_tf.checkpoints.name_map: the one table of BERT weight names."""

import pytest

from bert_tf.checkpoints import architectures, name_map
from bert_tf.models.bert_classifier import BertClassifier
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.bert_multiple_choice import BertMultipleChoice
from bert_tf.models.bert_pretrainer import BertPretrainer
from bert_tf.models.bert_span_labeler import BertSpanLabeler
from bert_tf.models.bert_token_classifier import BertTokenClassifier


def _pretrainer(num_layers=3, nsp=True):
  encoder = BertEncoder(vocab_size=50, hidden_size=16, num_layers=num_layers,
                        num_attention_heads=2, intermediate_size=24,
                        max_position_embeddings=20)
  return BertPretrainer(encoder, use_next_sentence_label=nsp)


@pytest.mark.parametrize("nsp", [True, False])
def test_table_names_exactly_the_variables_of_a_pretrainer(nsp):
  model = _pretrainer(nsp=nsp)
  rows = name_map.weight_names(3, tuple(model.checkpoint_items))
  assert sorted(row.bert_tf for row in rows) == sorted(w.path for w in model.weights)


def test_table_names_exactly_the_variables_of_an_encoder():
  encoder = _pretrainer().encoder
  rows = name_map.weight_names(3, ("encoder",))
  assert sorted(row.bert_tf for row in rows) == sorted(w.path for w in encoder.weights)


@pytest.mark.parametrize("fmt", ["bert_tf", "google_tf1", "huggingface", "keras_hub"])
def test_names_are_unique_within_each_architecture_and_format(fmt):
  for architecture in architectures.ARCHITECTURES:
    rows = name_map.weight_names(12, architecture.items)
    names = [row.name_in(fmt) for row in rows if row.name_in(fmt) is not None]
    assert len(names) == len(set(names)), architecture
  pretraining = name_map.weight_names(12, ("encoder", "masked_lm", "next_sentence"))
  assert len(pretraining) == 5 + 16 * 12 + 2 + 5 + 2


@pytest.mark.parametrize("item, head", [
    ("classifier", lambda e: BertClassifier(e, 3)),
    ("tagger", lambda e: BertTokenClassifier(e, 4)),
    ("span_labeler", BertSpanLabeler),
    ("choice_scorer", lambda e: BertMultipleChoice(e, 4)),
])
def test_table_names_exactly_the_variables_of_each_task_model(item, head):
  model = head(_pretrainer().encoder)
  rows = name_map.weight_names(3, ("encoder", item))
  assert sorted(row.bert_tf for row in rows) == sorted(w.path for w in model.weights)
  assert architectures.of_items(model.checkpoint_items).head == item


def test_huggingface_names_shared_by_several_heads_mark_no_item():
  # classifier.* is the head of sequence and token classification and multiple choice.
  assert name_map.items_present(["classifier.weight", "pooler.dense.bias"],
                                "huggingface") == ("encoder",)
  assert name_map.items_present(["qa_outputs.weight"], "huggingface") == ("span_labeler",)
  assert name_map.items_present(["output_weights"], "google_tf1") == ("classifier",)


def test_dense_kernels_transpose_for_huggingface_but_not_for_tf1_except_nsp():
  rows = {row.bert_tf: row for row in name_map.weight_names(1)}
  query = rows["transformer_layer_0/attention/query/kernel"]
  assert query.hf_transpose and not query.tf1_transpose
  nsp = rows["next_sentence/dense/kernel"]
  assert nsp.tf1 == "cls/seq_relationship/output_weights"
  assert nsp.tf1_transpose and nsp.hf_transpose
  assert not any(row.hf_transpose for row in rows.values() if not row.bert_tf.endswith("kernel"))


def test_canonical_hf_name_drops_prefix_and_renames_gamma_beta():
  assert name_map.canonical_hf_name("bert.embeddings.LayerNorm.gamma") == \
      "embeddings.LayerNorm.weight"
  assert name_map.canonical_hf_name("encoder.layer.3.output.LayerNorm.beta") == \
      "encoder.layer.3.output.LayerNorm.bias"
  assert name_map.canonical_hf_name("cls.predictions.transform.LayerNorm.gamma") == \
      "cls.predictions.transform.LayerNorm.weight"
  # Only LayerNorm parameters are renamed.
  assert name_map.canonical_hf_name("bert.pooler.dense.bias") == "pooler.dense.bias"


def test_hf_file_names_carry_the_bert_prefix_only_for_encoder_rows_with_heads():
  rows = {row.bert_tf: row for row in name_map.weight_names(1)}
  word = rows["embeddings/word_embeddings"]
  assert name_map.hf_file_name(word, True) == "bert.embeddings.word_embeddings.weight"
  assert name_map.hf_file_name(word, False) == "embeddings.word_embeddings.weight"
  bias = rows["masked_lm/output_bias"]
  assert name_map.hf_file_name(bias, True) == "cls.predictions.bias"


def test_items_present_finds_heads_by_any_of_their_names():
  assert name_map.items_present(["encoder.layer.7.output.dense.weight"], "huggingface") == (
      "encoder",)
  assert name_map.items_present(
      ["bert/pooler/dense/kernel", "cls/predictions/output_bias"], "google_tf1") == (
          "encoder", "masked_lm")
  assert name_map.items_present(["cls/seq_relationship/output_bias"], "google_tf1") == (
      "next_sentence",)


def test_ignored_names_are_step_optimizer_slots_and_position_ids():
  assert name_map.TF1_IGNORED.match("global_step")
  assert name_map.TF1_IGNORED.match("bert/encoder/layer_0/output/dense/kernel/adam_m")
  assert not name_map.TF1_IGNORED.match("bert/encoder/layer_0/output/dense/kernel")
  assert name_map.HF_IGNORED.match("bert.embeddings.position_ids")
  assert not name_map.HF_IGNORED.match("embeddings.position_embeddings.weight")


def test_unknown_item_is_an_error():
  with pytest.raises(ValueError, match="lora"):
    name_map.weight_names(2, ("encoder", "lora"))
