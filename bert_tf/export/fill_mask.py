"""Fill-mask export of a pretraining model (asked with bert_tf.export.query)."""

from typing import Optional

from bert_tf import configs
from bert_tf.export import exporter
from bert_tf.training import trained_model


def export_fill_mask(model_or_checkpoint, config, vocab_file: Optional[str], export_dir: str,
                     version: Optional[int] = None, top_k: int = 5,
                     max_masks: Optional[int] = None, seq_length: Optional[int] = None,
                     lower_case: Optional[bool] = None) -> str:
  """Exports a pretraining model with a fill-mask signature for TF Serving.

  Args:
    model_or_checkpoint: a BertPretrainer, or a checkpoint prefix/directory of a
      pretraining run (restored by checkpoint_items).
    config: the ExperimentConfig (task pretraining) or the path of its YAML.
    vocab_file: the vocab; None takes the config's tokenizer.vocab_file.
    export_dir: base directory; the SavedModel goes to export_dir/<version>/.
    version: integer version; None takes the next free one.
    top_k: candidates returned for each [MASK].
    max_masks: [MASK]s predicted per text; None: max_predictions_per_seq.
    seq_length, lower_case: None takes the config's (data section's seq_length,
      tokenizer.lower_case).

  Returns:
    The written version directory.
  """
  experiment = trained_model.load_experiment(config)
  vocab_file = vocab_file or experiment.tokenizer.vocab_file
  if not vocab_file:
    raise configs.ConfigError("No vocab file: pass vocab_file or set tokenizer.vocab_file")
  if isinstance(model_or_checkpoint, str):
    model = trained_model.model_from_checkpoint(experiment, model_or_checkpoint)
  else:
    model = model_or_checkpoint
  module = exporter.build_serving_module(experiment, model, vocab_file, kind="fill_mask",
                                         top_k=top_k, max_masks=max_masks,
                                         seq_length=seq_length, lower_case=lower_case)
  return exporter.write_saved_model(module, export_dir, version)

