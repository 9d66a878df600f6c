"""Request bodies for TF Serving's REST predict API, for every export signature.

TF Serving takes `{"signature_name": ..., "instances": [{name: value}, ...]}` (row
format) or `{"signature_name": ..., "inputs": {name: [values]}}` (columnar
format). String tensors take JSON strings (UTF-8 text) or `{"b64": base64}`
objects (any bytes: invalid UTF-8, serialized tf.Examples).
"""

import base64
import json
from typing import Dict, Mapping, Optional, Sequence

import tensorflow as tf

from bert_tf.export import serving_module
from bert_tf.utils import errors
from bert_tf.utils import files

FORMATS = ("instances", "inputs")


def json_value(value):
  """A Python value as TF Serving's JSON: bytes not valid UTF-8 become {"b64": ...}."""
  if isinstance(value, bytes):
    try:
      return value.decode("utf-8")
    except UnicodeDecodeError:
      return {"b64": base64.b64encode(value).decode("ascii")}
  if hasattr(value, "tolist"):
    return value.tolist()
  return value


def make_example(features: Mapping[str, object]) -> bytes:
  """A serialized tf.Example with one bytes feature per item (str is UTF-8 encoded)."""
  feature = {}
  for name, value in features.items():
    data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[data]))
  return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def make_body(columns: Mapping[str, Sequence], request_format: str = "instances",
              signature_name: Optional[str] = None) -> Dict:
  """Builds a REST predict body from per-input lists of equal length.

  Args:
    columns: {input name: list of B values} (str, bytes or nested lists of ints).
    request_format: "instances" (row) or "inputs" (columnar).
    signature_name: added as "signature_name" unless None.

  Returns:
    A JSON-serializable dict.
  """
  if request_format not in FORMATS:
    raise errors.InputError(f"request_format must be one of {FORMATS}, got '{request_format}'")
  lengths = {name: len(values) for name, values in columns.items()}
  if len(set(lengths.values())) > 1:
    raise errors.InputError(f"Every input needs the same number of values, got {lengths}")
  body = {}
  if signature_name:
    body["signature_name"] = signature_name
  if request_format == "inputs":
    body["inputs"] = {name: [json_value(v) for v in values] for name, values in columns.items()}
  else:
    count = next(iter(lengths.values()), 0)
    body["instances"] = [{name: json_value(values[i]) for name, values in columns.items()}
                         for i in range(count)]
  return body


def signature_columns(signature: str, texts: Mapping[str, Sequence[str]],
                      text_encoder=None) -> Dict[str, list]:
  """The inputs of one signature from raw texts.

  Args:
    signature: serving_default, serve_token_ids or serve_examples.
    texts: {raw-text input name (text, text_b, question, context): list of str}.
    text_encoder: a TextEncoder or a ServingModule (anything with `encode_text`
      or `encode`); needed for serve_token_ids, where the client tokenizes.

  Returns:
    {input name: list of B values} for `make_body`.
  """
  names = list(texts)
  count = len(texts[names[0]]) if names else 0
  if signature == serving_module.SERVING_DEFAULT:
    return {name: list(values) for name, values in texts.items()}
  if signature == serving_module.SERVE_EXAMPLES:
    return {serving_module.EXAMPLES_INPUT: [
        make_example({name: texts[name][i] for name in names}) for i in range(count)]}
  if signature == serving_module.SERVE_TOKEN_IDS:
    if text_encoder is None:
      raise errors.InputError("serve_token_ids needs a text encoder (vocab) to tokenize")
    tensors = {name: tf.constant(texts[name]) for name in names}
    if hasattr(text_encoder, "encode_text"):
      inputs = text_encoder.encode_text(tensors)
    else:
      inputs = text_encoder.encode(*tensors.values())
    return {name: value.numpy().tolist() for name, value in inputs.items()}
  raise errors.InputError(
      f"Unknown signature '{signature}'; one of {serving_module.SIGNATURE_NAMES}")


def write_body(body: Dict, path: str) -> None:
  """Writes a body as JSON, atomically."""
  with files.atomic_open(path) as f:
    json.dump(body, f, ensure_ascii=False)
