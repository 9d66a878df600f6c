"""The shipped commands, read from the documentation (README.md, docs/*.md,
CONTRIBUTING.md), the experiment YAMLs' headers and the tools' --help, run one after another as a user runs them, in an empty folder holding
toy inputs at the paths they name: vocab, pretraining data, pretraining into
runs/base, the trainer's model_dir converted (its vocab from params.yaml), a release
converted into runs/bert_base and back, fine-tuning from each with --init_checkpoint
as written, features and an export. Each runs with its own arguments; the training
runs get toy sizes appended (--config_file and runtime flags, which absl reads last).
The folders hold what tests/shipped_commands.py says the tools write."""

import dataclasses
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

import paths
import pretraining_fixtures
import shipped_commands

pytestmark = pytest.mark.integration

# Appended to training commands: toy sizes on one CPU device.
TOY_RUNTIME = ["--distribution_strategy=one_device", "--num_gpus=0",
               "--mixed_precision_dtype=float32"]


def _find(commands, tool, **flags):
  """The first command running `tool` whose flags have the given values."""
  for command in commands:
    if command.tool == tool and all(command.value(k) == v for k, v in flags.items()):
      return command
  raise AssertionError(f"no shipped {tool} command with {flags}")


def _run(command, cwd, *extra):
  env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "XLA_FLAGS")}
  env.update(TF_CPP_MIN_LOG_LEVEL="2",
             PYTHONPATH=os.pathsep.join([paths.ROOT, env.get("PYTHONPATH", "")]))
  tool = os.path.join(shipped_commands.TOOLS_DIR, f"{command.tool}.py")
  result = subprocess.run([sys.executable, tool, *command.args, *extra], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)
  assert result.returncode == 0, (f"{command.source}: {command.text}\n"
                                  + result.stdout[-3000:] + result.stderr[-3000:])
  return result.stdout


def _mrpc(path, rows=24):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  lines = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
  for i in range(rows):
    lines.append(f"{i % 2}\t{i}\t{i + 100}\tthe cat sat on the mat\tthe dog ran far")
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")


def _written(folder, tool_flag):
  names = set(os.listdir(folder))
  for name in shipped_commands.WRITTEN[tool_flag]:
    if name == "ckpt-N.h5":
      assert any(re.match(r"^ckpt-\d+\.h5$", n) for n in names), names
    elif name in ("params.yaml",) or tool_flag[0] == "convert_checkpoint":
      assert name in names, (folder, names)


def test_the_shipped_commands_run_in_turn_at_toy_size(tmp_path):
  readme = shipped_commands.doc_commands()
  headers = shipped_commands.experiment_header_commands()
  docstrings = shipped_commands.tool_docstring_commands()
  cwd = str(tmp_path)
  os.makedirs(tmp_path / "corpus")
  (tmp_path / "corpus" / "a.txt").write_text(pretraining_fixtures.random_text(120, seed=3),
                                             encoding="utf-8")

  out = _run(_find(readme, "build_vocab"), cwd)
  assert "Fewer tokens than the 30522 asked" in out
  vocab_size = sum(1 for _ in open(tmp_path / "vocab.txt", encoding="utf-8"))
  _run(_find(readme, "create_pretraining_data", runner=None), cwd)
  toy = {"model": {"encoder": {"size": "mini", "vocab_size": vocab_size}},
         "train_data": {"global_batch_size": 4}, "eval_data": {"global_batch_size": 4},
         "optimizer": {"warmup_steps": 0},
         "trainer": {"train_steps": 2, "steps_per_loop": 1, "checkpoint_interval": 2,
                     "summary_interval": 1, "log_interval": 1, "validation_steps": 1,
                     "validation_interval": 2}}
  (tmp_path / "toy.yaml").write_text(yaml.safe_dump(toy))
  toy_flags = ["--config_file=toy.yaml", *TOY_RUNTIME]

  # Pretraining into runs/base, then that model_dir converted (the vocab named by its
  # params.yaml) as tools/convert_checkpoint.py --help writes it.
  _run(_find(readme, "train", model_dir="runs/base"), cwd, *toy_flags)
  _written(tmp_path / "runs" / "base", ("train", "model_dir"))
  _run(_find(docstrings, "convert_checkpoint", input="runs/base"), cwd)
  assert (tmp_path / "runs" / "base_hf" / "vocab.txt").read_bytes() == (
      tmp_path / "vocab.txt").read_bytes()

  # A released checkpoint (a BERT-mini) converted, and back to Hugging Face.
  from bert_tf import configs  # pylint: disable=g-import-not-at-top
  from bert_tf.checkpoints import variables, writing  # pylint: disable=g-import-not-at-top
  release = tmp_path / "uncased_L-12_H-768_A-12"
  model = variables.build_model(
      dataclasses.replace(configs.EncoderConfig.from_size("mini"), vocab_size=vocab_size),
      ("encoder", "masked_lm", "next_sentence"))
  writing.save_checkpoint(model, str(tmp_path / "vocab.txt"), str(release), "google_tf1")
  _run(_find(readme, "convert_checkpoint", input=release.name), cwd)
  _written(tmp_path / "runs" / "bert_base", ("convert_checkpoint", "output_dir"))
  _run(_find(readme, "convert_checkpoint", input="runs/bert_base"), cwd)

  # Fine-tuning from each, --init_checkpoint as written: the header's runs/bert_base
  # (a converted folder) and the documentation's runs/base (a trainer's model_dir).
  _mrpc(str(tmp_path / "glue_data" / "MRPC" / "train.tsv"))
  _mrpc(str(tmp_path / "glue_data" / "MRPC" / "dev.tsv"), rows=8)
  shutil.copytree(tmp_path / "glue_data" / "MRPC", tmp_path / "glue" / "MRPC")
  header = _find(headers, "train", experiment="glue_mrpc")
  assert header.value("init_checkpoint") == "runs/bert_base"
  out = _run(header, cwd, *toy_flags, "--params_override=" + header.value("params_override")
             + ",train_data.seq_length=32,eval_data.seq_length=32")
  assert "Initialized encoder from runs/bert_base" in out
  out = _run(_find(readme, "train", model_dir="runs/mrpc"), cwd, *toy_flags)
  assert "Initialized encoder from runs/base" in out
  _written(tmp_path / "runs" / "mrpc", ("train", "model_dir"))

  _run(_find(readme, "create_finetuning_data"), cwd)
  assert (tmp_path / "data" / "mrpc_train.tfrecord").exists()
  (tmp_path / "input.txt").write_text("the cat sat\nthe dog ||| ran far\n", encoding="utf-8")
  # From runs/base (a BERT-mini: 4 layers, as --layers=-1,-2,-3,-4 needs), its encoder,
  # vocab and case from its params.yaml.
  _run(_find(readme, "extract_features"), cwd)
  assert len((tmp_path / "features.jsonl").read_text().splitlines()) == 2
  _run(_find(readme, "export_saved_model"), cwd)
  assert os.listdir(tmp_path / "exports" / "mrpc")
  request = tmp_path / "request.json"
  for command in (_find(readme, "make_serving_request"),
                  _find(docstrings, "make_serving_request")):
    if request.exists():
      request.unlink()  # Both write request.json; the tool keeps an existing output.
    _run(command, cwd)
    assert request.exists()
