"""Inference from Python: a model loaded from a run, a converted checkpoint or an export,
called on raw text in batches.

    predictor = Predictor.from_run("runs/sst2")      # or .from_export, or load(path)
    out = predictor.predict(["a gripping film", "dull"])
    out.logits, out.probabilities, out.labels

A run folder (a training's model_dir) and a converted checkpoint folder are read as the
exporter reads them (bert_tf.training.trained_model: params.yaml, the newest readable
checkpoint, the vocab beside it); an export is read as `bert-tf-query` reads it
(bert_tf.export.query). What comes back is the export's outputs (Predictions).

The route follows the Keras backend. On TensorFlow, a run's model is wrapped in the
serving module its export would hold (bert_tf.export.exporter.build_serving_module), so
that the texts are tokenized in the graph by tf-text and every export kind answers as its
export does. On JAX (or torch), where TensorFlow need not be installed, the texts are
tokenized by Hugging Face's tokenizers (bert_tf.text.host_tokenizer, the same ids) and
the outputs read in NumPy as the export computes them (bert_tf.inference.host_heads).
"""

import os
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from bert_tf.configs import run_folder
from bert_tf.inference import host_heads
from bert_tf.inference import predictions as predictions_lib
from bert_tf.utils import errors
from bert_tf.utils import files

Texts = Union[str, Sequence[str], Sequence[Sequence[str]], Mapping[str, Sequence[str]]]


def _keras_backend() -> str:
  import keras  # pylint: disable=g-import-not-at-top
  return keras.backend.backend()


def _tensorflow_call(call) -> Callable[[Dict[str, List[str]]], Dict[str, np.ndarray]]:
  """A call taking {name: tf.string [B]} as one taking {name: list of str}."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  def run(columns):
    return predictions_lib.to_numpy(call({name: tf.constant(values, tf.string)
                                          for name, values in columns.items()}))
  return run


def _in_graph(experiment, model, vocab_file, seq_length, options):
  """(kind, inputs, call) of the serving module the model's export would hold, its
  raw-text function traced once (TensorFlow backend)."""
  from bert_tf.export import exporter  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  module = exporter.build_serving_module(experiment, model, vocab_file, seq_length=seq_length,
                                         **options)
  spec = {name: tf.TensorSpec([None], tf.string, name=name) for name in module.text_inputs}
  call = tf.function(module.predict_text, autograph=False).get_concrete_function(spec)
  return module.kind, module.text_inputs, _tensorflow_call(call)


def _on_host(experiment, model, vocab_file, seq_length, options):
  """(kind, inputs, call) of the model's head in NumPy over Hugging Face tokenizers'
  ids (any backend; TensorFlow not needed)."""
  from bert_tf.tasks import base as task_base  # pylint: disable=g-import-not-at-top
  from bert_tf.text import host_tokenizer  # pylint: disable=g-import-not-at-top
  from bert_tf.training import trained_model  # pylint: disable=g-import-not-at-top
  task = task_base.get_task(experiment)
  options = {**task.serving_options(trained_model.data_config_for_export(experiment)),
             **{k: v for k, v in options.items() if v is not None}}
  tokenizer = host_tokenizer.HostTokenizer(vocab_file, experiment.tokenizer.lower_case)
  trained_model.check_vocab_size(experiment, tokenizer.vocab_size, vocab_file)
  head = host_heads.head_for(task.export_kind, model, tokenizer, seq_length, options)
  return task.export_kind, head.inputs, head


class Predictor:
  """A model that answers raw text: `predict(texts)` -> Predictions.

  Attributes:
    kind: the export kind (classifier, squad, tagging, fill_mask, multiple_choice, ...).
    inputs: the names of the texts of a row, in order (("text",), ("text", "text_b"),
      ("question", "context"), ...).
    model: the Keras model (None for an export).
    batch_size: rows per call of the model.
  """

  def __init__(self, kind: str, inputs: Sequence[str],
               call: Callable[[Dict[str, List[str]]], Dict[str, np.ndarray]],
               model=None, batch_size: int = 32):
    if batch_size < 1:
      raise errors.InputError(f"batch_size must be positive, got {batch_size}")
    self.kind, self.inputs, self.model = kind, tuple(inputs), model
    self._call, self.batch_size = call, int(batch_size)

  @classmethod
  def from_run(cls, model_dir: str, checkpoint: Optional[str] = None,
               vocab_file: Optional[str] = None, seq_length: Optional[int] = None,
               batch_size: int = 32, **serving_options) -> "Predictor":
    """A run's model (a training's model_dir, or a converted checkpoint folder).

    Args:
      model_dir: the folder holding params.yaml and the checkpoints (local or remote).
      checkpoint: a checkpoint prefix or file; None takes the folder's newest readable.
      vocab_file: None takes the one params.yaml names (the folder's vocab.txt).
      seq_length: packed length T; None takes the run's evaluation seq_length.
      batch_size: rows per call of the model.
      **serving_options: the export kind's options replacing the task's (fill_mask:
        top_k, max_masks; squad: n_best_size, ...).

    Raises:
      MissingInputError: no params.yaml in model_dir, or no vocab; errors of
        restoring the checkpoint as bert-tf-export gives them.
    """
    from bert_tf.training import trained_model  # pylint: disable=g-import-not-at-top
    params = os.path.join(model_dir, run_folder.PARAMS_FILE)
    if not files.exists(params):
      raise errors.MissingInputError(
          f"No {run_folder.PARAMS_FILE} in {model_dir}: give a training's model_dir or a "
          f"converted checkpoint folder (an export: Predictor.from_export)")
    experiment = trained_model.load_experiment(params)
    backend = _keras_backend()
    if backend != "tensorflow":
      from bert_tf.tasks import base as task_base  # pylint: disable=g-import-not-at-top
      host_heads.check_served(task_base.get_task(experiment).export_kind, backend)
    vocab_file = trained_model.vocab_of(experiment, vocab_file, params)
    model = trained_model.model_from_checkpoint(experiment, checkpoint or model_dir)
    seq_length = trained_model.serving_seq_length(experiment, seq_length)
    route = _in_graph if backend == "tensorflow" else _on_host
    kind, inputs, call = route(experiment, model, vocab_file, seq_length, serving_options)
    return cls(kind, inputs, call, model, batch_size)

  @classmethod
  def from_export(cls, export_dir: str, batch_size: int = 32) -> "Predictor":
    """An export (a SavedModel version directory, or an export base: its newest
    version), called through its serving_default signature; needs TensorFlow."""
    from bert_tf.utils import optional  # pylint: disable=g-import-not-at-top
    optional.require_tensorflow("Reading an export")
    from bert_tf.export import query  # pylint: disable=g-import-not-at-top
    export = query.load(export_dir)
    return cls(export.kind, export.inputs, _tensorflow_call(export.call), None, batch_size)

  def columns(self, texts: Texts) -> Dict[str, List[str]]:
    """The texts as {input name: B strings}.

    Args:
      texts: a string; a list of strings (one text input); a list of tuples, one
        string per input ((text, text_b), (question, context)); or {input name: list}.

    Raises:
      InputError: texts that do not fit the inputs (naming them).
    """
    if isinstance(texts, str):
      texts = [texts]
    if isinstance(texts, Mapping):
      missing = [name for name in self.inputs if name not in texts]
      if missing or len({len(texts[name]) for name in self.inputs}) > 1:
        raise errors.InputError(f"A {self.kind} model takes {', '.join(self.inputs)} of "
                                f"equal lengths; got {', '.join(sorted(texts))}")
      return {name: [str(t) for t in texts[name]] for name in self.inputs}
    texts = list(texts)
    rows = [(row,) if isinstance(row, str) else tuple(row) for row in texts]
    if any(len(row) != len(self.inputs) for row in rows):
      raise errors.InputError(f"A {self.kind} model takes {len(self.inputs)} text(s) per row "
                              f"({', '.join(self.inputs)})")
    return {name: [str(row[i]) for row in rows] for i, name in enumerate(self.inputs)}

  def predict(self, texts: Texts, batch_size: Optional[int] = None
              ) -> predictions_lib.Predictions:
    """The model's outputs for the texts, computed `batch_size` rows at a time.

    Returns:
      Predictions: {output name: np.ndarray [B, ...]}, B the rows given.
    """
    columns = self.columns(texts)
    size = batch_size or self.batch_size
    rows = len(next(iter(columns.values())))
    batches = [self._call({name: values[start:start + size]
                           for name, values in columns.items()})
               for start in range(0, rows, size)]
    if not batches:
      raise errors.InputError("No texts to predict")
    return predictions_lib.Predictions(self.kind, predictions_lib.concatenate(batches))

  __call__ = predict


def load(path: str, **kwargs) -> Predictor:
  """Predictor.from_run where `path` holds a params.yaml, else Predictor.from_export."""
  if files.exists(os.path.join(path, run_folder.PARAMS_FILE)):
    return Predictor.from_run(path, **kwargs)
  return Predictor.from_export(path, **kwargs)
