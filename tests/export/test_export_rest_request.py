"""TF Serving REST request bodies."""

import base64

import pytest
import tensorflow as tf

from bert_tf.export import rest_request


def test_row_and_columnar_formats_hold_the_same_values():
  columns = {"text": ["a", "b"], "text_b": ["c", "d"]}
  rows = rest_request.make_body(columns, "instances", "serving_default")
  cols = rest_request.make_body(columns, "inputs")
  assert rows == {"signature_name": "serving_default",
                  "instances": [{"text": "a", "text_b": "c"}, {"text": "b", "text_b": "d"}]}
  assert cols == {"inputs": {"text": ["a", "b"], "text_b": ["c", "d"]}}


def test_invalid_utf8_bytes_are_sent_as_b64():
  body = rest_request.make_body({"text": [b"ok", b"\xff\xfe"]}, "inputs")
  assert body["inputs"]["text"] == ["ok", {"b64": base64.b64encode(b"\xff\xfe").decode()}]


def test_examples_column_holds_parseable_tf_examples():
  columns = rest_request.signature_columns("serve_examples", {"question": ["q"],
                                                              "context": ["c é"]})
  parsed = tf.io.parse_single_example(columns["examples"][0], {
      "question": tf.io.FixedLenFeature([], tf.string),
      "context": tf.io.FixedLenFeature([], tf.string)})
  assert parsed["context"].numpy().decode("utf-8") == "c é"


def test_unequal_input_lengths_are_an_error():
  with pytest.raises(ValueError, match="same number"):
    rest_request.make_body({"text": ["a"], "text_b": ["b", "c"]})
