"""export_fill_mask, and asking the export with tools/query_saved_model.py in a fresh
process."""

import json
import os
import subprocess
import sys

import pytest

import export_helpers as helpers
import paths
from bert_tf.export import fill_mask


@pytest.mark.slow  # a fresh process
def test_exported_fill_mask_answers_each_mask_through_the_query_tool(tmp_path):
  vocab = helpers.write_vocab(tmp_path)
  config = helpers.experiment(vocab)
  model = helpers.build_model(config)
  path = fill_mask.export_fill_mask(model, config, vocab, str(tmp_path / "export"), top_k=3)
  tool = os.path.join(paths.ROOT, "tools", "query_saved_model.py")
  texts = ["the [MASK] sat on the [MASK] .", "no mask here"]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  process = subprocess.run([sys.executable, tool, "--json", path, *texts], env=env,
                           capture_output=True, text=True, timeout=600, check=False)
  assert process.returncode == 0, process.stderr[-3000:]
  results = [json.loads(line) for line in process.stdout.splitlines()]
  assert [r["text"] for r in results] == texts
  assert [len(r["masks"]) for r in results] == [2, 0]
  candidates = results[0]["masks"][0]
  assert len(candidates) == 3
  probabilities = [p for _, p in candidates]
  assert probabilities == sorted(probabilities, reverse=True) and probabilities[0] > 0
  # As a user runs it: TensorFlow's logging left at the tool's default, quiet.
  quiet_env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  asked = subprocess.run([sys.executable, tool, path, texts[0]], env=quiet_env,
                         capture_output=True, text=True, timeout=600, check=True)
  readable = asked.stdout
  assert readable.splitlines()[0] == f"text: {texts[0]}"
  assert readable.splitlines()[1].startswith("  [MASK] 1: ")
  # The answer alone: no line of TensorFlow's logging (oneDNN's, say) among its lines.
  assert all(line.startswith(("text: ", "  [MASK] ")) for line in readable.splitlines())
  assert asked.stderr.strip() == "", asked.stderr
