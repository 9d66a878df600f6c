"""The CRC32C line that heads every params.yaml bert_tf writes (a training run's, a
converted checkpoint folder's), and its check.

The line is a YAML comment, so every version reads the file as before; it records the
CRC32C of the lines after it, so that a damaged params.yaml is named damaged, not taken
for another configuration. A params.yaml without that line (written before it) is read
as it is.
"""

import re
from typing import Optional

import crc32c

from bert_tf.configs import base
from bert_tf.configs import run_folder
from bert_tf.utils import files

_CHECKSUM_LINE = "# bert_tf params.yaml; CRC32C of the lines below: {:08x}\n"
# The line as `with_checksum` writes it, its text taken from _CHECKSUM_LINE.
_CHECKSUM = re.compile(re.escape(_CHECKSUM_LINE.split("{")[0]).encode() + rb"([0-9a-f]{8})\n")


class DamagedParamsError(base.ConfigError):
  """A params.yaml that is empty or fails its CRC32C; the message names it."""


def with_checksum(text: str) -> str:
  """The content of a params.yaml holding the YAML `text`: its CRC32C line, then `text`."""
  return _CHECKSUM_LINE.format(crc32c.crc32c(text.encode("utf-8"))) + text


def check_intact(path: str, data: Optional[bytes] = None) -> None:
  """Raises DamagedParamsError where the params.yaml at `path` (`data`: its content,
  where read already) is empty or fails the CRC32C its first line records (one without
  that line, of an earlier version, passes unless empty)."""
  if data is None:
    data = files.read_bytes(path)  # a local one with `open`: loads no TensorFlow
  remedy = (f"restore it, or use --replace_params (replace_params=True) to write this "
            f"run's configuration as its {run_folder.PARAMS_FILE}")
  if not data.strip():
    raise DamagedParamsError(f"{path} is damaged: it is empty; {remedy}")
  first = data.split(b"\n", 1)[0] + b"\n"
  match = _CHECKSUM.fullmatch(first)
  if match is None:
    if b"CRC32C" in first or b"params.yaml" in first:
      raise DamagedParamsError(f"{path} is damaged: its first line (its CRC32C) is; {remedy}")
    return
  read, written = crc32c.crc32c(data[len(first):]), int(match.group(1), 16)
  if read != written:
    raise DamagedParamsError(f"{path} is damaged: it fails its CRC32C ({read:08x} read, "
                             f"{written:08x} written); {remedy}")
