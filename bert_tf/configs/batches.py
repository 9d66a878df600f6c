"""The one check that a batch splits evenly: over replicas or processes, and each share
into gradient-accumulation micro-batches."""

from bert_tf.configs.base import ConfigError


def check_batch_sizes(batch: int, shares: int = 1, accumulation_steps: int = 1,
                      share_name: str = "replicas",
                      batch_name: str = "train_data.global_batch_size") -> int:
  """Raises ConfigError unless `batch` rows split into `shares` equal shares (the
  replicas, or the processes that read it), each into `accumulation_steps` equal
  micro-batches.

  Args:
    batch: rows of the batch.
    shares: replicas or processes that share it.
    accumulation_steps: micro-batches per share (trainer.gradient_accumulation_steps).
    share_name: what `shares` counts, as the message names it.
    batch_name: the setting or batch the message names.

  Returns:
    the rows of one micro-batch.
  """
  if batch % shares:
    raise ConfigError(f"{batch_name} ({batch}) must be divisible by the number of "
                      f"{share_name} ({shares})")
  share = batch // shares
  if share % accumulation_steps:
    split = f"{share} = {batch_name} {batch} / {shares} {share_name}" if shares > 1 else ""
    shown = f"The batch of each of the {share_name} ({split})" if split else (
        f"{batch_name} ({batch})")
    raise ConfigError(f"{shown} must be divisible by trainer.gradient_accumulation_steps "
                      f"({accumulation_steps})")
  return share // accumulation_steps
