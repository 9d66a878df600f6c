"""The commands the project ships, read from where a user reads them: the bash blocks and
inline `tools/...` spans of the documentation (README.md, docs/*.md, CONTRIBUTING.md),
the header comments of official_configs/experiments/*.yaml and the docstrings of
tools/*.py (their --help); and what each tool defines and writes, read from the tools'
own source.

A command is a `Command`: its source (file and line), the tool it runs and its
arguments after shell-like parsing (line continuations joined, `NAME=value` lines of
the same block substituted for `$NAME`).
"""

import ast
import dataclasses
import glob
import os
import re
import shlex
from typing import Dict, List, Optional, Set, Tuple

import paths

README = os.path.join(paths.ROOT, "README.md")
CONTRIBUTING = os.path.join(paths.ROOT, "CONTRIBUTING.md")
DOCS_DIR = os.path.join(paths.ROOT, "docs")
TOOLS_DIR = os.path.join(paths.ROOT, "tools")
EXPERIMENTS_DIR = os.path.join(paths.ROOT, "official_configs", "experiments")
# absl's own flags and the one run_tool adds (bert_tf.utils.errors).
COMMON_FLAGS = {"help", "helpfull", "helpshort", "helpxml", "flagfile", "undefok",
                "verbose", "logtostderr", "alsologtostderr", "v", "verbosity"}
# What the tools write into the folder they are given (checked against the tools
# themselves in tests/integration/test_shipped_commands_run.py).
WRITTEN = {
    ("train", "model_dir"): {"params.yaml", "ckpt-N.h5", "train", "eval", "predictions"},
    ("convert_checkpoint", "output_dir"): {"ckpt-1.h5", "config.yaml", "vocab.txt"},
}
# Flags whose value names a checkpoint that another tool wrote.
CHECKPOINT_FLAGS = {("train", "init_checkpoint"), ("export_saved_model", "checkpoint"),
                    ("extract_features", "init_checkpoint"), ("convert_checkpoint", "input")}
_PYTHON = re.compile(r"^(?:\S*python3?)\s+(?:\S*/)?tools/(\w+)\.py\b")
_CONSOLE = re.compile(r"^bert-tf-[\w-]+\b")
_ASSIGNMENT = re.compile(r"^([A-Z_][A-Z0-9_]*)=(.*)$")


@dataclasses.dataclass
class Command:
  """One shipped command: where it is written, the tool and its arguments."""

  source: str
  tool: str
  args: List[str]
  text: str

  def flags(self) -> List[Tuple[str, Optional[str]]]:
    """(name, value or None) of each --flag before a bare `--` (Beam's own options
    follow it)."""
    out = []
    for arg in self.args:
      if arg == "--":
        break
      if arg.startswith("--"):
        name, _, value = arg[2:].partition("=")
        out.append((name, value if "=" in arg else None))
    return out

  def positional(self) -> List[str]:
    """Arguments that are not flags, before a bare `--`."""
    out = []
    for arg in self.args:
      if arg == "--":
        break
      if not arg.startswith("--"):
        out.append(arg)
    return out

  def value(self, name: str) -> Optional[str]:
    """The last value of --name (absl keeps the last), or None."""
    values = [v for n, v in self.flags() if n == name]
    return values[-1] if values else None

  def values(self, name: str) -> List[str]:
    return [v for n, v in self.flags() if n == name and v is not None]


def console_scripts() -> Dict[str, str]:
  """{command: tool module} of setup.py's console scripts."""
  with open(os.path.join(paths.ROOT, "setup.py"), encoding="utf-8") as f:
    tree = ast.parse(f.read())
  for node in ast.walk(tree):
    if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id == "CONSOLE_SCRIPTS"):
      return ast.literal_eval(node.value)
  raise AssertionError("setup.py defines no CONSOLE_SCRIPTS")


def _define_calls(tool: str):
  """The `flags.DEFINE_*("name", ...)` calls of tools/<tool>.py, parsed."""
  with open(os.path.join(TOOLS_DIR, f"{tool}.py"), encoding="utf-8") as f:
    tree = ast.parse(f.read())
  for node in ast.walk(tree):
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        and node.func.attr.startswith("DEFINE_") and node.args
        and isinstance(node.args[0], ast.Constant)):
      yield node


def tool_flags(tool: str) -> Dict[str, str]:
  """{flag name: DEFINE_ kind} of tools/<tool>.py, read from its source."""
  return {node.args[0].value: node.func.attr[len("DEFINE_"):]
          for node in _define_calls(tool)}


def tool_flag_help(tool: str) -> Dict[str, str]:
  """{flag name: help text} of tools/<tool>.py."""
  found = {}
  for node in _define_calls(tool):
    # DEFINE_enum(name, default, choices, help); the others (name, default, help).
    position = 3 if "enum" in node.func.attr else 2
    texts = node.args[position:position + 1] + [k.value for k in node.keywords
                                                if k.arg == "help"]
    for text in texts:
      try:
        value = ast.literal_eval(text)
      except ValueError:
        continue  # A help text built at run time.
      if isinstance(value, str):
        found[node.args[0].value] = value
  return found


def _command(text: str, source: str, variables: Dict[str, str]) -> Optional[Command]:
  """The Command of one shell line (continuations joined), or None for another program."""
  for name, value in variables.items():
    text = text.replace("${" + name + "}", value).replace("$" + name, value)
  text = text.split(" #", 1)[0].strip()
  match = _PYTHON.match(text)
  if match:
    tool, rest = match.group(1), text[match.end():]
  else:
    match = _CONSOLE.match(text)
    scripts = console_scripts()
    if not match or match.group(0) not in scripts:
      return None
    tool, rest = scripts[match.group(0)], text[match.end():]
  return Command(source, tool, shlex.split(rest), text)


def _shell_commands(lines: List[Tuple[int, str]], path: str) -> List[Command]:
  """Commands of shell lines [(line number, text)]: continuations joined, comments and
  other programs left out, `NAME=value` substituted after it."""
  commands, variables, pending, start = [], {}, "", 0
  for number, line in lines:
    if not pending:
      start = number
    stripped = line.strip()
    if not pending and (not stripped or stripped.startswith("#")):
      continue
    if stripped.endswith("\\"):
      pending += stripped[:-1] + " "
      continue
    text, pending = pending + stripped, ""
    assignment = _ASSIGNMENT.match(text.split(" #", 1)[0].strip())
    if assignment:
      value = assignment.group(2).strip()
      # A command substitution stands for the path it prints.
      variables[assignment.group(1)] = (assignment.group(1).lower()
                                        if value.startswith("$(") else shlex.split(value)[0])
      continue
    command = _command(text, f"{os.path.relpath(path, paths.ROOT)}:{start}", variables)
    if command is not None:
      commands.append(command)
  return commands


def doc_files() -> List[str]:
  """The documentation a user reads, in reading order: README.md, docs/*.md,
  CONTRIBUTING.md."""
  return [README, *sorted(glob.glob(os.path.join(DOCS_DIR, "*.md"))), CONTRIBUTING]


def markdown_commands(path: str) -> List[Command]:
  """The commands of one Markdown file's ```bash blocks (a plain ``` block is output or
  a command with placeholders, and is not read)."""
  with open(path, encoding="utf-8") as f:
    lines = f.read().splitlines()
  commands, block = [], None
  for number, line in enumerate(lines, start=1):
    if line.startswith("```"):
      if block is not None:
        commands += _shell_commands(block, path)
        block = None
      elif line.strip() == "```bash":
        block = []
      continue
    if block is not None:
      block.append((number, line))
  return commands


def doc_commands() -> List[Command]:
  """The commands of every documentation file's ```bash blocks, in reading order."""
  return [c for path in doc_files() for c in markdown_commands(path)]


def inline_flags(path: str) -> List[Tuple[str, str, List[str]]]:
  """(source, tool, [flag names]) of one Markdown file's inline `tools/X.py --flag...`
  spans."""
  with open(path, encoding="utf-8") as f:
    text = f.read()
  found = []
  for match in re.finditer(r"`(?:python3? )?tools/(\w+)\.py((?: --[^`]*)?)`", text):
    line = text.count("\n", 0, match.start()) + 1
    names = re.findall(r"(?:^| )--(\w+)", match.group(2))
    found.append((f"{os.path.relpath(path, paths.ROOT)}:{line}", match.group(1), names))
  return found


def doc_inline_flags() -> List[Tuple[str, str, List[str]]]:
  """inline_flags of every documentation file."""
  return [span for path in doc_files() for span in inline_flags(path)]


def experiment_header_commands() -> List[Command]:
  """The commands in the header comments of official_configs/experiments/*.yaml."""
  commands = []
  for path in sorted(glob.glob(os.path.join(EXPERIMENTS_DIR, "*.yaml"))):
    header = []
    with open(path, encoding="utf-8") as f:
      for number, line in enumerate(f, start=1):
        if not line.startswith("#"):
          break
        header.append((number, line[1:].rstrip("\n")))
    # Only the indented lines are commands; the prose around them is not.
    commands += _shell_commands([(n, l) for n, l in header if l.startswith("   ")], path)
  return commands


def tool_docstring_commands() -> List[Command]:
  """The commands in the module docstrings of tools/*.py (what --help prints)."""
  commands = []
  for path in sorted(glob.glob(os.path.join(TOOLS_DIR, "*.py"))):
    with open(path, encoding="utf-8") as f:
      doc = ast.get_docstring(ast.parse(f.read()), clean=False) or ""
    lines = [(n, l) for n, l in enumerate(doc.splitlines(), start=2) if l.startswith("  ")]
    commands += _shell_commands(lines, path)
  return commands


def all_commands() -> List[Command]:
  return doc_commands() + experiment_header_commands() + tool_docstring_commands()


def produced_dirs(commands: List[Command]) -> Dict[str, Set[str]]:
  """{folder: names its tool writes there} of every shipped command's output folder."""
  out = {}
  for command in commands:
    for (tool, flag), names in WRITTEN.items():
      value = command.value(flag) if command.tool == tool else None
      if value and not (tool == "convert_checkpoint"
                        and command.value("output_format") not in (None, "bert_tf")):
        out.setdefault(os.path.normpath(value), set()).update(names)
  return out
