"""Checkpoint conversion between bert_tf, the original Google TF1 release and Hugging Face.

`convert_checkpoint(input_path, output_dir, input_format="auto", output_format="bert_tf")`
does a whole conversion; `read_checkpoint` gives a bert_tf model from any format and
`save_checkpoint` writes one in any format. The names of every weight in the three
formats are one table, `name_map.TABLE`.
"""

from bert_tf.checkpoints.convert import ConversionSummary, convert_checkpoint
from bert_tf.checkpoints.files import FORMATS, ConversionError
from bert_tf.checkpoints.reading import LoadedCheckpoint, detect_format, read_checkpoint
from bert_tf.checkpoints.variables import build_model, model_arrays
from bert_tf.checkpoints.writing import (save_bert_tf, save_checkpoint, save_google_tf1,
                                         save_huggingface)
