"""Converts BERT checkpoints between bert_tf, the Google TF1 release, Hugging Face and
KerasHub.

Reading any format gives a bert_tf Keras model (the model of the checkpoint's
architecture: an encoder, a pretrainer or a task model with its head, see
`architectures` and `reading`) with its head's settings (label names, dropout,
tokenizer case); writing any format reads the variables back through the same table
(see `writing`). Output folders appear only once complete. Stage messages go to this
package's logger.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Optional, Tuple

import numpy as np

from bert_tf.checkpoints import reading
from bert_tf.checkpoints import writing
from bert_tf.checkpoints.files import BERT_TF, VOCAB_FILE, ConversionError

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class ConversionSummary:
  """What one conversion did."""

  input_path: str
  input_format: str
  output_dir: str
  output_format: str
  items: Tuple[str, ...]
  num_variables: int
  num_parameters: int
  seconds: float

  def line(self) -> str:
    return (f"Converted {self.input_format} {self.input_path} -> {self.output_format} "
            f"{self.output_dir}: {'+'.join(self.items)}, {self.num_variables} variables, "
            f"{self.num_parameters:,} parameters in {self.seconds:.1f} s")


def convert_checkpoint(input_path: str, output_dir: str, input_format: str = "auto",
                       output_format: str = BERT_TF, config_file: Optional[str] = None,
                       vocab_file: Optional[str] = None,
                       overwrite: bool = False) -> ConversionSummary:
  """Reads a checkpoint in one format and writes it in another.

  Args:
    input_path: a folder, checkpoint prefix or weights file.
    output_dir: the folder to create (it must not exist unless `overwrite`).
    input_format: auto, bert_tf, google_tf1, huggingface or keras_hub.
    output_format: bert_tf, google_tf1, huggingface or keras_hub.
    config_file: overrides the config found beside the input.
    vocab_file: overrides the vocab.txt found beside the input; one is required.

  Returns:
    A ConversionSummary.
  """
  start = time.time()
  loaded = reading.read_checkpoint(input_path, input_format, config_file, vocab_file)
  if loaded.vocab_file is None:
    raise ConversionError(f"No {VOCAB_FILE} beside {input_path}; pass the vocab file.")
  logger.info("Writing %s checkpoint to %s", output_format, output_dir)
  writing.save_checkpoint(loaded.model, loaded.vocab_file, output_dir, output_format, overwrite,
                          loaded.settings)
  weights = loaded.model.weights
  return ConversionSummary(
      input_path=input_path, input_format=loaded.source_format, output_dir=output_dir,
      output_format=output_format, items=loaded.items, num_variables=len(weights),
      num_parameters=int(sum(np.prod(w.shape) for w in weights)),
      seconds=time.time() - start)
