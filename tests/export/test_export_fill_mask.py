"""export_fill_mask and querying the export from a fresh process."""

import pytest

import export_helpers as helpers
from bert_tf.export import fill_mask


@pytest.mark.slow  # a fresh process
def test_exported_fill_mask_answers_each_mask_in_a_fresh_process(tmp_path):
  vocab = helpers.write_vocab(tmp_path)
  config = helpers.experiment(vocab)
  model = helpers.build_model(config)
  path = fill_mask.export_fill_mask(model, config, vocab, str(tmp_path / "export"), top_k=3)
  results = fill_mask.query_fill_mask_fresh_process(
      path, ["the [MASK] sat on the [MASK] .", "no mask here"])
  assert [len(r["masks"]) for r in results] == [2, 0]
  candidates = results[0]["masks"][0]
  assert len(candidates) == 3
  probabilities = [p for _, p in candidates]
  assert probabilities == sorted(probabilities, reverse=True) and probabilities[0] > 0
