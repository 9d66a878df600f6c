"""An earlier run's params.yaml: keys that moved are read in their new place, or refused
with what to write instead."""

import pytest

from bert_tf import configs
from bert_tf.checkpoints import params_upgrade
from bert_tf.training import experiments


def test_data_section_tokenizer_keys_of_earlier_files_move_with_a_warning_saying_what_to_write(
    tmp_path):
  # What every params.yaml written before the tokenizer section holds.
  old = tmp_path / "params.yaml"
  old.write_text("train_data:\n  vocab_file: v.txt\n  lower_case: false\n"
                 "eval_data:\n  vocab_file: v.txt\n  lower_case: false\n")
  with pytest.warns(params_upgrade.ObsoleteConfigKeyWarning) as record:
    c = experiments.experiment_from_yaml(str(old))
  message = str(record[0].message)
  assert ("train_data.vocab_file, eval_data.vocab_file: moved to tokenizer.vocab_file; set it "
          "once there") in message
  assert "train_data.lower_case, eval_data.lower_case: moved to tokenizer.lower_case" in message
  assert (c.tokenizer.vocab_file, c.tokenizer.lower_case) == ("v.txt", False)
  with pytest.warns(params_upgrade.ObsoleteConfigKeyWarning,
                    match="moved to tokenizer.vocab_file"):
    assert experiments.experiment_from_yaml(
        str(old), overrides="train_data.vocab_file=w.txt,eval_data.vocab_file=w.txt"
    ).tokenizer.vocab_file == "w.txt"


def test_data_section_tokenizer_keys_that_differ_are_an_error_saying_what_to_write():
  with pytest.raises(configs.ConfigError, match=r"train_data\.vocab_file, eval_data\.vocab_file: "
                     r"moved to tokenizer\.vocab_file.*differ \(train_data\.vocab_file='a\.txt', "
                     r"eval_data\.vocab_file='b\.txt'\)\. Remove them from the data sections "
                     r"and set tokenizer\.vocab_file once"):
    experiments.experiment_from_dict({"train_data": {"vocab_file": "a.txt"},
                                      "eval_data": {"vocab_file": "b.txt"}})
  with pytest.raises(configs.ConfigError, match=r"tokenizer\.lower_case=True"):
    experiments.experiment_from_dict({"tokenizer": {"lower_case": True},
                                      "train_data": {"lower_case": False}})


def test_the_experiment_schema_itself_knows_only_the_keys_of_now():
  with pytest.raises(configs.ConfigError, match="Unknown config key 'train_data.vocab_file'"):
    configs.ExperimentConfig.from_dict({"train_data": {"vocab_file": "v.txt"}})


def test_earlier_input_order_keys_load_and_only_values_that_ordered_reads_are_named(
    recwarn):
  # Every params.yaml of earlier versions holds the defaults: they load silently.
  experiments.experiment_from_dict({"train_data": {"cycle_length": 8, "deterministic": False},
                                    "eval_data": {"cycle_length": 8}})
  assert not [w for w in recwarn if w.category is params_upgrade.ObsoleteConfigKeyWarning]
  with pytest.warns(params_upgrade.ObsoleteConfigKeyWarning,
                    match=r"^train_data\.cycle_length, train_data\.deterministic: no longer "
                          r"read; both engines read the records in one deterministic order"):
    experiments.experiment_from_dict({"train_data": {"cycle_length": 2,
                                                     "deterministic": True}})
  with pytest.raises(configs.ConfigError, match="Unknown config key 'train_data.cycle_length'"):
    configs.ExperimentConfig.from_dict({"train_data": {"cycle_length": 2}})
