"""The base of every exported model: one tf.Module, three serving signatures.

A `ServingModule` holds a Keras model and a `TextEncoder` and defines

* `serving_default`: raw UTF-8 strings in, named by `text_inputs` (`text`;
  `text`, `text_b`; or `question`, `context`), tokenized and packed in the graph;
* `serve_token_ids`: `input_word_ids`, `input_mask`, `input_type_ids` (int32
  [B, T], or `token_ids_shape`) in, for clients that tokenize themselves;
* `serve_examples`: serialized `tf.Example`s in (input `examples`, string [B]),
  with bytes features named like `serving_default`'s inputs.

Subclasses define `predict_token_ids` (dense inputs -> dict of dense outputs)
and, where the answer refers to the text (spans, entities), `predict_text`.

Each subclass that serves a kind of export registers itself with
`@register_serving(kind)`: a task's `export_kind` names the class, and its
`serving_options(data_config)` are the class's keyword arguments after
`(model, text_encoder)`. The class is the whole kind: how it is built for a task
(`from_task`), which outputs tell an export of it (`answer_outputs`) and how
`bert-tf-query` reads and prints its answers (`answer`, `describe_answer`).
`bert_tf.export.kinds` loads every `*_serving` module of this package, so a new
kind is one such module.
"""

from typing import Any, Callable, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from bert_tf import constants

SERVING_DEFAULT = "serving_default"
SERVE_TOKEN_IDS = "serve_token_ids"
SERVE_EXAMPLES = "serve_examples"
SIGNATURE_NAMES = (SERVING_DEFAULT, SERVE_TOKEN_IDS, SERVE_EXAMPLES)
EXAMPLES_INPUT = "examples"

TEXT = "text"
TEXT_B = "text_b"
QUESTION = "question"
CONTEXT = "context"

# The one mapping of export kinds to the ServingModule classes that serve them.
_SERVING_CLASSES: Dict[str, type] = {}


def register_serving(kind: str) -> Callable[[type], type]:
  """Class decorator: the ServingModule subclass serving exports of `kind`."""

  def decorator(cls):
    if kind in _SERVING_CLASSES and _SERVING_CLASSES[kind] is not cls:
      raise ValueError(f"Serving kind '{kind}' registered twice")
    cls.kind = kind
    _SERVING_CLASSES[kind] = cls
    return cls

  return decorator


def unregister_serving(kind: str) -> Optional[type]:
  """Removes the class registered for `kind` (a test's own kind); returns it, or None."""
  return _SERVING_CLASSES.pop(kind, None)


def given_options(options: Mapping[str, Any]) -> Dict[str, Any]:
  """The serving options a caller gave: those not None."""
  return {name: value for name, value in options.items() if value is not None}


def serving_kinds() -> Tuple[str, ...]:
  """The registered kinds of export, sorted."""
  return tuple(sorted(_SERVING_CLASSES))


def serving_class(kind: str) -> type:
  """The ServingModule subclass registered for `kind` (KeyError naming the kinds)."""
  if kind not in _SERVING_CLASSES:
    raise KeyError(f"No serving module for kind '{kind}'; kinds: {', '.join(serving_kinds())}")
  return _SERVING_CLASSES[kind]


def text_of(value) -> str:
  """A string output's element (bytes) as text, for answers."""
  return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class ServingModule(tf.Module):
  """A model plus in-graph text encoding, exported with three signatures."""

  # Set by register_serving.
  kind: str = ""
  # Whether the kind serves a model of any task (the encoder), besides the tasks whose
  # export_kind it is.
  serves_any_task: bool = False
  # The outputs of serving_default that `answer` reads, one set per form the kind
  # answers in (a classifier: with label names, or a regressor's score). An export is
  # of the kind with a form among its outputs, the largest such form deciding.
  answer_outputs: Tuple[FrozenSet[str], ...] = ()

  def __init__(self, model, text_encoder, text_inputs: Sequence[str] = (TEXT,), name=None):
    """Args:
      model: the Keras model (dict of int32 [B, T] encoder inputs in).
      text_encoder: a `bert_tf.export.text_encoding.TextEncoder`.
      text_inputs: names of the raw-text inputs of `serving_default`.
    """
    super().__init__(name=name)
    self.model = model
    self.text_encoder = text_encoder
    self.text_inputs = tuple(text_inputs)
    self.seq_length = text_encoder.seq_length
    # serve_token_ids' input shape; [B, T] unless a subclass packs more per row.
    self.token_ids_shape = (None, None)

  # ----- the kind: building for a task, and its answers -----
  @classmethod
  def from_task(cls, task, model, text_encoder, data_config, **options) -> "ServingModule":
    """The module serving `model`, the model of `task` (bert_tf.tasks.base.Task): the
    class's keyword arguments are the task's `serving_options(data_config)`, replaced
    by the non-None `options`."""
    arguments = dict(task.serving_options(data_config))
    arguments.update(given_options(options))
    return cls(model, text_encoder, **arguments)

  @staticmethod
  def answer(outputs: Mapping[str, np.ndarray], row: int) -> Dict[str, Any]:
    """The answer of one row, as JSON-ready fields, from serving_default's outputs of a
    batch ({name: array [B, ...]})."""
    raise NotImplementedError

  @staticmethod
  def describe_answer(answer: Mapping[str, Any]) -> List[str]:
    """Readable lines of an `answer` (indented two spaces), below its texts' line."""
    raise NotImplementedError

  # ----- what subclasses define -----
  def predict_token_ids(self, inputs: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """Dense int32 [B, T] encoder inputs -> dict of dense output tensors."""
    raise NotImplementedError

  def encode_text(self, texts: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """{name: tf.string [B]} for each of `text_inputs` -> int32 [B, T] encoder inputs.

    What `serving_default` feeds the model; a client tokenizing for
    `serve_token_ids` must produce the same ids.
    """
    return self.text_encoder.encode(*[texts[name] for name in self.text_inputs])

  def predict_text(self, texts: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """{name: tf.string [B]} for each of `text_inputs` -> dict of dense outputs."""
    return self.predict_token_ids(self.encode_text(texts))

  # ----- the signatures -----
  def parse_examples(self, serialized):
    """Serialized tf.Examples [B] -> {name: tf.string [B]} (missing features: "")."""
    spec = {name: tf.io.FixedLenFeature([], tf.string, default_value="")
            for name in self.text_inputs}
    return tf.io.parse_example(serialized, spec)

  def token_ids_signature(self) -> tf.types.experimental.ConcreteFunction:
    """serve_token_ids as a concrete function: batches of any size, rows of any
    length up to seq_length."""
    ids_spec = {name: tf.TensorSpec(self.token_ids_shape, tf.int32, name=name)
                for name in constants.ENCODER_INPUTS}
    # The graphs have no data-dependent Python control flow to convert.
    return tf.function(self.predict_token_ids, autograph=False).get_concrete_function(ids_spec)

  def signatures(self) -> Dict[str, tf.types.experimental.ConcreteFunction]:
    """The three signatures as concrete functions, keyed by signature name."""
    text_spec = {name: tf.TensorSpec([None], tf.string, name=name) for name in self.text_inputs}
    examples_spec = tf.TensorSpec([None], tf.string, name=EXAMPLES_INPUT)
    text_fn = tf.function(self.predict_text, autograph=False)
    examples_fn = tf.function(
        lambda examples: self.predict_text(self.parse_examples(examples)), autograph=False)
    return {
        SERVING_DEFAULT: text_fn.get_concrete_function(text_spec),
        SERVE_TOKEN_IDS: self.token_ids_signature(),
        SERVE_EXAMPLES: examples_fn.get_concrete_function(examples_spec),
    }

  def call_model(self, inputs):
    """Runs the Keras model in inference mode on dense int32 inputs."""
    inputs = {name: tf.cast(inputs[name], tf.int32) for name in constants.ENCODER_INPUTS}
    return self.model(inputs, training=False)
