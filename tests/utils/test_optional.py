"""The install commands the errors name: an extra of bert_tf beside TensorFlow, the
packages alone without it (an extra brings TensorFlow back); and the check that finds a
module without importing it."""

import ast
import os
import re
import sys

import pytest

import paths
from bert_tf.utils import errors
from bert_tf.utils import optional


def _setup_extras():
  tree = ast.parse(open(os.path.join(paths.ROOT, "setup.py"), encoding="utf-8").read())
  for node in tree.body:
    if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "EXTRAS_REQUIRE":
      return {key.value for key in node.value.keys}
  raise AssertionError("setup.py defines no EXTRAS_REQUIRE")


def _requirement_names(path):
  names = []
  for line in open(os.path.join(paths.ROOT, path), encoding="utf-8"):
    line = line.split("#", 1)[0].strip()
    if line and not line.startswith("-"):
      names.append(re.split(r"[<>=!~\[; ]", line, maxsplit=1)[0])
  return names


@pytest.mark.parametrize("extra", sorted(optional._EXTRA_PACKAGES))  # pylint: disable=protected-access
def test_each_extra_installs_without_tensorflow_the_packages_its_requirements_list(
    extra, monkeypatch):
  assert extra in _setup_extras()
  monkeypatch.setattr(optional, "tensorflow_installed", lambda: True)
  assert optional.extra_install(extra) == f"pip install 'bert_tf[{extra}]'"
  monkeypatch.setattr(optional, "tensorflow_installed", lambda: False)
  command = optional.extra_install(extra)
  assert "bert_tf" not in command and command.startswith("pip install ")
  packages, requirements = optional._EXTRA_PACKAGES[extra]  # pylint: disable=protected-access
  if requirements:
    assert command.endswith(f"(or -r {requirements})")
    listed = _requirement_names(requirements)
    assert set(packages.split()) <= set(listed), (packages, listed)


def test_a_module_made_unimportable_counts_as_absent_and_tensorflow_is_required(monkeypatch):
  assert optional.installed("json") and not optional.installed("no_such_module_x")
  monkeypatch.setitem(sys.modules, "tensorflow_text", None)
  assert not optional.installed("tensorflow_text") and not optional.tensorflow_installed()
  # bert_tf is on no package index, and its requirements would bring TensorFlow into the
  # TensorFlow-free install: the message names the install from source, apart from it.
  with pytest.raises(errors.InputError) as raised:
    optional.require_tensorflow()
  assert str(raised.value).startswith("needs TensorFlow (and tensorflow-text): ")
  assert "pip install . in its source checkout" in str(raised.value)
  assert "apart from the TensorFlow-free one" in str(raised.value)
  assert "pip install bert_tf" not in str(raised.value)
