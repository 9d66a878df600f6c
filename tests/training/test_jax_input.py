"""The JAX engine's input positions of earlier versions (bert_tf.training.jax_engine.input):
a JSON file beside `ckpt-N.h5` resumes at its batch; one cut short, damaged or of
another input is one line and no position, never an error."""

import json

import numpy as np
import pytest

import trainer_helpers
from bert_tf.tasks import base as task_base
from bert_tf.training.jax_engine import input as input_lib


@pytest.fixture(name="source")
def fixture_source():
  experiment = trainer_helpers.tiny_experiment(batch=4)
  return task_base.get_task(experiment), experiment.train_data


def _write_position(source, checkpoint, batches_read, **changes):
  """The JSON an earlier version wrote after `batches_read` batches; returns the batch
  that follows."""
  batches = source[0].data_loader(source[1]).host_batches()
  for _ in range(batches_read):
    next(batches)
  state = dict(batches.get_state(), **changes)
  following = next(batches)
  batches.close()
  with open(input_lib.position_path(checkpoint, 0), "w", encoding="utf-8") as f:
    json.dump(state, f)
  return following


def test_a_json_position_of_an_earlier_version_resumes_at_its_batch(source, tmp_path):
  checkpoint = str(tmp_path / "ckpt-3.h5")
  following = _write_position(source, checkpoint, 3)
  host = input_lib.HostInput(*source, 0, 1)
  assert host.restore(checkpoint, 0)
  for key, value in host.next_batch().items():
    np.testing.assert_array_equal(value, following[key], err_msg=key)


@pytest.mark.parametrize("damage", ["cut", "other seed", "not json"])
def test_a_damaged_or_foreign_json_position_is_one_line_and_no_position(
    source, tmp_path, damage):
  checkpoint = str(tmp_path / "ckpt-3.h5")
  path = input_lib.position_path(checkpoint, 0)
  _write_position(source, checkpoint, 3, **({"seed": 99} if damage == "other seed" else {}))
  text = open(path, encoding="utf-8").read()
  if damage == "cut":
    text = text[:len(text) // 2]
  elif damage == "not json":
    text = "\x00\xff" + text
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)
  lines = []
  host = input_lib.HostInput(*source, 0, 1, log_fn=lines.append)
  assert not host.restore(checkpoint, 0)
  assert len(lines) == 1 and lines[0].startswith(
      f"Cannot restore the input position from {path} ("), lines
