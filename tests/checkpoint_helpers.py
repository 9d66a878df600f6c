"""A tiny BERT with random weights for the checkpoint tests (tests/checkpoints/ and the
tool's end-to-end test): every bias and LayerNorm parameter random too, so that any
swapped or untransposed tensor changes the outputs."""

import numpy as np

from bert_tf import constants
from bert_tf.configs import EncoderConfig
from bert_tf.models.bert_classifier import BertClassifier
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.bert_pretrainer import BertPretrainer
from bert_tf.models.bert_span_labeler import BertSpanLabeler
from bert_tf.models.bert_token_classifier import BertTokenClassifier

# Distinct sizes everywhere, so that a tensor in the wrong slot cannot fit by chance.
TINY = EncoderConfig(vocab_size=99, hidden_size=32, num_layers=2, num_attention_heads=4,
                     intermediate_size=48, max_position_embeddings=130, type_vocab_size=2,
                     dropout_rate=0.0, attention_dropout_rate=0.0)


def randomize(model, seed=0):
  """Assigns every variable of a Keras `model` a random value (LayerNorm scales near 1)."""
  rng = np.random.default_rng(seed)
  for variable in model.weights:
    shape = tuple(variable.shape)
    if variable.path.endswith("gamma"):
      value = 1.0 + 0.2 * rng.standard_normal(shape)
    elif len(shape) == 1:
      value = 0.1 * rng.standard_normal(shape)
    else:
      value = 0.3 * rng.standard_normal(shape)
    variable.assign(value.astype(np.float32))


def tiny_model(heads=True, nsp=True, seed=0):
  encoder = BertEncoder.from_config_object(TINY)
  model = BertPretrainer(encoder, use_next_sentence_label=nsp) if heads else encoder
  randomize(model, seed)
  return model


def tiny_task_model(head, num_classes=3, seed=0):
  """A random task model over TINY: head "classifier", "tagger" or "span_labeler"."""
  encoder = BertEncoder.from_config_object(TINY)
  model = {"classifier": lambda: BertClassifier(encoder, num_classes, dropout_rate=0.0),
           "tagger": lambda: BertTokenClassifier(encoder, num_classes, dropout_rate=0.0),
           "span_labeler": lambda: BertSpanLabeler(encoder)}[head]()
  randomize(model, seed)
  return model


def write_vocab(path, size):
  tokens = list(constants.SPECIAL_TOKENS) + [f"tok{i}" for i in range(size - 5)]
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(tokens) + "\n")
  return str(path)


def token_batch(seed=0, batch=3, length=11, choices=None):
  """Token ids, mask (padding at the end of two rows) and segment ids, int32
  [batch, length] (or [batch, choices, length]), over TINY's vocab."""
  rng = np.random.default_rng(seed)
  shape = (batch,) + ((choices,) if choices else ()) + (length,)
  ids = rng.integers(5, TINY.vocab_size, size=shape).astype(np.int32)
  mask = np.ones(shape, np.int32)
  mask[1, ..., 7:] = 0
  mask[2, ..., 4:] = 0
  types = np.zeros(shape, np.int32)
  types[..., 5:] = 1
  return {constants.INPUT_WORD_IDS: ids * mask, constants.INPUT_MASK: mask,
          constants.INPUT_TYPE_IDS: types * mask}


def rewrite_as_version_2(path):
  """Rewrites the portable checkpoint at `path` as version 2 wrote it: no checksums,
  each shared variable stored under each item, the step an attribute, no input position
  (version 2 kept it beside the file)."""
  import h5py  # pylint: disable=g-import-not-at-top
  from bert_tf.checkpoints import portable  # pylint: disable=g-import-not-at-top
  content = portable.read(path)
  with h5py.File(path, "w") as f:
    f.attrs.update({key: value for key, value in content.attrs.items()
                    if key != "optimizer_paths"})
    f.attrs["version"] = 2
    if content.step is not None:
      f.attrs["step"] = content.step
    for group in ("items", "optimizer", "random_state"):
      f.create_group(group)
    for name, value in content.arrays.items():
      if name == "step" or name.startswith("input/"):
        continue
      stored = value.view(np.uint16) if str(value.dtype) == "bfloat16" else value
      f.create_dataset(name, data=stored).attrs["dtype"] = str(value.dtype)


def _unlisted(f):
  """{array name: CRC32C} of the file `f` (open for writing) from its manifest, which
  it deletes: the files of versions before 5 have none."""
  import json  # pylint: disable=g-import-not-at-top
  from bert_tf.checkpoints import manifest  # pylint: disable=g-import-not-at-top
  record = json.loads(f[manifest.MANIFEST][()].tobytes())
  crcs = {name: entry["crc32c"] for name, entry in record["arrays"].items()}
  crcs.update((name, crcs[target]) for name, target in record["links"].items())
  del f[manifest.MANIFEST]
  del f.attrs[manifest.MANIFEST_CRC]
  return crcs


def rewrite_as_version_4(path):
  """Rewrites the portable checkpoint at `path` in place as version 4 kept its
  checksums: no manifest, every CRC32C in a table (array_io.TABLE)."""
  import h5py  # pylint: disable=g-import-not-at-top
  from bert_tf.checkpoints import array_io  # pylint: disable=g-import-not-at-top
  with h5py.File(path, "r+") as f:
    rows = sorted(_unlisted(f).items())
    f.create_dataset(array_io.TABLE, data=np.array(
        rows, [("name", h5py.string_dtype()), ("crc32c", np.uint32)]))
    f.attrs["version"] = 4


def rewrite_as_version_3(path):
  """Rewrites the portable checkpoint at `path` in place as version 3 kept its
  checksums: the CRC32C of each array an attribute of its own (no manifest)."""
  import h5py  # pylint: disable=g-import-not-at-top
  from bert_tf.checkpoints import checksums  # pylint: disable=g-import-not-at-top
  with h5py.File(path, "r+") as f:
    for name, crc in _unlisted(f).items():
      f[name].attrs[checksums.CRC_ATTR] = np.uint32(crc)
    f.attrs["version"] = 3


def rewrite_as_version(path, version):
  """Rewrites the manifest and attributes of the portable checkpoint at `path` as a
  bert_tf writing format `version` would (a newer one: its manifest checks)."""
  import json  # pylint: disable=g-import-not-at-top
  import h5py  # pylint: disable=g-import-not-at-top
  from bert_tf.checkpoints import manifest  # pylint: disable=g-import-not-at-top
  with h5py.File(path, "r+") as f:
    record = json.loads(f[manifest.MANIFEST][()].tobytes())
    del f[manifest.MANIFEST]
    record["attrs"]["version"] = f.attrs["version"] = version
    arrays = {name: manifest.Entry(**entry) for name, entry in record["arrays"].items()}
    manifest.write(f, record["attrs"], arrays, record["links"])


def flip_bit(path, name, bit=0):
  """Flips bit `bit` of the first byte of dataset `name`'s data in the file `path`."""
  import h5py  # pylint: disable=g-import-not-at-top
  with h5py.File(path, "r") as f:
    offset = f[name].id.get_offset()
  with open(path, "r+b") as f:
    f.seek(offset)
    byte = f.read(1)[0]
    f.seek(offset)
    f.write(bytes([byte ^ (1 << bit)]))
