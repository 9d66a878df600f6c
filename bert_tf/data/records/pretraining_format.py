"""What pretraining data creation writes, and the settings it writes it with.

The settings are the original BERT release's (same names and defaults), a `configs.Config`
like every other. The files are `tf.train.Example` TFRecord shards named
`{output}-NNNNN-of-NNNNN.tfrecord[.gz]` beside a JSON summary `{output}.json`; a shard is
written under a temporary name (`INCOMPLETE_SUFFIX`) until the whole run has succeeded.
"""

import dataclasses
import re
from typing import List

from bert_tf import configs
from bert_tf.utils import errors

_SHARD_PATTERN = re.compile(r"-\d{5}-of-\d{5}\.tfrecord(\.gz)?$")
INCOMPLETE_SUFFIX = ".incomplete"


class PretrainingDataError(errors.UserError, ValueError):
  """Bad input, vocab or output, with the offending file or flag named."""


@dataclasses.dataclass
class PretrainingDataSettings(configs.Config):
  """The original tool's settings (same names and defaults)."""

  max_seq_length: int = 128
  max_predictions_per_seq: int = 20
  masked_lm_prob: float = 0.15
  dupe_factor: int = 10
  short_seq_prob: float = 0.1
  random_seed: int = 12345
  do_lower_case: bool = True
  do_whole_word_mask: bool = False

  def validate(self):
    configs.require(self.max_seq_length >= 5,
                    f"max_seq_length must be at least 5, got {self.max_seq_length}")
    configs.require(self.max_predictions_per_seq >= 1,
                    "max_predictions_per_seq must be at least 1")
    configs.require(0.0 < self.masked_lm_prob < 1.0,
                    f"masked_lm_prob must be in (0, 1), got {self.masked_lm_prob}")
    configs.require(self.dupe_factor >= 1,
                    f"dupe_factor must be at least 1, got {self.dupe_factor}")
    configs.require(0.0 <= self.short_seq_prob <= 1.0,
                    f"short_seq_prob must be in [0, 1], got {self.short_seq_prob}")


def output_paths(output: str, num_shards: int, gzip: bool) -> List[str]:
  """`{output}-00000-of-0000N.tfrecord[.gz]`; an output ending in .tfrecord is used as is
  for one shard and gets the shard index before the extension otherwise."""
  ext = ".tfrecord.gz" if gzip else ".tfrecord"
  base = output
  for known in (".tfrecord.gz", ".tfrecord"):
    if base.endswith(known):
      base = base[:-len(known)]
      if num_shards == 1:
        return [base + ext]
  return [f"{base}-{i:05d}-of-{num_shards:05d}{ext}" for i in range(num_shards)]


def summary_path(output: str) -> str:
  """The JSON summary's path: the output prefix (extension dropped) + `.json`."""
  base = output
  for known in (".tfrecord.gz", ".tfrecord"):
    if base.endswith(known):
      base = base[:-len(known)]
  return base + ".json"


def summary_path_for_record_file(path: str) -> str:
  """The summary path of a TFRecord file written by this tool."""
  base = _SHARD_PATTERN.sub("", path)
  if base == path:
    base = re.sub(r"\.tfrecord(\.gz)?$", "", path)
  return base + ".json"

