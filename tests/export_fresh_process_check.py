"""Loads an export in a fresh process holding only TensorFlow and three text ops.

The process does not import tensorflow_text (which would register every one of
its ops): it loads, with `tf.load_op_library`, only the op libraries that define
the three tensorflow-text ops exports may use (NormalizeUTF8,
RegexSplitWithOffsets, WordpieceTokenizeWithOffsets; see
bert_tf/text/serving_ops.py), so an export that needs any other
tensorflow-text op fails to load here.

Usage: python tests/export_fresh_process_check.py PLAN.json RESULT.json [PLAN RESULT ...]

PLAN holds the SavedModel directory, calls (signature, inputs, expected outputs
computed in the exporting process) and REST request bodies. For each call the
signature's outputs are compared with the expected ones (floats within 1e-5,
everything else exactly); each REST body is turned into tensors the way TF
Serving's JSON API does (JSON strings are UTF-8 text, {"b64": ...} is raw bytes,
numbers take the signature's dtype; row format "instances" or columnar "inputs")
and the signature it names is called with them. RESULT records what happened;
the test asserts on it. The script imports nothing from bert_tf.
"""

import base64
import importlib.util
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top

# The op libraries of tensorflow_text/python/ops defining the allowed ops; each
# also registers the few sibling ops built into the same library.
OP_LIBRARIES = ("_normalize_ops.so", "_regex_split_ops.so", "_wordpiece_tokenizer.so")


def load_allowed_text_ops():
  """Loads OP_LIBRARIES from the installed tensorflow_text, without importing it."""
  spec = importlib.util.find_spec("tensorflow_text")
  ops_dir = os.path.join(os.path.dirname(spec.origin), "python", "ops")
  for name in OP_LIBRARIES:
    tf.load_op_library(os.path.join(ops_dir, name))


def decode_array(encoded):
  """{"dtype", "shape", "data" | "b64"} -> numpy array."""
  if encoded["dtype"] == "string":
    flat = [base64.b64decode(v) for v in encoded["b64"]]
    return np.array(flat, dtype=object).reshape(encoded["shape"])
  return np.array(encoded["data"], dtype=encoded["dtype"]).reshape(encoded["shape"])


def json_to_tensor_value(value):
  """TF Serving's JSON value decoding: {"b64": s} -> bytes, str -> UTF-8 bytes."""
  if isinstance(value, dict):
    if set(value) != {"b64"}:
      raise ValueError(f"Only {{'b64': ...}} objects are values, got keys {sorted(value)}")
    return base64.b64decode(value["b64"])
  if isinstance(value, str):
    return value.encode("utf-8")
  if isinstance(value, list):
    return [json_to_tensor_value(v) for v in value]
  return value


def body_to_tensors(body, signature):
  """Parses a REST predict body into the signature's named input tensors."""
  specs = signature.structured_input_signature[1]
  if ("instances" in body) == ("inputs" in body):
    raise ValueError("A body holds exactly one of 'instances' and 'inputs'")
  if "instances" in body:
    rows = body["instances"]
    if not all(isinstance(row, dict) for row in rows):
      raise ValueError("Row format with several inputs needs an object per instance")
    names = set(rows[0]) if rows else set()
    if any(set(row) != names for row in rows):
      raise ValueError("Every instance must name the same inputs")
    columns = {name: [row[name] for row in rows] for name in names}
  else:
    columns = body["inputs"]
  if set(columns) != set(specs):
    raise ValueError(f"Inputs {sorted(columns)} do not match the signature's {sorted(specs)}")
  tensors = {}
  for name, values in columns.items():
    spec = specs[name]
    tensor = tf.constant(json_to_tensor_value(values), dtype=spec.dtype)
    if not spec.shape.is_compatible_with(tensor.shape):
      raise ValueError(f"Input {name}: shape {tensor.shape} does not fit {spec.shape}")
    tensors[name] = tensor
  return tensors


def compare(actual, expected):
  """(ok, max abs difference or mismatch note) of one output."""
  actual = np.asarray(actual)
  if actual.shape != expected.shape:
    return False, f"shape {actual.shape} != {expected.shape}"
  if expected.dtype.kind == "f":
    diff = float(np.max(np.abs(actual - expected))) if actual.size else 0.0
    return diff <= 1e-5, diff
  return bool(np.array_equal(actual, expected)), 0.0


def main(plan_path, result_path):
  with open(plan_path, encoding="utf-8") as f:
    plan = json.load(f)
  modules = sorted(m for m in sys.modules if m.split(".")[0] in ("bert_tf", "tensorflow_text"))
  try:
    loaded = tf.saved_model.load(plan["export_dir"])
  except Exception as e:  # pylint: disable=broad-except
    with open(result_path, "w", encoding="utf-8") as f:
      json.dump({"load_error": f"{type(e).__name__}: {e}", "modules": modules}, f)
    return
  result = {"signatures": sorted(loaded.signatures.keys()), "calls": [], "rest": [],
            "modules": modules}
  for call in plan.get("calls", []):
    signature = loaded.signatures[call["signature"]]
    inputs = {name: tf.constant(decode_array(v)) for name, v in call["inputs"].items()}
    outputs = signature(**inputs)
    report = {"signature": call["signature"], "outputs": {}}
    for name, encoded in call["expected"].items():
      ok, note = compare(outputs[name].numpy(), decode_array(encoded))
      report["outputs"][name] = {"ok": ok, "note": note}
    report["output_names"] = sorted(outputs)
    result["calls"].append(report)
  for request in plan.get("rest", []):
    body = request["body"]
    name = body.get("signature_name", "serving_default")
    entry = {"signature": name, "format": "instances" if "instances" in body else "inputs"}
    try:
      tensors = body_to_tensors(body, loaded.signatures[name])
      outputs = loaded.signatures[name](**tensors)
      entry["ok"] = True
      entry["batch"] = {k: int(v.shape[0]) for k, v in outputs.items()}
    except Exception as e:  # pylint: disable=broad-except
      entry["ok"] = False
      entry["error"] = f"{type(e).__name__}: {e}"
    result["rest"].append(entry)
  result["modules"] = sorted(m for m in sys.modules
                             if m.split(".")[0] in ("bert_tf", "tensorflow_text"))
  with open(result_path, "w", encoding="utf-8") as f:
    json.dump(result, f)


if __name__ == "__main__":
  load_allowed_text_ops()
  for i in range(1, len(sys.argv) - 1, 2):
    main(sys.argv[i], sys.argv[i + 1])
