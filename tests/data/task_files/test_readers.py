"""The registry of raw-format readers: importing bert_tf.data.task_files registers every
format's reader, with no record kind imported; a format without a reader is refused,
naming the section and the formats there are."""

import json
import subprocess
import sys

import pytest

import paths
from bert_tf import configs
from bert_tf.data.task_files import readers

PACKAGE_FORMATS = ["conll", "csv", "squad_json", "swag_csv", "tfds", "tsv"]


def test_importing_the_task_files_package_alone_registers_every_reader():
  code = ("import json, sys; from bert_tf.data.task_files import readers; "
          "print(json.dumps([readers.formats(), "
          "[m for m in sys.modules if m.startswith('bert_tf.data.pipelines')]]))")
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=paths.ROOT, timeout=120, check=True)
  formats, kind_modules = json.loads(result.stdout.splitlines()[-1])
  assert formats == PACKAGE_FORMATS
  assert kind_modules == []  # no record kind imported them


def test_a_format_without_a_reader_is_refused_naming_the_formats_there_are():
  data = configs.DataConfig(format="toy_format_nobody_reads", input_path="x")
  with pytest.raises(configs.ConfigError) as raised:
    readers.read_examples(data, {})
  message = str(raised.value)
  assert "no reader of raw files in format 'toy_format_nobody_reads'" in message
  assert message.endswith(", ".join(readers.formats()))
  assert set(PACKAGE_FORMATS) <= set(readers.formats())
