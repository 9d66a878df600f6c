"""A damaged checkpoint, and the newest one of several that reads in full, for both
checkpoint formats (bert_tf.checkpoints.portable's files and TensorFlow's prefixes,
bert_tf.checkpoints.tf_checkpoints)."""

import logging
from typing import Callable, Iterable, Optional

from bert_tf.checkpoints import portable
from bert_tf.utils import errors


class UnreadableCheckpointError(errors.UserError, OSError):
  """A checkpoint's index or data file cannot be read; the message names the file."""


def newest_readable(directory: str, candidates: Iterable[str],
                    check: Callable[[str], None]) -> Optional[str]:
  """The first of `candidates` (newest first) that `check` reads, warning about each
  damaged one skipped; None when there are no candidates.

  Raises:
    UnreadableCheckpointError: no candidate reads (the message names each one's
      problem).
  """
  problems = []
  for prefix in candidates:
    try:
      check(prefix)
    except (UnreadableCheckpointError, portable.PortableCheckpointError) as e:
      problems.append(str(e))
      continue
    for problem in problems:
      logging.warning("%s; using the newest readable checkpoint %s instead", problem, prefix)
    return prefix
  if problems:
    raise UnreadableCheckpointError("No readable checkpoint in " + directory + ": "
                                    + "; ".join(problems))
  return None
