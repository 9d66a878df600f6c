"""Damaged and crafted portable checkpoints (bert_tf.checkpoints.portable) of each
engine's layout: random single-bit flips over whole files, truncations and crafted
shapes end in the damaged-checkpoint error family or in a clean read of equal arrays,
never in a traceback, and never cost more memory than the file's size."""

import os
import tracemalloc

import h5py
import numpy as np
import pytest

import checkpoint_helpers
from bert_tf.checkpoints import array_io
from bert_tf.checkpoints import portable
from bert_tf.checkpoints import snapshots

# Of a file of some 240 KB: flips over the whole file, and as many again over its
# metadata (the bytes outside the arrays' data), where a flip is a harder case.
FLIPS = 75
# What one read may allocate beyond the file's size (h5py's and the checks' own),
# where tracemalloc follows a read.
SLACK_BYTES = 1 << 20
# Each engine's random states (Keras's random_seed_dtype).
SEED_DTYPES = {"tensorflow": np.int64, "jax": np.uint32}


def _checkpoint(directory, backend):
  """A trainer checkpoint of a tiny pretrainer, written as `backend`'s engine writes it
  (optimizer state, random states, step and input position included)."""
  model = checkpoint_helpers.tiny_model()
  rng = np.random.default_rng(1)
  optimizer = {"count": np.asarray(3, np.int64), "loss_scale/scale": np.float32(2.0**15)}
  for variable in model.trainable_variables[:4]:
    for slot in ("m", "v"):
      optimizer[f"{slot}/{variable.path}"] = rng.standard_normal(variable.shape).astype(
          np.float32)
  seeds = [np.asarray([7, i], SEED_DTYPES[backend]) for i in range(2)]
  content = snapshots.snapshot(model.checkpoint_items, optimizer, step=3,
                              random_state=seeds, backend=backend,
                              position={"batches_read": 3, "global_batch_size": 8})
  return portable.write(portable.path_for_step(str(directory), 3), content)


def _data_ranges(path):
  """The (start, end) of each array's bytes in the file."""
  with h5py.File(path, "r") as f:
    ranges = []
    def add(_, node):
      if isinstance(node, h5py.Dataset) and node.id.get_offset() is not None:
        ranges.append((node.id.get_offset(), node.id.get_offset() + node.id.get_storage_size()))
    f.visititems(add)
  return ranges


def _outcome(path, expected):
  """'damaged' where reading `path` raises the damaged-checkpoint family, 'equal' where
  it reads arrays equal to `expected`; what else happened otherwise. Where tracemalloc
  runs, the peak memory traced while reading must stay within the file's size."""
  traced = tracemalloc.is_tracing()
  if traced:
    tracemalloc.reset_peak()
    start = tracemalloc.get_traced_memory()[0]
  try:
    portable.is_portable(path)
    read = portable.read(path).arrays
    outcome = "equal" if read.keys() == expected.keys() and all(
        read[k].dtype == v.dtype and np.array_equal(read[k], v) for k, v in expected.items()
    ) else "read other arrays"
  except portable.PortableCheckpointError:
    outcome = "damaged"
  except Exception as e:  # pylint: disable=broad-except
    outcome = f"{type(e).__name__}: {e}"
  peak = tracemalloc.get_traced_memory()[1] - start if traced else 0
  if peak > os.path.getsize(path) + SLACK_BYTES:
    outcome = f"allocated {peak} bytes ({outcome})"
  return outcome


def _allocations(monkeypatch):
  """The bytes of each array the readers allocate from now on (array_io._allocate)."""
  sizes = []
  allocate = array_io._allocate  # pylint: disable=protected-access
  def recorded(shape, dtype, aligned=False):
    sizes.append(int(np.prod(shape, dtype=object)) * np.dtype(dtype).itemsize)
    return allocate(shape, dtype, aligned)
  monkeypatch.setattr(array_io, "_allocate", recorded)
  return sizes


@pytest.fixture(name="traced")
def _traced():
  """tracemalloc follows the test's reads (_outcome)."""
  tracemalloc.start()
  yield
  tracemalloc.stop()


@pytest.mark.parametrize("backend", sorted(SEED_DTYPES))
def test_a_flipped_bit_anywhere_is_damage_or_an_equal_read_in_bounded_memory(
    tmp_path, monkeypatch, backend):
  # Arrays over 4 KiB through the file's bytes, as the large ones of a real model.
  monkeypatch.setattr(array_io, "LARGE_BYTES", 4096)
  path = _checkpoint(tmp_path, backend)
  expected = portable.read(path).arrays
  allocated = _allocations(monkeypatch)
  with open(path, "rb") as f:
    original = f.read()
  in_data = np.zeros(len(original), bool)
  for start, end in _data_ranges(path):
    in_data[start:end] = True
  rng = np.random.default_rng(sum(map(ord, backend)))
  offsets = np.concatenate([rng.integers(0, len(original), FLIPS),
                            rng.choice(np.flatnonzero(~in_data), FLIPS)])
  failures = {}
  for offset in offsets:
    bit = int(rng.integers(8))
    damaged = bytearray(original)
    damaged[offset] ^= 1 << bit
    with open(path, "wb") as f:
      f.write(damaged)
    allocated.clear()
    outcome = _outcome(path, expected)
    if sum(allocated) > len(original):
      outcome = f"allocated {sum(allocated)} bytes ({outcome})"
    if outcome not in ("damaged", "equal"):
      failures[(int(offset), bit)] = outcome
  assert not failures


@pytest.mark.usefixtures("traced")
def test_a_file_cut_short_anywhere_is_damage(tmp_path):
  path = _checkpoint(tmp_path, "jax")
  expected = portable.read(path).arrays
  with open(path, "rb") as f:
    original = f.read()
  failures = {}
  for length in np.random.default_rng(0).integers(0, len(original), 40):
    with open(path, "wb") as f:
      f.write(original[:length])
    outcome = _outcome(path, expected)
    if outcome != "damaged":
      failures[int(length)] = outcome
  assert not failures


@pytest.mark.usefixtures("traced")
@pytest.mark.parametrize("version", [4, portable.VERSION])
def test_a_crafted_terabyte_shape_is_damage_before_any_allocation(tmp_path, version):
  path = _checkpoint(tmp_path, "tensorflow")
  expected = portable.read(path).arrays
  if version == 4:
    checkpoint_helpers.rewrite_as_version_4(path)
  name = "items/encoder/embeddings/word_embeddings"
  with h5py.File(path, "r+") as f:  # 2^31 x 128 floats declared, a few bytes stored
    del f[name]
    f.create_dataset(name, shape=(2**31, 128), dtype=np.float32, chunks=(1, 128))
  assert _outcome(path, expected) == "damaged"


def test_a_damaged_global_heap_is_never_read_from_a_version_5_file(tmp_path):
  # HDF5 keeps the string attributes in the file's global heap, whose damage can stall
  # HDF5 itself (a collection claiming a terabyte): a version 5 reader reads none.
  path = _checkpoint(tmp_path, "jax")
  expected = portable.read(path).arrays
  with open(path, "r+b") as f:
    data = f.read()
    collection = data.index(b"GCOL")
    f.seek(collection + 8)  # the collection's size
    f.write((1 << 40).to_bytes(8, "little"))
  assert portable.is_portable(path)
  assert _outcome(path, expected) == "equal"
