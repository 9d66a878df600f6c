"""The graph ops the text preprocessing may put into an exported SavedModel.

TF Serving links an older tensorflow-text than pip ships, and a SavedModel that
uses an op its tensorflow-text lacks fails to load (tensorflow/serving#2267).
The tokenizer therefore sticks to the tensorflow-text ops below, the ones
tensorflow-text's own `BertTokenizer` has long been built from, and to core
TensorFlow ops. Tests
trace the tokenizer and the packer and check their graphs against these lists;
export code can check a whole SavedModel with `saved_model_op_types`.
"""

import os

from tensorflow.core.protobuf import saved_model_pb2

from bert_tf.utils import files

# tensorflow-text ops: the BertTokenizer/WordpieceTokenizer family, regex
# split and Unicode normalization. Deliberately absent: the newer
# FastWordpieceTokenize*, FastBertNormalize and the like.
TF_TEXT_OPS = frozenset({
    "NormalizeUTF8",
    "RegexSplitWithOffsets",
    "WordpieceTokenizeWithOffsets",
})

# Core TensorFlow ops used by BertWordPieceTokenizer (all public methods,
# batched and scalar inputs), including its vocab lookup tables.
TOKENIZER_CORE_OPS = frozenset({
    "AddV2", "All", "Any", "Assert", "BroadcastTo", "Cast", "ConcatV2",
    "Const", "Cumsum", "DenseBincount", "Equal", "ExpandDims", "GatherNd",
    "GatherV2", "Greater", "HashTableV2", "Identity", "If",
    "Less", "LessEqual", "LogicalNot", "LookupTableImportV2",
    "LookupTableFindV2", "Max", "Maximum", "Minimum", "Mul", "NoOp",
    "NotEqual", "Pack", "Placeholder", "Prod", "Range", "Reshape",
    "ScatterNd", "SelectV2", "Shape", "Size", "Squeeze", "StaticRegexReplace",
    "StridedSlice", "StringLength", "StringLower", "StringSplitV2", "Sub",
    "Sum", "Tile", "UnicodeDecodeWithOffsets", "UnicodeEncode",
    "UnicodeTranscode", "UnsortedSegmentJoin", "UpperBound", "Where",
})

TOKENIZER_OP_ALLOWLIST = TF_TEXT_OPS | TOKENIZER_CORE_OPS

# Core TensorFlow ops used by `pack_inputs` / `BertPackInputs`.
PACKING_OP_ALLOWLIST = frozenset({
    "AddV2", "Cast", "ClipByValue", "ConcatV2", "Const", "Equal",
    "ExpandDims", "Fill", "FloorDiv", "GatherV2", "Greater", "GreaterEqual",
    "Identity", "Less", "LessEqual", "Maximum", "Minimum", "Mul", "NoOp",
    "Pack", "Placeholder", "Range", "Reshape", "SelectV2", "Shape", "Size",
    "StridedSlice", "Sub", "ZerosLike",
})

# Ops every TF2 SavedModel holds for saving/restoring and calling functions.
SAVED_MODEL_INFRA_OPS = frozenset({
    "AssignVariableOp", "Const", "Identity", "MergeV2Checkpoints", "NoOp",
    "Pack", "PartitionedCall", "Placeholder", "ReadVariableOp", "RestoreV2",
    "SaveV2", "Select", "ShardedFilename", "StatefulPartitionedCall",
    "StaticRegexFullMatch", "StringJoin", "VarHandleOp", "VarIsInitializedOp",
})


def graph_op_types(graph_def):
  """Op types of a `GraphDef`'s nodes and of every function in its library.

  Args:
    graph_def: a `tf.compat.v1.GraphDef`, e.g.
      `concrete_function.graph.as_graph_def()`.

  Returns:
    A frozenset of op type names (str).
  """
  ops = {node.op for node in graph_def.node}
  for function in graph_def.library.function:
    ops.update(node.op for node in function.node_def)
  return frozenset(ops)


def saved_model_op_types(export_dir):
  """Op types used anywhere in a SavedModel's `saved_model.pb`.

  Args:
    export_dir: directory of a SavedModel.

  Returns:
    A frozenset of op type names (str) over all its meta graphs.
  """
  saved_model = saved_model_pb2.SavedModel()
  # Through the package's file layer: an export on storage TensorFlow's own client does
  # not reach (a Cloud Storage emulator) is read too.
  saved_model.ParseFromString(files.read_bytes(os.path.join(export_dir, "saved_model.pb")))
  ops = set()
  for meta_graph in saved_model.meta_graphs:
    ops |= graph_op_types(meta_graph.graph_def)
  return frozenset(ops)
