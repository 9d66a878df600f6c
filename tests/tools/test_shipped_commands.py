"""Every command the project ships runs as written, as far as reading it can tell: the
commands of the documentation (README.md, docs/*.md, CONTRIBUTING.md), of the
experiment YAMLs' headers and of the tools' --help
(tests/shipped_commands.py reads them from those files) name a tool and only flags it
defines, resolve their experiment and overrides, and name as checkpoints and configs
the folders and files that another shipped command writes. The self-contained ones
run at toy size in tests/integration/test_shipped_commands_run.py."""

import ast
import dataclasses
import os
import re

import paths
import shipped_commands
from bert_tf import configs
from bert_tf.tasks import base as task_base
from bert_tf.training import experiments
from tools import setup_and_run

COMMANDS = shipped_commands.all_commands()
PRODUCED = shipped_commands.produced_dirs(COMMANDS)
_STEP_FILE = re.compile(r"^ckpt-\d+(\.h5)?$")


def test_the_commands_are_found_in_each_kind_of_file():
  sources = {c.source.split(":")[0] for c in COMMANDS}
  # Every documentation page with a bash block holding a tool's command.
  assert {"README.md", "CONTRIBUTING.md", "docs/pretraining-data.md", "docs/pretraining.md",
          "docs/fine-tuning.md", "docs/engines.md", "docs/export-and-serving.md",
          "docs/checkpoints-and-conversion.md"} <= sources
  assert sum(s.startswith("official_configs/experiments/") for s in sources) == len(
      experiments.registered_experiments())
  assert {"tools/train.py", "tools/convert_checkpoint.py", "tools/build_vocab.py"} <= sources


def test_a_page_s_bash_blocks_are_read_and_its_plain_blocks_are_not(tmp_path):
  page = tmp_path / "page.md"
  page.write_text("```bash\n# a comment\nD=glue/MRPC\npython tools/train.py --experiment=glue_mrpc \\\n"
                  "  --params_override=train_data.input_path=$D/train.tsv\n```\n\n```\n"
                  "python tools/train.py --model_dir=gs://BUCKET/runs\n```\n", encoding="utf-8")
  (command,) = shipped_commands.markdown_commands(str(page))
  assert command.source.endswith("page.md:4") and command.tool == "train"
  assert command.args == ["--experiment=glue_mrpc",
                          "--params_override=train_data.input_path=glue/MRPC/train.tsv"]


def test_the_readme_names_every_installed_command():
  with open(shipped_commands.README, encoding="utf-8") as f:
    readme = f.read()
  scripts = shipped_commands.console_scripts()
  assert len(scripts) >= 9
  assert not [name for name in scripts if f"`{name}`" not in readme]


def _problems(check, commands):
  """check(command) for each command: the messages of its failures, with the source."""
  problems = []
  for command in commands:
    try:
      check(command)
    except (AssertionError, configs.ConfigError) as e:
      problems.append(f"{command.source}: {e}")
  return problems


def _flags_defined(command):
  assert os.path.isfile(os.path.join(shipped_commands.TOOLS_DIR, f"{command.tool}.py"))
  if command.tool == "setup_and_run":
    assert command.args[0] in setup_and_run.EXTRAS, command.text
    return
  defined = shipped_commands.tool_flags(command.tool)
  for name, value in command.flags():
    negated = name[2:] if name.startswith("no") else None
    assert (name in defined or name in shipped_commands.COMMON_FLAGS
            or (negated and defined.get(negated) == "bool")), (
                f"{command.tool} has no flag --{name}")
    if value is None:
      assert defined.get(name) == "bool", f"--{name} needs a value"
  if command.tool == "query_saved_model":
    # The export, then the texts of at least one question.
    assert len(command.positional()) >= 2, f"needs an export and a question: {command.text}"
  else:
    assert not command.positional(), f"unexpected arguments {command.positional()}"


def test_every_shipped_command_passes_only_flags_its_tool_defines():
  assert not _problems(_flags_defined, COMMANDS)


def test_a_flag_the_tool_lacks_is_caught():
  command = shipped_commands.experiment_header_commands()[0]
  command.args = command.args + ["--init_chekpoint=runs/bert_base"]
  assert "train has no flag --init_chekpoint" in _problems(_flags_defined, [command])[0]


def test_inline_tool_spans_of_the_documentation_name_flags_their_tool_defines():
  spans = shipped_commands.doc_inline_flags()
  assert {source.split(":")[0] for source, _, _ in spans} >= {
      "docs/pretraining.md", "CONTRIBUTING.md"}
  for source, tool, names in spans:
    assert os.path.isfile(os.path.join(shipped_commands.TOOLS_DIR, f"{tool}.py")), source
    defined = shipped_commands.tool_flags(tool)
    for name in names:
      assert name in defined, f"{source}: {tool} has no flag --{name}"


def _resolves(command):
  config_files = []
  for path in command.values("config_file"):
    _assert_written(path)
    if os.path.isfile(path):
      config_files.append(path)
  shorthands = experiments.runtime_overrides(
      backend=command.value("backend"),
      distribution_strategy=command.value("distribution_strategy"),
      num_gpus=int(command.value("num_gpus")) if command.value("num_gpus") else None,
      mixed_precision_dtype=command.value("mixed_precision_dtype"),
      init_checkpoint=command.value("init_checkpoint"))
  config = experiments.resolve_experiment(command.value("experiment"), config_files,
                                          command.value("params_override"), shorthands)
  _assert_written(config.tokenizer.vocab_file)


def test_every_training_command_resolves_its_experiment_and_overrides():
  configured = [c for c in COMMANDS if c.tool in ("train", "create_finetuning_data")]
  assert len(configured) > len(experiments.registered_experiments())
  assert not _problems(_resolves, configured)


def _checkpoints_written(command):
  for tool, flag in shipped_commands.CHECKPOINT_FLAGS:
    value = command.value(flag) if command.tool == tool else None
    if value:
      _assert_written(value, checkpoint=True)


def test_checkpoints_the_commands_name_are_folders_or_files_a_shipped_command_writes():
  assert not _problems(_checkpoints_written, COMMANDS)


def test_a_checkpoint_named_without_its_step_is_caught():
  command = shipped_commands.experiment_header_commands()[0]
  command.args = [a.replace("=runs/bert_base", "=bert_base/ckpt") for a in command.args]
  assert "bert_base/ckpt is no checkpoint" in _problems(_checkpoints_written, [command])[0]


def _assert_written(path, checkpoint=False):
  """A path under runs/ must be a shipped command's output folder or a file its tool
  writes there; a checkpoint never a name without its step (`DIR/ckpt`)."""
  if not path:
    return
  path = os.path.normpath(path)
  name = os.path.basename(path)
  assert not (checkpoint and name == "ckpt"), (
      f"{path} is no checkpoint (the tools write ckpt-N); name the folder")
  if path in PRODUCED:
    return
  folder = os.path.dirname(path)
  if folder in PRODUCED:
    written = PRODUCED[folder]
    assert name in written or ("ckpt-N.h5" in written and _STEP_FILE.match(name)), (
        f"no shipped command writes {name} into {folder}")
    return
  assert not path.startswith("runs" + os.sep), f"no shipped command writes {path}"


def _config_keys():
  """Every dotted key an experiment has, and their prefixes (task.* of every task)."""
  def flat(data, prefix):
    for key, value in data.items():
      yield f"{prefix}{key}"
      if isinstance(value, dict):
        yield from flat(value, f"{prefix}{key}.")

  keys = set(flat(experiments.resolve_experiment("pretraining_bert_tiny").as_dict(), ""))
  for task_config in task_base.task_configs().values():
    keys.update(flat(task_config().as_dict(), "task."))
  return keys


SECTIONS = tuple(f.name for f in dataclasses.fields(configs.ExperimentConfig))
_DOTTED = re.compile(r"(?<![\w./-])((?:%s)(?:\.[a-z_0-9]+)+)(?![\w/])" % "|".join(SECTIONS))
_FILE_NAME = re.compile(r"\.(py|json|yaml|txt|h5|safetensors|bin|tfrecord)$")
# Keys read when an experiment loads but not kept in it, and the documentation's example
# of a misspelt key.
_NOT_STORED = {"model.encoder.size"}
_DELIBERATE_TYPOS = {"trainer.train_stpes"}


def _named_keys(text):
  return {m.group(1).rstrip(".") for m in _DOTTED.finditer(text)
          if not _FILE_NAME.search(m.group(1))}


def test_config_keys_named_in_the_tools_help_and_the_documentation_exist():
  keys = _config_keys() | _NOT_STORED | _DELIBERATE_TYPOS
  texts = {}
  for path in shipped_commands.doc_files():
    with open(path, encoding="utf-8") as f:
      texts[os.path.relpath(path, paths.ROOT)] = f.read()
  for tool in sorted(os.listdir(shipped_commands.TOOLS_DIR)):
    if tool.endswith(".py"):
      with open(os.path.join(shipped_commands.TOOLS_DIR, tool), encoding="utf-8") as f:
        texts[f"tools/{tool}"] = ast.get_docstring(ast.parse(f.read())) or ""
      texts[f"tools/{tool} flags"] = " ".join(
          shipped_commands.tool_flag_help(tool[:-3]).values())
  unknown = {source: sorted(k for k in _named_keys(text) if k not in keys)
             for source, text in texts.items()}
  assert not {s: k for s, k in unknown.items() if k}


def test_a_misspelt_config_key_in_help_text_is_caught():
  assert "trainer.train_step" in _named_keys("e.g. 'trainer.train_step=1000'") - _config_keys()
