"""Tests of bert_tf.checkpoints.name_map: the one table of BERT weight names."""

import pytest

from bert_tf.checkpoints import name_map
from bert_tf.models import BertEncoder, BertPretrainer


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


@pytest.mark.parametrize("fmt", ["bert_tf", "google_tf1", "huggingface"])
def test_names_are_unique_within_each_format(fmt):
  rows = name_map.weight_names(12)
  names = [row.name_in(fmt) for row in rows]
  assert len(names) == len(set(names)) == 5 + 16 * 12 + 2 + 5 + 2


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
  with pytest.raises(ValueError, match="classifier"):
    name_map.weight_names(2, ("encoder", "classifier"))
