"""Hugging Face transformers pretraining-step worker (runs in the `hf` peer venv).

transformers.BertForPreTraining through its public modules: the encoder (`model.bert`),
the masked-LM head applied to the gathered masked positions only
(`model.cls.predictions`), the NSP head (`model.cls.seq_relationship`), and
torch.optim.AdamW with no decay on biases and LayerNorm weights; mixed_bfloat16: the
forward pass and loss under torch's bf16 autocast. Spoken to through protocol.py.
"""

import torch
import transformers

from bench.peers import protocol


def main():
  args, thread_info = protocol.start_worker(__doc__, torch)

  torch.manual_seed(0)
  layers, hidden, heads, intermediate = protocol.size_args(args.size)
  config = transformers.BertConfig(
      vocab_size=protocol.VOCAB_SIZE, hidden_size=hidden, num_hidden_layers=layers,
      num_attention_heads=heads, intermediate_size=intermediate,
      max_position_embeddings=512, type_vocab_size=2)
  model = transformers.BertForPreTraining(config)
  model.train()
  decay, no_decay = [], []
  for name, param in model.named_parameters():
    (no_decay if ("bias" in name or "LayerNorm" in name) else decay).append(param)
  optimizer = torch.optim.AdamW(
      [{"params": decay, "weight_decay": protocol.WEIGHT_DECAY},
       {"params": no_decay, "weight_decay": 0.0}], lr=protocol.LEARNING_RATE, eps=1e-6)

  batch = {k: torch.from_numpy(v) for k, v in protocol.pretraining_batch(
      args.batch_size, args.seq_length, args.predictions,
      full_length=bool(args.full_length)).items()}
  ids = batch["input_word_ids"].long()
  mask = batch["input_mask"].long()
  types = batch["input_type_ids"].long()
  positions = batch["masked_lm_positions"].long()
  labels = batch["masked_lm_ids"].long()
  weights = batch["masked_lm_weights"]
  nsp_labels = batch["next_sentence_labels"].long()

  bf16 = args.mixed_precision == "mixed_bfloat16"

  def step():
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
      loss = forward_loss()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    loss.item()

  def forward_loss():
    sequence, pooled = model.bert(input_ids=ids, attention_mask=mask, token_type_ids=types,
                                  return_dict=False)[:2]
    gathered = torch.gather(sequence, 1,
                            positions[:, :, None].expand(-1, -1, sequence.shape[-1]))
    mlm_logits = model.cls.predictions(gathered)
    nsp_logits = model.cls.seq_relationship(pooled)
    per_position = torch.nn.functional.cross_entropy(
        mlm_logits.reshape(-1, mlm_logits.shape[-1]), labels.reshape(-1), reduction="none")
    mlm_loss = (per_position * weights.reshape(-1)).sum() / (weights.sum() + 1e-5)
    nsp_loss = torch.nn.functional.cross_entropy(nsp_logits, nsp_labels)
    return mlm_loss + nsp_loss

  params = sum(p.numel() for p in model.parameters() if p.requires_grad)
  protocol.serve(step, warmup_steps=2, info={
      **thread_info,
      "framework": f"transformers {transformers.__version__} (torch {torch.__version__}, "
                   f"attn {config._attn_implementation})",
      "mixed_precision": args.mixed_precision, "params": params})


if __name__ == "__main__":
  main()
