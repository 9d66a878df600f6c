"""A model_dir's params.yaml (bert_tf.training.params_file; its CRC32C line:
bert_tf.configs.params_checksum): its CRC32C names a damaged
file damaged, never a change of configuration; an earlier run's file without it still
reads; a config file that is not YAML is one line."""

import logging
import os

import pytest
import yaml

import trainer_helpers
from bert_tf import configs
from bert_tf.configs import params_checksum
from bert_tf.training import backends
from bert_tf.training import params_file
from bert_tf.training import trained_model


def _saved(model_dir):
  experiment = trainer_helpers.tiny_experiment(steps=2)
  params_file.save(experiment, str(model_dir))
  return experiment, os.path.join(str(model_dir), params_file.PARAMS_FILE)


def test_a_params_yaml_records_its_crc32c_and_reads_back_the_same_configuration(tmp_path):
  experiment, path = _saved(tmp_path)
  with open(path, encoding="utf-8") as f:
    first, body = f.read().split("\n", 1)
  assert first.startswith("# bert_tf params.yaml; CRC32C")
  assert yaml.safe_load(body) == yaml.safe_load(experiment.to_yaml())
  assert params_file.recorded_params(str(tmp_path)).as_dict() == experiment.as_dict()
  assert params_file.check_params_match(experiment, str(tmp_path),
                                        params_file.recorded_params(str(tmp_path))) == []


def _damage(path, how):
  with open(path, "rb") as f:
    data = bytearray(f.read())
  if how == "emptied":
    data = bytearray()
  elif how == "cut short":
    data = data[:len(data) // 2]
  else:  # a flipped bit in the body, or in the first line
    data[len(data) // 2 if how == "flipped" else 5] ^= 4
  with open(path, "wb") as f:
    f.write(bytes(data))


@pytest.mark.parametrize("how", ["flipped", "flipped first line", "emptied", "cut short"])
def test_a_damaged_params_yaml_is_named_damaged_not_a_configuration_change(tmp_path,
                                                                            caplog, how):
  _, path = _saved(tmp_path)
  _damage(path, how)
  with pytest.raises(params_checksum.DamagedParamsError, match=f"^{path} is damaged: .*"
                     "--replace_params") as raised:
    params_file.recorded_params(str(tmp_path))
  assert "\n" not in str(raised.value)
  for reader in (lambda: params_file.evaluation_config_files(str(tmp_path), []),
                 lambda: trained_model.load_experiment(path)):  # --mode=eval, and an export
    with pytest.raises(params_checksum.DamagedParamsError, match=f"^{path} is damaged"):
      reader()
  with caplog.at_level(logging.WARNING):  # --replace_params: replaced, with one line
    assert params_file.recorded_params(str(tmp_path), replace=True) is None
  assert [r.getMessage() for r in caplog.records] == [str(raised.value) + ": replaced"]


def test_an_earlier_runs_params_yaml_without_a_crc32c_still_reads(tmp_path):
  experiment = trainer_helpers.tiny_experiment(steps=2)
  experiment.save(os.path.join(str(tmp_path), params_file.PARAMS_FILE))
  assert params_file.recorded_params(str(tmp_path)).as_dict() == experiment.as_dict()


@pytest.mark.parametrize("content", [b"\xff\xfe\x00 binary", b"runtime: [unclosed\n  x: 1",
                                     b"- a list\n", None])
def test_a_config_file_that_is_no_yaml_mapping_is_one_config_error_naming_it(tmp_path,
                                                                              content):
  path = tmp_path / "bad.yaml"
  if content is None:
    path.mkdir()  # a folder
  else:
    path.write_bytes(content)
  with pytest.raises(configs.ConfigError, match=str(path)) as raised:
    backends.requested_backend(None, [str(path)])
  assert "\n" not in str(raised.value)
