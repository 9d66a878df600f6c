"""A training run that would be silently wrong says so before it writes anything
(bert_tf.training.run_checks, Trainer.run): a vocab of another size than the
model's table is an error naming both sizes; settings longer than the run (the report
intervals together) and a resumed run's changed schedule are one warning line each."""

import sys

import pytest

import checkpoint_helpers
import finetuning_helpers
import trainer_helpers
from bert_tf import configs
from bert_tf.checkpoints import portable
from bert_tf.training import run_checks
from bert_tf.training import schedules
from bert_tf.training import trainer as trainer_lib
from bert_tf.utils import file_systems


def _tsv_experiment(tmp_path, vocab_size=100, **tokenizer):
  vocab = finetuning_helpers.write_vocab(tmp_path / "vocab.txt")  # 100 tokens
  train = tmp_path / "train.tsv"
  train.write_text("sentence\tlabel\nthe cat sat\t1\nthe dog ran\t0\n", encoding="utf-8")
  data = {"format": "tsv", "input_path": str(train)}
  return finetuning_helpers.tiny_experiment(
      {"name": "sentence_prediction", "num_classes": 2}, data, data,
      vocab_size=vocab_size, vocab_file=vocab).override({"tokenizer": tokenizer})


@pytest.mark.parametrize("vocab_size", [120, 90])
def test_a_vocab_of_another_size_than_the_model_is_an_error_naming_both_and_writes_nothing(
    tmp_path, vocab_size):
  experiment = _tsv_experiment(tmp_path, vocab_size=vocab_size)
  model_dir = tmp_path / "run"
  with pytest.raises(run_checks.VocabSizeError) as error:
    trainer_lib.run_experiment(experiment, str(model_dir))
  assert "has 100 tokens" in str(error.value)
  assert f"model.encoder.vocab_size is {vocab_size}" in str(error.value)
  assert not model_dir.exists()


def test_a_vocab_of_another_size_than_the_init_checkpoint_names_both_sizes(tmp_path):
  pretrained = tmp_path / "pretrained"  # an encoder of 99 word-embedding rows
  portable.save(portable.path_for_step(str(pretrained), 1),
                checkpoint_helpers.tiny_model().checkpoint_items, step=1)
  experiment = _tsv_experiment(tmp_path, vocab_size=100).override(
      {"task": {"init_checkpoint": str(pretrained)}})
  with pytest.raises(run_checks.VocabSizeError) as error:
    run_checks.check_vocab_size(experiment)
  assert "has 100 tokens" in str(error.value)
  assert f"task.init_checkpoint {pretrained} has 99 word-embedding rows" in str(error.value)


def test_allow_smaller_vocab_accepts_a_larger_table_but_never_a_larger_vocab(tmp_path):
  run_checks.check_vocab_size(_tsv_experiment(tmp_path, 120, allow_smaller_vocab=True))
  with pytest.raises(run_checks.VocabSizeError, match="has 100 tokens"):
    run_checks.check_vocab_size(_tsv_experiment(tmp_path, 90, allow_smaller_vocab=True))


def test_raw_files_without_tensorflow_text_are_refused_before_anything_is_written(
    tmp_path, monkeypatch):
  experiment = _tsv_experiment(tmp_path)
  monkeypatch.setitem(sys.modules, "tensorflow_text", None)
  model_dir = tmp_path / "run"
  with pytest.raises(configs.ConfigError, match="needs tensorflow-text"):
    trainer_lib.run_experiment(experiment, str(model_dir))
  assert not model_dir.exists()


def _pretraining(**sections):
  return trainer_helpers.tiny_experiment(**sections)


def test_warmup_decay_and_checkpoint_interval_longer_than_the_run_warn_one_line_each():
  experiment = _pretraining(steps=40, optimizer={"warmup_steps": 10000, "decay_steps": 50000},
                            trainer={"checkpoint_interval": 10000})
  lines = run_checks.schedule_warnings(experiment)
  assert len(lines) == 3 and all("\n" not in line for line in lines)
  warmup, decay, interval = lines
  assert "optimizer.warmup_steps 10000" in warmup and "trainer.train_steps 40" in warmup
  assert "optimizer.decay_steps 50000" in decay
  assert "trainer.checkpoint_interval 10000" in interval and "step 0" in interval


def test_report_intervals_longer_than_the_run_warn_in_one_line_naming_settings_that_fit():
  """A short pretraining run with the experiments' intervals of 1000 steps would print
  nothing but its checkpoints until its last step: the intervals are kept (as given),
  and one line says so and what fits."""
  both = run_checks.schedule_warnings(
      _pretraining(steps=200, trainer={"log_interval": 1000, "summary_interval": 1000}))
  assert both == [
      "Warning: trainer.log_interval 1000 and trainer.summary_interval 1000 are longer than "
      "trainer.train_steps 200: the run writes its progress lines and TensorBoard points "
      "at its last step alone. Set trainer.log_interval=20,trainer.summary_interval=20 to "
      "report about ten times over the run."]
  (summary,) = run_checks.schedule_warnings(
      _pretraining(steps=5, trainer={"summary_interval": 1000}))
  assert summary.startswith("Warning: trainer.summary_interval 1000 is longer than "
                            "trainer.train_steps 5: the run writes its TensorBoard points")
  assert "Set trainer.summary_interval=1 " in summary


def test_settings_within_the_run_give_no_warning():
  assert run_checks.schedule_warnings(_pretraining(steps=40)) == []


def test_a_resumed_run_whose_decay_follows_a_larger_train_steps_names_both_rates():
  recorded = _pretraining(steps=20, optimizer={"warmup_steps": 2, "learning_rate": 1e-4})
  resumed = recorded.override({"trainer": {"train_steps": 40}})
  line = run_checks.resumed_schedule_warning(recorded, resumed, 10, "run/params.yaml")
  old = schedules.rate_at(schedules.WarmupPolynomialDecay(1e-4, 2, 20), 10)
  new = schedules.rate_at(schedules.WarmupPolynomialDecay(1e-4, 2, 40), 10)
  assert f"{old:.3g}" != f"{new:.3g}"
  assert f"now {new:.3g}, {old:.3g} on the recorded schedule" in line
  assert "trainer.train_steps 20 -> 40" in line and "run/params.yaml" in line
  assert run_checks.resumed_schedule_warning(recorded, recorded, 10, "p") == ""


@pytest.mark.parametrize("field,override", [
    ("train_data.input_path", {"train_data": {"format": "tfrecord",
                                              "input_path": "local-*.tfrecord,nosuch://b/d-*"}}),
    ("task.init_checkpoint", {"task": {"init_checkpoint": "nosuch://b/run"}}),
    ("tokenizer.vocab_file", {"tokenizer": {"vocab_file": "nosuch://b/vocab.txt"}}),
])
def test_a_remote_path_no_library_serves_is_an_error_naming_its_setting(
    monkeypatch, field, override):
  monkeypatch.setattr(file_systems, "_tensorflow_gfile", lambda: None)  # fsspec decides
  experiment = trainer_helpers.tiny_experiment().override(override)
  with pytest.raises(file_systems.StorageError) as raised:
    run_checks.check_remote_paths(experiment, ["train_data"])
  assert str(raised.value).startswith(f"{field}: nosuch://b/")
  assert "no installed file system serves nosuch:// paths" in str(raised.value)


def test_local_and_unused_paths_are_not_checked(monkeypatch):
  monkeypatch.setattr(file_systems, "_tensorflow_gfile", lambda: None)
  experiment = trainer_helpers.tiny_experiment().override(
      {"eval_data": {"format": "tfrecord", "input_path": "nosuch://b/eval-*"},
       "tokenizer": {"vocab_file": "missing/vocab.txt"}})
  run_checks.check_remote_paths(experiment, ["train_data"])  # eval_data is not read
