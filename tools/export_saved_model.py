r"""Exports a bert_tf checkpoint as a SavedModel that TF Serving loads and that takes raw text.

  python3 tools/export_saved_model.py --checkpoint=model_dir \
      --config=model_dir/params.yaml --vocab_file=vocab.txt --export_dir=exports/bert

restores the experiment's task model from the checkpoint (a trainer or converted
checkpoint; a directory means its latest checkpoint) and writes
exports/bert/<version>/ (the next free integer unless --version is given) with three
signatures: serving_default (raw UTF-8 strings: `text`, `text`+`text_b` for pair
tasks, `question`+`context` for SQuAD), serve_token_ids (input_word_ids, input_mask,
input_type_ids) and serve_examples (serialized tf.Example with the raw-text
features). The kind of export follows the task (pretraining: fill-mask;
sentence_prediction: classifier; squad; tagging; multiple_choice) unless --kind says otherwise
(--kind=encoder serves pooled_output and sequence_output of any checkpoint).
The vocab and label names are copied into the export as assets, so the directory
can be moved. --hub_dir also writes a TF Hub-style preprocessor/encoder pair.

`pip install .` installs this tool as the command `bert-tf-export` (same flags).
"""

import time

from absl import app
from absl import flags

from bert_tf import cpu_kernels
from bert_tf.configs import run_folder
from bert_tf.utils import errors
from bert_tf.utils import optional
from bert_tf.utils import files

# Before TensorFlow loads: it reads its CPU kernels, device kinds and log level once,
# when imported.
cpu_kernels.prefer_onednn()
cpu_kernels.leave_out_absent_gpus()
cpu_kernels.quiet_startup_logs()

FLAGS = flags.FLAGS
flags.DEFINE_string("checkpoint", None, "Checkpoint prefix, or a directory (latest checkpoint).")
flags.DEFINE_string("config", None,
                    "Experiment YAML the checkpoint was trained with; default "
                    "<checkpoint directory>/params.yaml.")
flags.DEFINE_string("vocab_file", None, "WordPiece vocab; default the config's "
                    "tokenizer.vocab_file.")
flags.DEFINE_string("export_dir", None, "Base directory; the SavedModel goes to "
                    "<export_dir>/<version>/ (TF Serving's model_base_path).")
flags.DEFINE_string("kind", "auto", "What to serve: auto (the task's own kind), encoder, or "
                    "a serving kind (fill_mask, classifier, squad, tagging, "
                    "multiple_choice).")
flags.DEFINE_integer("version", None, "Integer version directory; default the next free one.")
flags.DEFINE_integer("seq_length", None, "Packed sequence length; default the config's.")
flags.DEFINE_integer("top_k", 5, "Fill-mask: candidates per [MASK].")
flags.DEFINE_integer("max_masks", None, "Fill-mask: [MASK]s per text; default "
                     "max_predictions_per_seq.")
flags.DEFINE_string("hub_dir", None, "Also write <hub_dir>/preprocessor and "
                    "<hub_dir>/encoder (TF Hub-style SavedModels), both or neither; an "
                    "earlier pair there is replaced.")
flags.DEFINE_enum("quantize", None, ["int8", "int8_dynamic", "int8_onednn", "bfloat16"],
                  "The int8 modes store every Dense kernel as int8 with per-output-channel "
                  "scales, and the word embeddings as int8 with per-row scales. int8: "
                  "float32 products (float32 speed on CPU); int8_dynamic: inputs quantized "
                  "per row at call time and int8 products on TensorFlow's generic kernels "
                  "(slower on CPU); int8_onednn: each input row scaled to uint8 and int8 "
                  "products on oneDNN's kernels (TensorFlow with oneDNN on, Linux x86; "
                  "faster than float32 at large batches on CPUs with VNNI or AMX, "
                  "bench/README.md). bfloat16: bf16 "
                  "weights and products, LayerNorm and softmax in float32, float32 "
                  "outputs. Default: float32 weights.")
flags.DEFINE_bool("check_ops", True, "Fail when the export uses an op outside the TF Serving "
                  "allowlist (bert_tf.export.serving_ops_check).")


def _stage(number, total, text):
  print(f"[{number}/{total}] {text} ...", flush=True)
  return time.time()


def _done(start):
  print(f"      done in {time.time() - start:.1f}s", flush=True)


def main(argv):
  del argv
  from bert_tf.export import exporter  # pylint: disable=g-import-not-at-top
  from bert_tf.training import trained_model  # pylint: disable=g-import-not-at-top
  from bert_tf.export import hub  # pylint: disable=g-import-not-at-top
  from bert_tf.export import serving_ops_check  # pylint: disable=g-import-not-at-top
  from bert_tf.checkpoints import restore  # pylint: disable=g-import-not-at-top
  # Storage that is not served or does not answer is one error before anything is read.
  files.check_readable(FLAGS.checkpoint, "--checkpoint")
  files.check_writable(FLAGS.export_dir, "--export_dir")
  if FLAGS.hub_dir:
    files.check_writable(FLAGS.hub_dir, "--hub_dir")
    hub.check_hub_dir(FLAGS.hub_dir)
  # A missing checkpoint is named as such, not as the params.yaml missing beside it.
  checkpoint = restore.resolve_checkpoint(FLAGS.checkpoint)
  config_path = FLAGS.config or run_folder.params_path(FLAGS.checkpoint)
  total = 4 + bool(FLAGS.hub_dir)
  begin = time.time()
  start = _stage(1, total, f"Restoring {FLAGS.checkpoint} with config {config_path}")
  experiment = trained_model.load_experiment(config_path)
  if FLAGS.kind not in exporter.kinds():
    raise app.UsageError(f"--kind must be one of {', '.join(exporter.kinds())}, got "
                         f"'{FLAGS.kind}'")
  vocab_file = trained_model.vocab_of(experiment, FLAGS.vocab_file, config_path)
  # TensorFlow copies the vocab into the export (an asset) through its own file system,
  # which reaches less storage than the package's (an emulator): a local copy.
  with files.staged_input(vocab_file) as local_vocab:
    model = trained_model.model_from_checkpoint(experiment, checkpoint)
    print(f"      restored {checkpoint}", flush=True)
    model = exporter.serving_model(experiment, model, FLAGS.quantize)
    _done(start)
    start = _stage(2, total, "Building the serving graph (tokenizer, packing, model)")
    # Serving options the command line sets replace the task's.
    options = {name: FLAGS[name].value for name in ("top_k", "max_masks") if FLAGS[name].present}
    module = exporter.build_serving_module(
        experiment, model, local_vocab, kind=FLAGS.kind, seq_length=FLAGS.seq_length, **options)
    _done(start)
    start = _stage(3, total, f"Tracing the signatures and writing under {FLAGS.export_dir}")
    path = exporter.write_saved_model(module, FLAGS.export_dir, FLAGS.version)
    _done(start)
    start = _stage(4, total, "Checking the ops against the TF Serving allowlist")
    ops = serving_ops_check.saved_model_op_types(path)
    if FLAGS.check_ops:
      serving_ops_check.check_export_ops(path)
    _done(start)
    hub_paths = {}
    if FLAGS.hub_dir:
      start = _stage(5, total, f"Writing the TF Hub-style pair under {FLAGS.hub_dir}")
      is_pretrainer = hasattr(model, "masked_lm")
      hub_paths = hub.export_hub_pair(
          getattr(model, "encoder", model), local_vocab, FLAGS.hub_dir,
          lower_case=experiment.tokenizer.lower_case,
          seq_length=module.seq_length, pretrainer=model if is_pretrainer else None)
      _done(start)
    inputs = ", ".join(module.text_inputs)
    print(f"Exported {type(module).__name__} of {checkpoint} to {path} "
          f"(serving_default({inputs}), "
          f"serve_token_ids, serve_examples; seq_length {module.seq_length}; {len(ops)} op types, "
          f"all allowlisted: {not serving_ops_check.unexpected_ops(path)})"
          + (f"; hub pair: {hub_paths['preprocessor']}, {hub_paths['encoder']}" if hub_paths
             else "") + f" in {time.time() - begin:.1f}s")


def run():
  """The `bert-tf-export` command."""
  flags.mark_flags_as_required(["checkpoint", "export_dir"])
  errors.run_tool("export_saved_model", main, needs=optional.tensorflow_for_tools)


if __name__ == "__main__":
  run()
