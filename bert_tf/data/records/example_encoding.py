"""Serialized `tf.train.Example` protos from numpy arrays, a whole batch at once.

The wire format of Example{Features{map<string, Feature>}} is fixed, so a batch is
encoded with numpy, with no Python loop per value: every record is the same sequence of
segments (constant tags and keys, varint lengths, payloads). Each segment is laid out as a
padded [N, width] byte matrix with a validity mask, the segments side by side, and the
valid bytes taken in row-major order are the records one after the other. The bytes are
those the protobuf library writes (packed repeated fields).
"""

from typing import Dict, List

import numpy as np

# Varints of values below this are looked up in a table of every value's bytes rather than
# computed (token ids: a small range, each value repeated many times).
_VARINT_TABLE_LIMIT = 1 << 21


def _varint_sizes(values: np.ndarray) -> np.ndarray:
  """Bytes of the varint encoding of each non-negative value (int64 array)."""
  v = np.asarray(values, dtype=np.uint64)
  sizes = np.ones(v.shape, dtype=np.int64)
  largest = int(v.max(initial=0))
  for shift in range(7, 64, 7):
    if largest < (1 << shift):
      break
    sizes += v >= np.uint64(1 << shift)
  return sizes


def _varint_columns(values: np.ndarray, width: int):
  """Varint bytes of a flat array of non-negative ints, one row per value.

  Args:
    values: int array [M], all in [0, 2**63).
    width: columns, at least the longest encoding's size.

  Returns:
    (bytes uint8 [M, width], valid bool [M, width]): value i is bytes[i][valid[i]].
  """
  v = np.asarray(values)
  v = v.astype(np.uint32) if width <= 4 else v.astype(np.uint64)
  sizes = _varint_sizes(v)
  k = np.arange(width)
  byte = ((v[:, None] >> (7 * k).astype(v.dtype)[None, :]) & v.dtype.type(0x7F)).astype(
      np.uint8)
  # Every byte but a value's last has the continuation bit.
  byte |= np.where(k[None, :] < sizes[:, None] - 1, np.uint8(0x80), np.uint8(0))
  return byte, k[None, :] < sizes[:, None]


def _padded_varint_rows(values: np.ndarray):
  """Varint-encodes each row of non-negative ints, padded to a common width.

  Args:
    values: int array [N, L], all in [0, 2**63).

  Returns:
    (bytes uint8 [N, L * W], valid bool [N, L * W] or None when every byte is valid,
    row payload lengths int64 [N]); row i's packed payload is bytes[i][valid[i]].
  """
  v = np.asarray(values)
  n, length = v.shape
  largest = int(v.max(initial=0))
  if v.size and int(v.min()) < 0:
    raise ValueError("varint encoding takes non-negative values")
  if largest >= (1 << 63):
    raise ValueError("varint encoding takes values below 2**63")
  if largest < 0x80:
    # One byte each: masks, segment ids, positions and labels.
    return v.astype(np.uint8), None, np.full(n, length, dtype=np.int64)
  if largest < _VARINT_TABLE_LIMIT and v.size > 4 * largest:
    # Up to 3 bytes and their validity, packed in one uint32 per table entry, so the
    # gather moves words, not rows.
    table_bytes, table_valid = _varint_columns(np.arange(largest + 1), 4)
    flat = v.ravel()
    byte = np.take(table_bytes.view(np.uint32).ravel(), flat).view(np.uint8)
    valid = np.take(table_valid.view(np.uint32).ravel(), flat).view(np.bool_)
    width = 4
  else:
    width = int(_varint_sizes(largest))
    byte, valid = _varint_columns(v.ravel(), width)
  byte = byte.reshape(n, length * width)
  valid = valid.reshape(n, length * width)
  return byte, valid, valid.sum(axis=1, dtype=np.int64)


def serialize_examples(features: Dict[str, np.ndarray]) -> List[bytes]:
  """Encodes N rows of int64 and float features as serialized tf.train.Example protos.

  Args:
    features: name -> array [N, L] (or [N] for length-1 features). Float arrays become
      FloatList features, integer arrays (values >= 0) Int64List features.

  Returns:
    list of N serialized tf.train.Example byte strings (packed repeated fields, as the
    protobuf library writes them).
  """
  names, payloads, tags = [], [], []
  n = None
  for name, array in features.items():
    array = np.asarray(array)
    if array.ndim == 1:
      array = array[:, None]
    n = array.shape[0] if n is None else n
    if array.shape[0] != n:
      raise ValueError(f"Feature {name} has {array.shape[0]} rows, expected {n}")
    if np.issubdtype(array.dtype, np.floating):
      data = np.ascontiguousarray(array, dtype="<f4").view(np.uint8).reshape(n, -1)
      payloads.append((data, None, np.full(n, data.shape[1], dtype=np.int64)))
      tags.append(b"\x12")  # Feature.float_list
    else:
      try:
        payloads.append(_padded_varint_rows(array))
      except ValueError as e:
        raise ValueError(f"Feature {name}: {e}") from None
      tags.append(b"\x1a")  # Feature.int64_list
    names.append(name)
  if not n:
    return []
  keys = [name.encode("utf-8") for name in names]
  for key in keys:
    if len(key) >= 128:
      raise ValueError(f"Feature name too long: {key!r}")
  # Lengths, from the payload out: packed list, Feature, map entry, map item, body.
  payload_len = np.stack([p[2] for p in payloads], axis=1)  # [N, F]
  packed_len = 1 + _varint_sizes(payload_len) + payload_len
  feature_len = 1 + _varint_sizes(packed_len) + packed_len
  key_prefix_len = np.array([2 + len(k) for k in keys], dtype=np.int64)  # 0x0a len key
  entry_len = key_prefix_len + 1 + _varint_sizes(feature_len) + feature_len
  item_len = 1 + _varint_sizes(entry_len) + entry_len
  body_len = item_len.sum(axis=1)

  def constant(raw):
    return np.broadcast_to(np.frombuffer(raw, dtype=np.uint8), (n, len(raw))), None

  def varint(column):
    byte, valid, _ = _padded_varint_rows(column[:, None])
    return byte, valid

  segments = [constant(b"\x0a"), varint(body_len)]  # Example.features
  for f, (key, tag) in enumerate(zip(keys, tags)):
    segments += [constant(b"\x0a"), varint(entry_len[:, f]),  # Features.feature entry
                 constant(b"\x0a" + bytes([len(key)]) + key + b"\x12"),  # key, value tag
                 varint(feature_len[:, f]), constant(tag), varint(packed_len[:, f]),
                 constant(b"\x0a"), varint(payload_len[:, f]),  # packed `value` field
                 payloads[f][:2]]
  data = np.concatenate([s[0] for s in segments], axis=1)
  if all(s[1] is None for s in segments):
    row_lengths = np.full(n, data.shape[1], dtype=np.int64)
    flat = data.tobytes()
  else:
    valid = np.concatenate([np.ones(s[0].shape, dtype=bool) if s[1] is None else s[1]
                            for s in segments], axis=1)
    row_lengths = valid.sum(axis=1, dtype=np.int64)
    flat = data[valid].tobytes()
  ends = np.cumsum(row_lengths).tolist()
  starts = [0] + ends[:-1]
  return [flat[a:b] for a, b in zip(starts, ends)]
