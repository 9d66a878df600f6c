"""The op census of one checkout's traced pretraining step, for bench/step_graph.py.

Builds the trainer of the checkout's own pretraining worker (its
bench/ours_pretraining_worker.py `build_trainer`, the one bench/pretraining_step.py
times) and prints, as one JSON line, how many nodes of each op type the traced training
loop holds (`census`). Its input is the worker's in-memory batch, or with --records_dir
the same batch written as a TFRecord file and read through the checkout's pretraining
reader, as training reads records (the shapes the reader gives decide which kernels
the step runs). Runs with the checkout first on the path and imports nothing of this
repository's bert_tf, so that the census is the checkout's: it imports only the
standard library until the checkout is on the path.

  python -m bench.step_graph_worker --checkout=PATH --size=mini --batch_size=32
"""

import argparse
import collections
import importlib.util
import json
import os
import sys

# Function-valued attributes: the functions a node calls (PartitionedCall, While, If, ...).
_FUNCTION_ATTRS = ("f", "then_branch", "else_branch", "body", "cond", "branches")
# The prefix of the ops inside an XLA-compiled function: XLA fuses them, TensorFlow does
# not run them one by one.
XLA_PREFIX = "xla:"


def _called_functions(node, library):
  """The names of the library functions `node` calls (by attribute or as its op)."""
  names = [node.op] if node.op in library else []
  for attr in _FUNCTION_ATTRS:
    if attr not in node.attr:
      continue
    value = node.attr[attr]
    names += [value.func.name] if value.func.name else []
    names += [f.name for f in value.list.func]
  return [name for name in names if name in library]


def _compiled(node, function) -> bool:
  flag = "_XlaMustCompile"
  return ((flag in node.attr and node.attr[flag].b)
          or (flag in function.attr and function.attr[flag].b))


def census(graph_def) -> collections.Counter:
  """{op type: nodes} of a GraphDef and of the library functions it calls, a function
  counted at every call site (a loop body once); ops inside XLA-compiled functions
  under XLA_PREFIX + op type."""
  library = {f.signature.name: f for f in graph_def.library.function}
  counts = collections.Counter()

  def visit(nodes, prefix):
    for node in nodes:
      counts[prefix + node.op] += 1
      for name in _called_functions(node, library):
        function = library[name]
        visit(function.node_def, XLA_PREFIX if _compiled(node, function) else prefix)

  visit(graph_def.node, "")
  return counts


def load_checkout_worker(checkout: str):
  """The checkout's bench/ours_pretraining_worker.py as a module, the checkout first on
  the path (and its bench/peers/, where older layouts import `protocol` from)."""
  sys.path[:0] = [checkout, os.path.join(checkout, "bench", "peers")]
  path = os.path.join(checkout, "bench", "ours_pretraining_worker.py")
  spec = importlib.util.spec_from_file_location("checkout_pretraining_worker", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


# Where a checkout keeps its tf.data pretraining reader: data/ in sub-packages by role,
# and data/ flat (f6af710 and before).
READER_MODULES = ("bert_tf.data.pipelines.pretraining_reader",
                  "bert_tf.data.pretraining_reader")
# And its TFRecord writing (serialize_example, write_records), in the same two layouts.
TFRECORD_MODULES = ("bert_tf.data.records.tfrecords", "bert_tf.data.tfrecords")


def _first_module(*names):
  """The first of the modules `names` the checkout has."""
  for name in names:
    try:
      return importlib.import_module(name)
    except ModuleNotFoundError as error:
      if not name.startswith(error.name or ""):
        raise  # A module the checkout has, missing one it imports.
  raise ModuleNotFoundError(f"The checkout has none of {', '.join(names)}")


def records_input(worker, directory: str, batch_size: int, seq_length: int,
                  predictions: int):
  """A dataset_fn for the checkout's `build_trainer`: its protocol batch written as
  pretraining records (the original release's features) to a file in `directory`, read
  through the checkout's bert_tf.data.pretraining_reader."""
  from bert_tf import constants  # pylint: disable=g-import-not-at-top
  pretraining_reader = _first_module(*READER_MODULES)
  tfrecords = _first_module(*TFRECORD_MODULES)
  batch = worker.protocol.pretraining_batch(batch_size, seq_length, predictions)
  path = os.path.join(directory, "pretrain.tfrecord")
  tfrecords.write_records(path, (
      tfrecords.serialize_example({name: batch[key][row] for name, key in
                                   constants.TFRECORD_TO_MODEL_INPUT.items()})
      for row in range(batch_size)))

  def dataset_fn(data_config, input_context, start=0):
    del start  # Traced, not read.
    return pretraining_reader.build_pretraining_dataset(
        data_config.replace(input_path=path, format="tfrecord"), input_context)

  return dataset_fn


def main():
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--checkout", required=True, help="The checkout's root.")
  parser.add_argument("--size", default="mini")
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--seq_length", type=int, default=128)
  parser.add_argument("--predictions", type=int, default=20)
  parser.add_argument("--records_dir", default="",
                      help="Read the batch as TFRecords written here (default: in memory).")
  args = parser.parse_args()
  worker = load_checkout_worker(os.path.abspath(args.checkout))
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  dataset_fn = None
  if args.records_dir:
    dataset_fn = records_input(worker, args.records_dir, args.batch_size, args.seq_length,
                               args.predictions)
  trainer, iterator = worker.build_trainer(args.size, args.batch_size, args.seq_length,
                                           args.predictions, 1, False, dataset_fn=dataset_fn)
  loop = trainer.engine.train_loop_function.get_concrete_function(
      iterator, tf.TensorSpec([], tf.int32))
  print(json.dumps(census(loop.graph.as_graph_def())))


if __name__ == "__main__":
  main()
