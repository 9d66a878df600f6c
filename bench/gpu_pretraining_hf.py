"""Hugging Face BertForPreTraining's training step in torch, eager or under
torch.compile: the peer of bert_tf's JAX step in bench/gpu_pretraining.py (its worker,
bench/gpu_pretraining_worker.py, times both).

The same model as ours (the experiment's encoder section: sizes, dropout, activation,
initializer range), SDPA attention, bf16 autocast, fused torch.optim.AdamW with the
experiment's optimizer settings (no decay on biases and LayerNorm), global-norm
clipping and the linear warm-up/decay schedule. No TensorFlow.
"""

from bench import gpu_devices
from bench import kernel_profile


def hf_step(args, experiment, batch, decay_steps: int, compiled: bool) -> gpu_devices.Side:
  """Builds Hugging Face's step.

  Args:
    args: the worker's arguments (device, precision, hf_mlm).
    experiment: a bert_tf.configs.ExperimentConfig; its model.encoder and optimizer.
    batch: the synthetic batch, {name: numpy array} (bench/peers/protocol.py).
    decay_steps: where the linear decay ends.
    compiled: the forward and loss under torch.compile (its backward compiled with it).
  """
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  device, sync = gpu_devices.torch_device(torch, args.device)
  torch.manual_seed(0)
  config = experiment.model.encoder
  settings = experiment.optimizer
  model = transformers.BertForPreTraining(transformers.BertConfig(
      vocab_size=config.vocab_size, hidden_size=config.hidden_size,
      num_hidden_layers=config.num_layers, num_attention_heads=config.num_attention_heads,
      intermediate_size=config.intermediate_size, hidden_act=config.hidden_activation,
      hidden_dropout_prob=config.dropout_rate,
      attention_probs_dropout_prob=config.attention_dropout_rate,
      max_position_embeddings=config.max_position_embeddings,
      type_vocab_size=config.type_vocab_size, initializer_range=config.initializer_range,
      layer_norm_eps=config.layer_norm_epsilon, attn_implementation="sdpa")).to(device)
  model.train()
  decay, no_decay = [], []
  for name, param in model.named_parameters():
    excluded = any(p in name for p in settings.exclude_from_weight_decay)
    (no_decay if excluded else decay).append(param)
  optimizer = torch.optim.AdamW(
      [{"params": decay, "weight_decay": settings.weight_decay_rate},
       {"params": no_decay, "weight_decay": 0.0}], lr=settings.learning_rate,
      betas=(settings.beta_1, settings.beta_2), eps=settings.epsilon, fused=True)
  schedule = transformers.get_linear_schedule_with_warmup(
      optimizer, settings.warmup_steps, decay_steps)

  batch = {name: torch.from_numpy(value).long().to(device) for name, value in batch.items()}
  weights = batch["masked_lm_weights"].float()
  # The stock forward's labels: the original ids at the masked positions, -100 elsewhere.
  labels = torch.full_like(batch["input_word_ids"], -100).scatter_(
      1, batch["masked_lm_positions"], batch["masked_lm_ids"])
  bf16 = args.precision == "bf16"

  def forward_loss():
    with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
      if args.hf_mlm == "all":
        return model(input_ids=batch["input_word_ids"], attention_mask=batch["input_mask"],
                     token_type_ids=batch["input_type_ids"], labels=labels,
                     next_sentence_label=batch["next_sentence_labels"]).loss
      sequence, pooled = model.bert(input_ids=batch["input_word_ids"],
                                    attention_mask=batch["input_mask"],
                                    token_type_ids=batch["input_type_ids"],
                                    return_dict=False)[:2]
      positions = batch["masked_lm_positions"]
      gathered = torch.gather(sequence, 1,
                              positions[:, :, None].expand(-1, -1, sequence.shape[-1]))
      mlm_logits = model.cls.predictions(gathered).float()
      nsp_logits = model.cls.seq_relationship(pooled).float()
    per_position = torch.nn.functional.cross_entropy(
        mlm_logits.flatten(0, 1), batch["masked_lm_ids"].flatten(), reduction="none")
    mlm = (per_position * weights.flatten()).sum() / (weights.sum() + 1e-5)
    return mlm + torch.nn.functional.cross_entropy(nsp_logits,
                                                   batch["next_sentence_labels"])

  loss_fn = torch.compile(forward_loss) if compiled else forward_loss

  def step():
    loss = loss_fn()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), settings.global_clipnorm)
    optimizer.step()
    schedule.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()

  cuda = device == "cuda"
  if cuda:
    torch.cuda.reset_peak_memory_stats()
  return gpu_devices.Side(
      step, sync,
      {"framework": f"transformers {transformers.__version__}, torch {torch.__version__}",
       "device": gpu_devices.torch_device_name(torch),
       "params": sum(p.numel() for p in model.parameters())},
      lambda: torch.cuda.max_memory_allocated() / 2**20 if cuda else None,
      lambda *a: kernel_profile.capture_torch(*a, cuda=cuda))
