"""A bit flipped in the newest checkpoint of tools/train.py on either engine (an
optimizer slot on TensorFlow, a weight on JAX): the rerun names the checkpoint and the
array in one line, resumes from the checkpoint before, and ends bit-exactly where an
uninterrupted run ends. Every kind of item (a weight, an optimizer slot, the step, the
input position) is flipped in the Trainer's own tests
(tests/training/test_trainer_with_fake_engine.py)."""

import os
import subprocess
import sys

import numpy as np
import pytest

import checkpoint_helpers
import paths
import trainer_helpers
from bert_tf.checkpoints import portable

TOOL = os.path.join(paths.ROOT, "tools", "train.py")
KERNEL = "transformer_layer_0/attention/query/kernel"
ITEMS = {"weights": f"items/encoder/{KERNEL}", "optimizer slot": f"optimizer/m/{KERNEL}"}


def _train(config, model_dir, backend, steps):
  env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "XLA_FLAGS")}
  env["TF_CPP_MIN_LOG_LEVEL"] = "2"
  result = subprocess.run(
      [sys.executable, TOOL, f"--config_file={config}", f"--model_dir={model_dir}",
       f"--backend={backend}", f"--params_override=trainer.train_steps={steps}"],
      capture_output=True, text=True, env=env, cwd=paths.ROOT, timeout=900)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  return result.stdout + result.stderr


@pytest.mark.parametrize("backend,kind", [("tensorflow", "optimizer slot"), ("jax", "weights")])
def test_a_flipped_bit_in_the_newest_checkpoint_resumes_from_the_checkpoint_before(
    tmp_path, backend, kind):
  config = trainer_helpers.write_dropout_experiment(tmp_path, steps=6, max_to_keep=5)
  _train(config, tmp_path / "straight", backend, 6)
  _train(config, tmp_path / "base", backend, 4)
  expected = portable.arrays(str(tmp_path / "straight" / "ckpt-6.h5"))
  assert expected["input/batches_read"] == 6
  name = ITEMS[kind]
  model_dir = tmp_path / "base"
  damaged = str(model_dir / "ckpt-4.h5")
  checkpoint_helpers.flip_bit(damaged, name, bit=2)
  output = _train(config, model_dir, backend, 6)
  lines = [line for line in output.splitlines() if "fails its checksum" in line]
  assert len(lines) == 1 and f"Checkpoint {damaged} fails its checksum at {name} " in (
      lines[0]), output[-3000:]
  assert f"Resumed from {model_dir / 'ckpt-2.h5'} at step 2" in output
  assert "consumed batches" not in output  # at the position ckpt-2 holds
  got = portable.arrays(str(model_dir / "ckpt-6.h5"))
  assert got.keys() == expected.keys()
  for key in expected:
    np.testing.assert_array_equal(got[key], expected[key], err_msg=key)
