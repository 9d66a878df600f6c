"""Tests that run the tools as several processes at once: their common end."""

import subprocess
from typing import List, Sequence


def finish_all(processes: Sequence[subprocess.Popen], timeout: float = 600) -> List[str]:
  """The outputs of `processes` (started with stdout=PIPE, text=True) once they ended,
  asserting that every one exited 0 (the message shows the tail of each output)."""
  outputs = [p.communicate(timeout=timeout)[0] for p in processes]
  assert [p.returncode for p in processes] == [0] * len(processes), (
      "\n".join(o[-3000:] for o in outputs))
  return outputs
