"""Our serving worker: one bert_tf SavedModel's serve_token_ids on the ids every system
of the run gets (protocol.serve_classifier), or with --text its serving_default on the
run's texts (raw text in, tokenized in the graph). Spoken to by bench/int8_serving.py.
"""

from bench.peers import protocol
from bert_tf import cpu_kernels

# Before TensorFlow loads: the CPU kernels the tools choose.
cpu_kernels.prefer_onednn()
cpu_kernels.leave_out_absent_gpus()


def main():
  parser = protocol.serving_argument_parser(__doc__)
  parser.add_argument("--saved_model", required=True)
  parser.add_argument("--text", action="store_true")
  args = parser.parse_args()
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import  # the text ops
  if args.threads:
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
  signatures = tf.saved_model.load(args.saved_model).signatures
  info = {"framework": f"bert_tf (TF {tf.__version__})"}
  if args.text:
    texts = tf.constant(np.load(args.inputs)["timing_text"][:args.batch_size].tolist())
    signature = signatures["serving_default"]
    protocol.serve(lambda: signature(text=texts)["probabilities"].numpy(), info=info)
    return
  signature = signatures["serve_token_ids"]

  def predict(*ids):
    feed = {k: tf.constant(a, tf.int32) for k, a in zip(protocol.TOKEN_ID_NAMES, ids)}
    # The export serves probabilities; their log is the log-softmax of its logits.
    return np.log(signature(**feed)["probabilities"].numpy())

  protocol.serve_classifier(predict, args, info)


if __name__ == "__main__":
  main()
