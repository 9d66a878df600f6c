"""Checkpoint conversion between bert_tf, the original Google TF1 release and Hugging Face.

`convert_checkpoint(input_path, output_dir, input_format="auto", output_format="bert_tf")`
does a whole conversion; `read_checkpoint` gives a bert_tf model from any format and
`save_checkpoint` writes one in any format. The names of every weight in the three
formats are one table, `name_map.TABLE`.
"""

from bert_tf.checkpoints.convert import (ConversionSummary, LoadedCheckpoint, build_model,
                                         convert_checkpoint, detect_format, model_arrays,
                                         read_checkpoint, save_bert_tf, save_checkpoint,
                                         save_google_tf1, save_huggingface)
from bert_tf.checkpoints.files import FORMATS, ConversionError
