"""The ops an exported SavedModel may use, and a check of an export against them.

TF Serving links the TensorFlow core of its own release and an older
tensorflow-text than pip ships; a SavedModel that uses an op the server lacks
fails to load (tensorflow/serving#2267). The export allowlist is the union of

* `bert_tf.text.serving_ops.TOKENIZER_OP_ALLOWLIST`: the tokenizer's ops, whose
  tensorflow-text part is only NormalizeUTF8, RegexSplitWithOffsets and
  WordpieceTokenizeWithOffsets (the long-standing BertTokenizer family;
  UnicodeTranscode, which replaces invalid UTF-8 first, is core TensorFlow);
* `serving_ops.PACKING_OP_ALLOWLIST` and `serving_ops.SAVED_MODEL_INFRA_OPS`;
* `EXPORT_CORE_OPS` below: the core TensorFlow ops of the Keras model (matrix
  products, GELU, layer norm, softmax), of the ragged handling around the
  tokenizer and of the post-processing (top-k, span search, entity decoding,
  label lookup, tf.Example parsing). All of them have been in TensorFlow core
  since 2.4 or earlier, and TF Serving builds carry the whole TensorFlow core.

`unexpected_ops(export_dir)` lists the op types of an export outside the union;
the export tests require it to be empty for every kind of export.
"""

from typing import Iterable, Set

from bert_tf.text import serving_ops

EXPORT_CORE_OPS = frozenset({
    # The encoder and heads.
    "BatchMatMulV2", "BiasAdd", "Erf", "Erfc", "MatMul", "Mean", "Neg", "Rsqrt",
    "Softmax", "SquaredDifference", "Tanh", "Transpose", "RealDiv", "Pow",
    "ResourceGather", "StopGradient", "Einsum",
    # Ragged tensors around the tokenizer, [MASK] splitting and entity lists.
    "RaggedGather", "RaggedRange", "RaggedTensorToTensor", "OnesLike", "ZerosLike",
    "Fill", "LogicalAnd", "LogicalOr", "LogicalNot", "Any", "Select", "Range",
    # Post-processing: top-k, best span over windows, character offsets, examples.
    "ArgMax", "Min", "TopKV2", "FloorMod", "FloorDiv", "Substr", "ParseExampleV2",
    "GatherNd", "ClipByValue", "GreaterEqual", "StatelessIf", "UnsortedSegmentSum",
    # Written by tf.saved_model.save into every SavedModel's restore functions since
    # TensorFlow 2.15; TF Serving 2.15 and newer have it.
    "DisableCopyOnRead",
    # Lookup of label names.
    "HashTableV2", "LookupTableImportV2", "LookupTableFindV2",
    # int8 exports (exporter.quantize): the IdentityN of Keras's custom gradient around
    # the quantized product (core since 1.x); for int8_dynamic also the per-row absmax
    # scaling of the inputs and the int8 x int8 -> int32 product (BatchMatMulV3, core
    # since TensorFlow 2.5).
    "Abs", "Round", "BatchMatMulV3", "IdentityN",
    # int8_onednn (bert_tf.export.int8_onednn): each input row's scale, its uint8
    # quantization and the int8 product (core ops since TensorFlow 1.x / 2.1; the
    # product's kernel is oneDNN's, in builds with oneDNN).
    "Max", "DivNoNan", "QuantizeV2", "QuantizedMatMulWithBiasAndDequantize", "Bitcast",
})


def export_op_allowlist() -> frozenset:
  """Every op type an export may use (see the module docstring)."""
  return (serving_ops.TOKENIZER_OP_ALLOWLIST | serving_ops.PACKING_OP_ALLOWLIST
          | serving_ops.SAVED_MODEL_INFRA_OPS | EXPORT_CORE_OPS)


def saved_model_op_types(export_dir: str) -> Set[str]:
  """Op types of every graph in a SavedModel, function library included."""
  return set(serving_ops.saved_model_op_types(export_dir))


def unexpected_ops(export_dir: str, allowlist: Iterable[str] = None) -> Set[str]:
  """Op types of the export that are not in the allowlist (default: export_op_allowlist())."""
  allowed = frozenset(allowlist) if allowlist is not None else export_op_allowlist()
  return saved_model_op_types(export_dir) - allowed


def check_export_ops(export_dir: str) -> None:
  """Raises ValueError naming the export and every op type outside the allowlist."""
  extra = unexpected_ops(export_dir)
  if extra:
    raise ValueError(f"SavedModel {export_dir} uses ops outside the TF Serving allowlist "
                     f"(bert_tf.export.serving_ops_check): {sorted(extra)}")
