"""The processes of jax.distributed as the run's process group: they agree through
JAX's multi-host collectives, and a process that stopped answering is named by the
heartbeats bert_tf.training.jax_engine.devices watches from the start of
jax.distributed."""

from typing import Callable, Optional

import numpy as np
from jax.experimental import multihost_utils

from bert_tf.training import process_group
from bert_tf.training.jax_engine import devices


class JaxProcessGroup(process_group.ProcessGroup):
  """The `process_count` processes of the run (jax.process_count())."""

  def __init__(self, process_count: int):
    self._count = process_count

  def any_process(self, flag: bool) -> bool:
    """An all-gather of the processes' flags."""
    if self._count == 1:
      return flag
    local = np.asarray([flag], np.int32)
    return bool(np.any(multihost_utils.process_allgather(local)))

  def barrier(self, name: str) -> None:
    if self._count > 1:
      multihost_utils.sync_global_devices(name)

  def lost_process(self, error: BaseException) -> Optional[str]:
    return devices.lost_process(error)

  def lost_process_reason(self, error: BaseException) -> str:
    return devices.lost_process_reason(error)

  def end_on_lost_process(self, message: Callable[[str, str], str]) -> None:
    devices.end_on_lost_process(message)
