"""Tasks read no files (CONTRIBUTING.md, *Adding a task*): a task's input, and any file
its evaluation needs (SQuAD's evaluation questions), comes through its record kind
(bert_tf.data.pipelines.loaders). Every call of a module of bert_tf/tasks/ is checked
for a call that opens or reads a file; writing the task's prediction files is its own
business."""

import ast
import pathlib

import paths

TASKS = pathlib.Path(paths.ROOT) / "bert_tf" / "tasks"
# What opens or reads a file: builtins, TensorFlow's gfile, bert_tf.utils.files,
# json / NumPy / pickle loaders, and the package's readers (read_* and load_*).
READING_CALLS = {"open", "GFile", "open_file", "open_input", "read_bytes", "staged_input",
                 "load", "read_text"}
READING_PREFIXES = ("read_", "load_")


def reading_calls(source: str):
  """The names of the calls in `source` that open or read a file, in order."""
  found = []
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.Call):
      function = node.func
      name = function.attr if isinstance(function, ast.Attribute) else getattr(
          function, "id", "")
      if name in READING_CALLS or name.startswith(READING_PREFIXES):
        found.append(name)
  return found


def test_the_check_finds_the_ways_of_reading_a_file():
  source = ("a = json.load(open(path))\nb = squad.load_squad_json(path)\n"
            "c = tf.io.gfile.GFile(path)\nd = readers.read_examples(data, {})\n"
            "files.write_lines(path, lines)\n")
  assert sorted(reading_calls(source)) == ["GFile", "load", "load_squad_json", "open",
                                           "read_examples"]


def test_no_task_module_opens_or_reads_a_file():
  modules = sorted(TASKS.rglob("*.py"))
  assert len(modules) > 5
  found = {str(path.relative_to(paths.ROOT)): calls for path in modules
           if (calls := reading_calls(path.read_text(encoding="utf-8")))}
  assert not found, found
