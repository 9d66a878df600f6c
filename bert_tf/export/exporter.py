"""SavedModels for TF Serving, from a model or from a checkpoint and its config.

An export goes to `EXPORT_BASE/<version>/` (an integer directory, as TF Serving's
file-system source expects; by default the next free integer). It is written
to a hidden temporary directory first and renamed when complete, so a server
watching EXPORT_BASE never sees a half-written version. The vocab and the
label names are SavedModel assets: the directory is self-contained and can be
moved.

Kinds of export (`kind`), each served by the ServingModule registered for it
(bert_tf.export.serving_module.register_serving) in a `*_serving` module here, which
also says how it is built for a task (`from_task`):
  encoder      pooled_output, sequence_output (any checkpoint's encoder)
  fill_mask    top-k tokens for every [MASK] (the pretraining model)
  classifier   probabilities, label ids and names, or a regression score
               (task sentence_prediction)
  squad        answer text, character offsets and score (task squad)
  tagging      entities with type and character offsets (task tagging)
  multiple_choice  probabilities over the endings and the chosen one (task
               multiple_choice, SWAG)
  auto         the kind of the experiment's task (its `export_kind`)
The task's `serving_options` are the serving module's arguments for the task's own
kind; the kind 'encoder' wraps any model's encoder.
"""

import logging
import os
import re
import warnings
from typing import Optional, Tuple

import keras
import tensorflow as tf

from bert_tf import configs
from bert_tf.checkpoints import variables
from bert_tf.export import int8_onednn
# Imported for its loading of every kind of export.
from bert_tf.export import kinds as export_kinds  # pylint: disable=unused-import
from bert_tf.export import serving_module
from bert_tf.export import text_encoding
from bert_tf.layers import embeddings
from bert_tf.tasks import base as task_base
from bert_tf.text.tokenizer import BertWordPieceTokenizer
from bert_tf.training import trained_model
from bert_tf.utils import errors
from bert_tf.utils import files

AUTO = "auto"
# The values of export_from_checkpoint's `quantize_mode` (and of --quantize): int8
# weights with float32 products, and int8 weights with int8 products on TensorFlow's
# generic kernels or on oneDNN's (`quantize`); bf16 weights and products, LayerNorm and
# softmax in float32 (`to_bfloat16`).
INT8 = "int8"
INT8_DYNAMIC = "int8_dynamic"
INT8_ONEDNN = int8_onednn.MODE
INT8_MODES = (INT8, INT8_DYNAMIC, INT8_ONEDNN)
BFLOAT16 = "bfloat16"
QUANTIZE_MODES = INT8_MODES + (BFLOAT16,)


def next_version(export_base: str) -> int:
  """1 + the largest integer directory name in export_base (1 if there is none)."""
  versions = [int(name) for name in files.listdir(export_base) if re.fullmatch(r"\d+", name)]
  return max(versions, default=0) + 1


def write_saved_model(module, export_base: str, version: Optional[int] = None) -> str:
  """Saves a ServingModule with its signatures as EXPORT_BASE/<version>/.

  Args:
    module: a `bert_tf.export.serving_module.ServingModule`.
    export_base: the model's base directory (what TF Serving's model_base_path names).
    version: integer version; None takes `next_version(export_base)`.

  A remote export_base (gs://, ...) gets the SavedModel written to a local folder first
  and uploaded through the package's file layer (bert_tf.utils.files.staged_directory),
  which reaches the storage TensorFlow's own client does not (a Cloud Storage emulator).

  Returns:
    The path of the written version directory.

  Raises:
    FileExistsError: the version directory exists already.
  """
  version = next_version(export_base) if version is None else int(version)
  if version < 0:
    raise errors.InputError(f"version must be a non-negative integer, got {version}")
  final = os.path.join(export_base, str(version))
  if files.exists(final):
    raise errors.OutputExistsError(
        f"Export directory {final} exists already; choose another version")
  # The temporary name is no integer, so a server watching export_base ignores it.
  staged = (files.staged_directory(final) if not files.is_local(final)
            else files.atomic_path(final, overwrite=False))
  with staged as temporary:
    tf.saved_model.save(module, temporary, signatures=module.signatures())
  logging.info("Exported %s to %s", type(module).__name__, final)
  return final


def kinds() -> Tuple[str, ...]:
  """The accepted values of `kind`: auto and every registered serving kind."""
  return (AUTO,) + serving_module.serving_kinds()


def _any_task_kinds() -> str:
  """The kinds that serve any task's model (the encoder), for messages."""
  return " or ".join(f"'{kind}'" for kind in serving_module.serving_kinds()
                     if serving_module.serving_class(kind).serves_any_task)


def kind_of(task: task_base.Task, kind: str = AUTO) -> str:
  """The export kind of a task: its own (for 'auto' or that kind), or a kind serving any
  task's model ('encoder').

  Raises:
    ValueError: an unknown kind, 'auto' for a task without a serving export of its
      own, or another task's kind.
  """
  if kind not in kinds():
    raise errors.InputError(f"kind must be one of {', '.join(kinds())}, got '{kind}'")
  if kind != AUTO and serving_module.serving_class(kind).serves_any_task:
    return kind
  if not task.export_kind:
    exporting = sorted(name for name, cls in task_base.registered_tasks().items()
                       if cls.export_kind)
    raise errors.InputError(f"No serving export for task '{task.name}'; tasks with one: "
                     f"{', '.join(exporting)} (or kind {_any_task_kinds()})")
  if kind not in (AUTO, task.export_kind):
    raise errors.InputError(f"Task '{task.name}' exports as kind '{task.export_kind}' (or "
                     f"{_any_task_kinds()}), not '{kind}'")
  return task.export_kind


def build_serving_module(experiment: configs.ExperimentConfig, model, vocab_file: str,
                         kind: str = AUTO, lower_case: Optional[bool] = None,
                         seq_length: Optional[int] = None, **options):
  """Wraps a model in the ServingModule of its kind.

  Args:
    experiment: the experiment config the model was built from.
    model: the task's Keras model (for kind 'encoder', any model with an
      `encoder` attribute, or a BertEncoder).
    vocab_file: the WordPiece vocab the model was trained with (the experiment's
      tokenizer.vocab_file, or a copy of it).
    kind: one of kinds().
    lower_case: None takes the experiment's tokenizer.lower_case.
    seq_length: packed length T; None takes the data config's.
    **options: serving options replacing the task's (fill_mask: top_k, max_masks);
      None values are ignored.

  Returns:
    A ServingModule.
  """
  data = trained_model.data_config_for_export(experiment)
  lower_case = experiment.tokenizer.lower_case if lower_case is None else lower_case
  seq_length = trained_model.serving_seq_length(experiment, seq_length)
  tokenizer = BertWordPieceTokenizer(vocab_file, lower_case=lower_case)
  trained_model.check_vocab_size(experiment, tokenizer.vocab_size, vocab_file)
  text_encoder = text_encoding.TextEncoder(tokenizer, seq_length)
  task = task_base.get_task(experiment)
  return serving_module.serving_class(kind_of(task, kind)).from_task(
      task, model, text_encoder, data, **options)


def quantize(model, mode: str = INT8):
  """Quantizes every Dense layer of `model` in place, the encoder's included.

  Every mode stores each kernel [I, O] as int8 with one float32 scale per output
  channel (absmax / 127; int8_onednn: absmax / 63), and the word-embedding table [V, H] (also the tied masked-LM
  output layer's kernel) as int8 with one scale per row: each a quarter of its float32
  size. Position and segment embeddings, LayerNorm and biases stay float32. The modes
  differ in the Dense products:

  int8: the int8 kernel is cast to float32 at call time and the product is the
    float32 matmul, rescaled per output channel (weight-only quantization). It runs
    at float32 speed on CPUs: the cast touches I * O values, the product B * T * I * O.
  int8_dynamic (Keras's default int8 scheme): each row of the inputs is quantized to
    int8 with its own absmax scale and the product is an int8 x int8 matmul
    accumulating in int32 (BatchMatMulV3), rescaled to float. TensorFlow runs that
    product with its generic kernels, not oneDNN's, several times slower than the
    float32 matmul on CPUs (bench/README.md, *int8 exports*).
  int8_onednn: the kernels' int8 values in [-63, 63] (exact on CPUs without VNNI too);
    each row of the inputs is scaled by its absolute maximum, quantized to uint8 and
    multiplied by the int8 kernel in oneDNN's int8 matmul
    (bert_tf.export.int8_onednn), in TensorFlow builds with oneDNN (refused elsewhere).

  Args:
    mode: one of INT8_MODES; `serving_model` refuses a user's unknown mode.

  Returns:
    The model.

  Raises:
    KeyError: a mode not in INT8_MODES.
    ValueError: a Dense layer the quantization left in float.
  """
  # activation_quantizer=None leaves the inputs in float: Keras's int8 Dense then
  # multiplies them by the kernel cast to float (int8_onednn replaces that product).
  config = keras.quantizers.Int8QuantizationConfig(
      weight_quantizer=int8_onednn.weight_quantizer() if mode == INT8_ONEDNN else None,
      activation_quantizer={INT8: None, INT8_DYNAMIC: "default", INT8_ONEDNN: None}[mode])
  if mode == INT8_ONEDNN:
    int8_onednn.check_available()
  with warnings.catch_warnings():
    # Keras names every layer without weights to quantize (LayerNorm, Dropout, ...).
    warnings.filterwarnings("ignore", message=".*does not have a `quantize` method")
    model.quantize(config=config)
  layers = list(model._flatten_layers())  # pylint: disable=protected-access
  for layer in layers:
    if isinstance(layer, embeddings.BertEmbeddings):
      layer.quantize("int8")  # Keras's Model.quantize visits only leaf layers.
  left = [layer.path for layer in layers
          if isinstance(layer, keras.layers.Dense) and layer.quantization_mode != "int8"]
  if left:
    raise ValueError(f"Dense layers not quantized to int8: {left}")
  if mode == INT8_ONEDNN:
    for layer in layers:
      if isinstance(layer, keras.layers.Dense):
        int8_onednn.convert(layer)
  return model


def to_bfloat16(experiment: configs.ExperimentConfig, model):
  """The experiment's task model in Keras's 'bfloat16' dtype policy, with `model`'s
  weights rounded to bf16.

  Every variable the policy governs (Dense kernels and biases, the embedding tables)
  is bf16 and the products multiply in bf16; the LayerNorm layers are float32 layers
  (their statistics, scale and offset), the attention softmax and the residual sums
  before each LayerNorm are float32 (on TensorFlow's CPU path also the bias and GELU
  of the intermediate layer), and the outputs the models return (logits,
  sequence_output) are cast to float32, as under mixed_bfloat16 in training.

  Args:
    experiment: the experiment config `model` was built from.
    model: the float32 task model with its weights (restored, LoRA merged).

  Returns:
    A new Keras model of the same task; `model` is left as it is.

  Raises:
    ValueError: a variable of the bf16 model that `model` lacks, or has in another
      shape.
  """
  task = task_base.get_task(experiment)
  task.dtype_policy = keras.DTypePolicy(BFLOAT16)
  twin = task.build_model()
  # By path: a LoRA model keeps its (merged, unused) adapter variables, which the twin
  # lacks.
  sources = variables.variables_by_path(model)
  for variable in twin.weights:
    source = sources.get(variable.path)
    if source is None or tuple(source.shape) != tuple(variable.shape):
      raise ValueError(f"No weight of shape {tuple(variable.shape)} at {variable.path} in "
                       f"the model to convert to bf16")
    variable.assign(keras.ops.cast(source, variable.dtype))
  return twin


def serving_model(experiment: configs.ExperimentConfig, model,
                  quantize_mode: Optional[str] = None):
  """The model an export serves: `model` itself (quantize_mode None), quantized in
  place (an int8 mode, `quantize`), or its bf16 copy (`to_bfloat16`).

  Raises:
    InputError: an unknown quantize_mode.
  """
  if not quantize_mode:
    return model
  if quantize_mode == BFLOAT16:
    return to_bfloat16(experiment, model)
  if quantize_mode not in INT8_MODES:
    raise errors.InputError(f"quantize must be one of {', '.join(QUANTIZE_MODES)}, got "
                            f"'{quantize_mode}'")
  return quantize(model, quantize_mode)


def export_from_checkpoint(checkpoint: str, config, export_base: str,
                           vocab_file: Optional[str] = None, kind: str = AUTO,
                           version: Optional[int] = None,
                           quantize_mode: Optional[str] = None, **serving_args) -> str:
  """Restores a checkpoint and exports it for TF Serving.

  Args:
    checkpoint: checkpoint prefix or directory (trainer or converted checkpoint).
    config: ExperimentConfig or the path of its YAML (e.g. model_dir/params.yaml).
    export_base: base directory; the export goes to export_base/<version>/.
    vocab_file: None takes the experiment's tokenizer.vocab_file.
    kind: one of kinds().
    version: None takes the next free integer.
    quantize_mode: None (float32 weights) or one of QUANTIZE_MODES (`serving_model`).
    **serving_args: lower_case, seq_length and serving options (fill_mask: top_k,
      max_masks) for build_serving_module.

  Returns:
    The version directory written.
  """
  experiment = trained_model.load_experiment(config)
  vocab_file = trained_model.vocab_of(experiment, vocab_file,
                                      config if isinstance(config, str) else "the config")
  model = serving_model(experiment, trained_model.model_from_checkpoint(experiment, checkpoint),
                        quantize_mode)
  module = build_serving_module(experiment, model, vocab_file, kind=kind, **serving_args)
  return write_saved_model(module, export_base, version)

