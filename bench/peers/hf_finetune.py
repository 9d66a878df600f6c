"""Hugging Face fine-tuning worker with dynamic padding (runs in the `hf` peer venv).

BertForSequenceClassification, BertTokenizerFast over the same vocab, examples
tokenized on the fly per batch and padded to the batch's longest (the usual
DataCollatorWithPadding recipe), shuffled, torch.optim.AdamW. Tokenization is inside the
timed step. Spoken to by bench/finetune_throughput.py through protocol.py.
"""

import random

import torch
import transformers

from bench.peers import glue_tsv
from bench.peers import protocol


def main():
  args, thread_info = protocol.start_worker(__doc__, "finetune", torch)

  torch.manual_seed(0)
  texts_a, texts_b, labels = glue_tsv.read(args.train_tsv, args.task)
  tokenizer = transformers.BertTokenizerFast(vocab_file=args.vocab_file, do_lower_case=True)
  layers, hidden, heads, intermediate = protocol.size_args(args.size)
  config = transformers.BertConfig(
      vocab_size=protocol.VOCAB_SIZE, hidden_size=hidden, num_hidden_layers=layers,
      num_attention_heads=heads, intermediate_size=intermediate, num_labels=2)
  model = transformers.BertForSequenceClassification(config)
  model.train()
  decay, no_decay = [], []
  for name, param in model.named_parameters():
    (no_decay if ("bias" in name or "LayerNorm" in name) else decay).append(param)
  optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": protocol.WEIGHT_DECAY},
                                 {"params": no_decay, "weight_decay": 0.0}], lr=2e-5,
                                eps=1e-6)
  order = list(range(len(labels)))
  random.Random(0).shuffle(order)
  state = {"pos": 0}

  def next_indices():
    if state["pos"] + args.batch_size > len(order):
      random.Random(state["pos"]).shuffle(order)
      state["pos"] = 0
    idx = order[state["pos"]:state["pos"] + args.batch_size]
    state["pos"] += args.batch_size
    return idx

  def step():
    idx = next_indices()
    a = [texts_a[i] for i in idx]
    b = [texts_b[i] for i in idx] if texts_b else None
    enc = tokenizer(a, b, truncation=True, max_length=args.seq_length, padding="longest",
                    return_tensors="pt")
    y = torch.tensor([labels[i] for i in idx])
    optimizer.zero_grad(set_to_none=True)
    out = model(**enc, labels=y)
    out.loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    out.loss.item()

  protocol.serve(step, warmup_steps=3, info={
      **thread_info,
      "framework": f"transformers {transformers.__version__} (torch {torch.__version__}), "
                   "dynamic padding"})


if __name__ == "__main__":
  main()
