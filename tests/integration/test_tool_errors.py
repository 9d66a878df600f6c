"""Every tool reports a user's mistake as one line `TOOL: error: ...` naming the file,
line or field, with exit status 1 (2 for a flag mistake) and no traceback; --verbose adds
the traceback. The tools run in this process (their flags defined for the call and
removed after it), so that a case costs no TensorFlow start-up."""

import contextlib
import importlib.util
import os
import sys

import numpy as np
import pytest
import yaml
from absl import flags

import pretraining_fixtures as fx
import trainer_helpers
from bert_tf import constants
from bert_tf.data.records import tfrecords
from bert_tf.utils import errors
from bert_tf.utils import optional

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


_ABSL_HELP_FLAGS = {"help", "helpshort", "helpfull", "helpxml", "?"}


@contextlib.contextmanager
def _tool_module(name):
  """tools/<name>.py loaded under a private name; its flags are removed on exit."""
  before = set(flags.FLAGS)
  path = os.path.join(ROOT, "tools", f"{name}.py")
  spec = importlib.util.spec_from_file_location(f"_tool_under_test_{name}", path)
  module = importlib.util.module_from_spec(spec)
  sys.modules[spec.name] = module  # as an installed tool is, bert_tf.tools.<name>
  try:
    spec.loader.exec_module(module)
    yield module
  finally:
    sys.modules.pop(spec.name, None)
    flags.FLAGS.unparse_flags()
    # absl's --help flags are defined once per process, by the first app.run.
    for flag_name in set(flags.FLAGS) - before - _ABSL_HELP_FLAGS:
      delattr(flags.FLAGS, flag_name)


def run_tool(name, args, capsys, monkeypatch, argv0=None, stdout=False):
  """(exit status, stderr) of tools/<name>.py run with `args` (argv[0]: `argv0`, default
  `<name>.py`); with `stdout`, (exit status, stderr, stdout)."""
  capsys.readouterr()
  with _tool_module(name) as module:
    flags.FLAGS.unparse_flags()
    monkeypatch.setattr(sys, "argv", [argv0 or f"{name}.py", *args])
    with pytest.raises(SystemExit) as info:
      module.run()
  captured = capsys.readouterr()
  if stdout:
    return info.value.code, captured.err, captured.out
  return info.value.code, captured.err


def assert_one_line(status, stderr, tool, *fragments, code=1):
  lines = [line for line in stderr.splitlines() if line.strip()]
  assert status == code, stderr
  assert "Traceback" not in stderr, stderr
  error_lines = [line for line in lines if line.startswith(f"{tool}: error: ")]
  assert len(error_lines) == 1, stderr
  for fragment in fragments:
    assert fragment in error_lines[0], (fragment, stderr)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  """A vocab, a small corpus, a pretraining TFRecord, one with other features, and a
  tiny experiment YAML reading the first."""
  d = tmp_path_factory.mktemp("tool_errors")
  vocab = fx.write_vocab(d)
  text = fx.write_text(d, fx.random_text(20, seed=3))
  records = str(d / "pretrain.tfrecord")
  fx.write_record_file(records, num_documents=10)
  wrong = str(d / "wrong.tfrecord")
  tfrecords.write_records(wrong, [tfrecords.serialize_example(
      {"label": np.array([1], np.int64)})] * 4)
  experiment = trainer_helpers.tiny_experiment_dict(
      seq=32, predictions=5, steps=1,
      train_data=dict(format="tfrecord", input_path=records),
      eval_data=dict(format="tfrecord", input_path=records))
  config = str(d / "tiny.yaml")
  with open(config, "w") as f:
    yaml.safe_dump(experiment, f)
  no_special = fx.write_vocab(d, [t for t in fx.VOCAB if t != constants.SEP_TOKEN],
                              name="no_sep_vocab.txt")
  return dict(dir=d, vocab=vocab, text=text, records=records, wrong=wrong, config=config,
              no_special=no_special)


# ----- train: configuration errors fail before any TensorFlow work -----

@pytest.mark.parametrize("args, fragments", [
    (["--experiment=pretraining_bert_tiny", "--params_override=trainer.train_stpes=1"],
     ["trainer.train_stpes", "did you mean 'trainer.train_steps'"]),
    (["--experiment=pretraining_bert_tiny", "--params_override=trainerr.train_steps=1"],
     ["trainerr", "did you mean 'trainer'"]),
    (["--experiment=pretraining_bert_tiny", "--params_override=trainer.train_steps=many"],
     ["trainer.train_steps must be an integer", "many"]),
    (["--experiment=pretraining_bert_tinyy"],
     ["pretraining_bert_tinyy", "did you mean 'pretraining_bert_tiny'"]),
    (["--experiment=pretraining_bert_tiny", "--config_file=/nonexistent/extra.yaml"],
     ["/nonexistent/extra.yaml"]),
    (["--experiment=pretraining_bert_tiny", "--params_override=task.name=pretrainin"],
     ["pretrainin", "did you mean 'pretraining'"]),
])
def test_train_config_mistake_is_one_line_naming_the_field(args, fragments, tmp_path, capsys,
                                                             monkeypatch):
  status, err = run_tool("train", [f"--model_dir={tmp_path}", *args], capsys, monkeypatch)
  assert_one_line(status, err, "train", *fragments)


def test_train_config_mistake_in_a_yaml_file_names_the_key(tmp_path, capsys, monkeypatch):
  config = tmp_path / "bad.yaml"
  config.write_text("trainer:\n  steps_per_lop: 3\n")
  status, err = run_tool("train", [f"--model_dir={tmp_path}", "--experiment=pretraining_bert_tiny",
                                   f"--config_file={config}"], capsys, monkeypatch)
  assert_one_line(status, err, "train", "trainer.steps_per_lop", "trainer.steps_per_loop")


def test_flag_mistake_is_one_line_with_status_2(tmp_path, capsys, monkeypatch):
  status, err = run_tool("train", [f"--model_dir={tmp_path}", "--mode=trian"], capsys,
                         monkeypatch)
  assert_one_line(status, err, "train", "--mode", code=errors.USAGE_EXIT)
  status, err = run_tool("train", ["--experiment=pretraining_bert_tiny"], capsys, monkeypatch)
  assert_one_line(status, err, "train", "--model_dir", code=errors.USAGE_EXIT)


def test_verbose_adds_the_traceback(tmp_path, capsys, monkeypatch):
  status, err = run_tool("train", [f"--model_dir={tmp_path}", "--verbose",
                                   "--experiment=pretraining_bert_tiny",
                                   "--params_override=trainer.train_stpes=1"],
                         capsys, monkeypatch)
  assert status == 1 and "Traceback" in err
  assert err.strip().splitlines()[-1].startswith("train: error: ")


def test_a_bug_keeps_its_traceback(monkeypatch, capsys):
  def main(argv):
    del argv
    raise ZeroDivisionError("a bug")
  monkeypatch.setattr(sys, "argv", ["bug.py"])
  try:
    with pytest.raises(ZeroDivisionError):
      errors.run_tool("bug", main)
  finally:
    flags.FLAGS.unparse_flags()


# ----- train: input errors -----

@pytest.mark.parametrize("which, fragments", [
    ("missing", ["train_data: input_path", "nothing-*.tfrecord"]),
    ("wrong", ["train_data: ", "wrong.tfrecord", "input_ids"]),
])
def test_train_input_mistake_is_one_line_naming_the_file(which, fragments, data, tmp_path,
                                                         capsys, monkeypatch):
  path = str(tmp_path / "nothing-*.tfrecord") if which == "missing" else data["wrong"]
  status, err = run_tool("train", [f"--model_dir={tmp_path / 'run'}",
                                   f"--config_file={data['config']}",
                                   f"--params_override=train_data.input_path={path}"],
                         capsys, monkeypatch)
  assert_one_line(status, err, "train", *fragments)


# ----- create_pretraining_data -----

def _cpd_args(data, **overrides):
  values = dict(input_file=data["text"], vocab_file=data["vocab"], seq_length=32,
                max_predictions_per_seq=5, dupe_factor=1, progress="false")
  values.update(overrides)
  return [f"--{k}={v}" if v != "false" else f"--no{k}" for k, v in values.items()]


@pytest.mark.parametrize("case, fragments", [
    ("missing_vocab", ["missing_vocab.txt"]),
    ("no_special_tokens", ["no_sep_vocab.txt", "[SEP]"]),
    ("impossible_setting", ["seq_length", "2"]),
    ("unmatched_input", ["nothing-*.txt"]),
    ("output_under_a_file", ["corpus.txt is a file"]),
    ("output_without_permission", ["Cannot create the output directory", "locked"]),
    ("existing_output", ["--overwrite"]),
    ("not_text", ["binary.txt: not a text file", "NUL byte"]),
])
def test_create_pretraining_data_mistake_is_one_line(case, fragments, data, tmp_path, capsys,
                                                     monkeypatch):
  out = str(tmp_path / "out" / "pretrain")
  overrides = {
      "missing_vocab": dict(vocab_file=str(tmp_path / "missing_vocab.txt"), output=out),
      "no_special_tokens": dict(vocab_file=data["no_special"], output=out),
      "impossible_setting": dict(seq_length=2, output=out),
      "unmatched_input": dict(input_file=str(tmp_path / "nothing-*.txt"), output=out),
      "output_under_a_file": dict(output=os.path.join(data["text"], "pretrain")),
      "output_without_permission": dict(output=str(tmp_path / "locked" / "sub" / "pretrain")),
      "existing_output": dict(output=out),
      "not_text": dict(input_file=str(tmp_path / "binary.txt"), output=out),
  }[case]
  (tmp_path / "binary.txt").write_bytes(b"PK\x03\x04\x00\x00 zipped\n")
  if case == "output_without_permission":
    if os.geteuid() == 0:
      # Root writes anywhere but in sysfs, where creating a directory is not permitted.
      overrides["output"] = "/sys/locked/pretrain"
    else:
      os.makedirs(tmp_path / "locked")
      os.chmod(tmp_path / "locked", 0o500)
  if case == "existing_output":
    os.makedirs(tmp_path / "out")
    (tmp_path / "out" / "pretrain.json").write_text("{}")
  status, err = run_tool("create_pretraining_data", _cpd_args(data, **overrides), capsys,
                         monkeypatch)
  assert_one_line(status, err, "create_pretraining_data", *fragments)


# ----- the other tools -----

def test_export_of_a_missing_checkpoint_names_the_checkpoint(tmp_path, capsys, monkeypatch):
  missing = str(tmp_path / "DOES_NOT_EXIST")
  status, err = run_tool("export_saved_model", [f"--checkpoint={missing}",
                                                f"--export_dir={tmp_path / 'export'}"],
                         capsys, monkeypatch)
  assert_one_line(status, err, "export_saved_model", missing)
  assert "params.yaml" not in err


# Each tool's mistake: its arguments ({tmp}: the test's folder; {vocab}, {text}: the data
# fixture's files), what its one error line names, and the exit status.
_MISTAKES = {
    "build_vocab_no_input": ("build_vocab", ["--input={tmp}/nothing-*.txt",
                                             "--output={tmp}/v.txt"], ["nothing-*.txt"], 1),
    "build_vocab_output_is_input": ("build_vocab", ["--input={text}", "--output={vocab}"],
                                    ["{vocab}"], 1),
    "build_vocab_existing_output": ("build_vocab", ["--input={text}", "--output={text}.v"],
                                    ["{text}.v", "pass --overwrite"], 1),
    "create_finetuning_data": ("create_finetuning_data", [
        "--experiment=glue_sst2", "--params_override=task.num_clases=2",
        "--output={tmp}/o.tfrecord"], ["task.num_clases"], 1),
    "convert_checkpoint": ("convert_checkpoint", ["--input={tmp}/no_such_ckpt",
                                                  "--output_dir={tmp}/out"],
                           ["no_such_ckpt"], 1),
    "extract_features": ("extract_features", [
        "--input_file={tmp}/no_input.txt", "--output_file={tmp}/f.jsonl",
        "--vocab_file={vocab}", "--encoder_size=tiny", "--layers=-1,x"], ["--layers", "x"], 1),
    "make_serving_request": ("make_serving_request", [
        "--text=hello", "--signature=serve_token_ids", "--vocab_file={tmp}/no_vocab.txt"],
                             ["no_vocab.txt"], 1),
    "query_saved_model_absent": ("query_saved_model", ["{tmp}/absent", "a text"],
                                 ["No export directory", "absent"], 1),
    "query_saved_model_not_an_export": ("query_saved_model", ["{tmp}", "a text"],
                                        ["is not a SavedModel"], 1),
    "query_saved_model_no_arguments": ("query_saved_model", [],
                                       ["Give the export directory"], 2),
}


@pytest.mark.parametrize("case", list(_MISTAKES))
def test_tool_mistake_is_one_line_naming_what_is_wrong(case, data, tmp_path, capsys,
                                                       monkeypatch):
  tool, args, fragments, code = _MISTAKES[case]
  if case == "build_vocab_existing_output":
    with open(f"{data['text']}.v", "w") as f:
      f.write("[PAD]\n")
  fill = lambda text: text.format(tmp=tmp_path, vocab=data["vocab"], text=data["text"])
  status, err = run_tool(tool, [fill(a) for a in args], capsys, monkeypatch)
  assert_one_line(status, err, tool, *map(fill, fragments), code=code)


def test_train_validate_inputs_names_the_corrupt_file_and_offset(data, tmp_path, capsys,
                                                                 monkeypatch):
  corrupt = tmp_path / "corrupt.tfrecord"
  content = bytearray(open(data["records"], "rb").read())
  content[len(content) // 2] ^= 0xFF
  corrupt.write_bytes(bytes(content))
  status, err = run_tool("train", [f"--model_dir={tmp_path / 'run'}",
                                   f"--config_file={data['config']}", "--validate_inputs",
                                   f"--params_override=train_data.input_path={corrupt}"],
                         capsys, monkeypatch)
  assert_one_line(status, err, "train", f"train_data: Corrupt TFRecord file(s): {corrupt} at "
                  "byte offset")


def test_train_type_mistake_in_a_yaml_file_names_the_file_and_field(tmp_path, capsys,
                                                                    monkeypatch):
  config = tmp_path / "typed.yaml"
  config.write_text("trainer:\n  train_steps: many\n")
  status, err = run_tool("train", [f"--model_dir={tmp_path / 'run'}",
                                   "--experiment=pretraining_bert_tiny",
                                   f"--config_file={config}"], capsys, monkeypatch)
  assert_one_line(status, err, "train", f"train: error: {config}: trainer.train_steps must "
                  "be an integer, got 'many'")
  assert not (tmp_path / "run").exists()


def test_another_experiment_s_model_dir_is_a_short_line_with_the_task_first(
    tmp_path, capsys, monkeypatch):
  model_dir = tmp_path / "run"
  model_dir.mkdir()
  from bert_tf.training import experiments  # pylint: disable=import-outside-toplevel
  experiments.resolve_experiment("pretraining_bert_tiny").save(str(model_dir / "params.yaml"))
  status, err = run_tool("train", [f"--model_dir={model_dir}", "--experiment=glue_mrpc"],
                         capsys, monkeypatch)
  assert_one_line(status, err, "train", f"train: error: {model_dir}/params.yaml fixes other "
                  "model or data shapes: task.name: 'pretraining' in params.yaml, now "
                  "'sentence_prediction' and ", " more. ", "--replace_params")
  assert len(err.strip()) < 400, err


# Arguments that would write an output of each tool (the refusal comes first).
_OUTPUTS = {
    "build_vocab": ["--input={text}", "--output={tmp}/out/vocab.txt"],
    "convert_checkpoint": ["--input={tmp}", "--output_dir={tmp}/out/converted"],
    "create_finetuning_data": ["--experiment=glue_sst2", "--output={tmp}/out/o.tfrecord"],
    "create_pretraining_data": ["--input_file={text}", "--vocab_file={vocab}",
                                "--output={tmp}/out/pretrain"],
    "export_saved_model": ["--checkpoint={tmp}", "--export_dir={tmp}/out/export"],
    "extract_features": ["--input_file={text}", "--output_file={tmp}/out/f.jsonl",
                         "--vocab_file={vocab}", "--encoder_size=tiny"],
    "make_serving_request": ["--text=hello", "--output={tmp}/out/request.json"],
    "query_saved_model": ["{tmp}/out", "a text"],
}


# The converter needs TensorFlow for google_tf1 alone
# (tests/checkpoints/test_checkpoint_convert_errors.py).
@pytest.mark.parametrize("tool", sorted(set(_OUTPUTS) - {"convert_checkpoint"}))
def test_tool_that_needs_tensorflow_says_so_in_one_line_before_writing(
    tool, data, tmp_path, capsys, monkeypatch):
  monkeypatch.setattr(optional, "tensorflow_installed", lambda: False)
  fill = lambda text: text.format(tmp=tmp_path, vocab=data["vocab"], text=data["text"])
  status, err = run_tool(tool, [fill(a) for a in _OUTPUTS[tool]], capsys, monkeypatch,
                         argv0="/venv/bin/bert-tf-command")
  assert_one_line(status, err, "bert-tf-command",
                  "bert-tf-command: error: needs TensorFlow",
                  "pip install . in its source checkout")
  assert os.listdir(tmp_path) == []


def test_huggingface_output_without_safetensors_is_one_line_before_writing(
    tmp_path, capsys, monkeypatch):
  monkeypatch.setitem(sys.modules, "safetensors", None)
  status, err = run_tool("convert_checkpoint", [f"--input={tmp_path}/ckpt",
                                                f"--output_dir={tmp_path}/out/hf",
                                                "--output_format=huggingface"],
                         capsys, monkeypatch)
  assert_one_line(status, err, "convert_checkpoint",
                  "--output_format=huggingface needs safetensors: pip install")
  assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("tool", sorted(_OUTPUTS) + ["train", "quickstart"])
def test_help_of_the_installed_command_shows_the_tool_s_doc_and_flags(tool, capsys,
                                                                      monkeypatch):
  """As a console script runs it: argv[0] the command, __main__ pip's launcher."""
  launcher = type(sys)("__main__")
  monkeypatch.setitem(sys.modules, "__main__", launcher)
  before = set(flags.FLAGS)
  with _tool_module(tool) as module:
    own = sorted(set(flags.FLAGS) - before)
    first_doc_line = module.__doc__.strip().splitlines()[0]
  status, _, out = run_tool(tool, ["--help"], capsys, monkeypatch,
                            argv0=f"/venv/bin/bert-tf-{tool}", stdout=True)
  assert status == 0 and first_doc_line in out, out  # help asked for is no failure
  for name in own + ["verbose", "verbosity"]:
    assert f"--{name}:" in out or f"--[no]{name}:" in out, (name, out)
