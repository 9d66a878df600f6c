"""The experiment schema: everything one run needs, section by section.

An ExperimentConfig holds a task, the model (an encoder from `configs.encoder` plus the
head settings), the tokenizer, the training and evaluation data, the optimizer, the
training loop and the runtime. Each task's own TaskConfig subclass is defined beside the
task (bert_tf.tasks); whoever reads an experiment passes the mapping of task names to
those classes (bert_tf.training.experiments passes the task registry's).
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, List, Mapping, Optional

from bert_tf.configs.base import Config, ConfigError, field_path, nearest_name, require
from bert_tf.configs.batches import check_batch_sizes
from bert_tf.configs.encoder import EncoderConfig
from bert_tf.configs.kernel_sets import KernelsConfig

# The Transformer-block projections that model.lora_targets may name.
LORA_TARGETS = ("query", "key", "value", "attention_output", "intermediate", "output")


@dataclasses.dataclass
class ModelConfig(Config):
  """The network: an encoder plus the task's output layer settings."""

  encoder: EncoderConfig = dataclasses.field(default_factory=EncoderConfig)
  # Dropout before a fine-tuning output layer (the paper keeps 0.1 everywhere).
  head_dropout_rate: float = 0.1
  # Above 0: fine-tune low-rank adapters of this rank (bert_tf.models.lora) and the
  # head, the encoder frozen at task.init_checkpoint.
  lora_rank: int = 0
  # The adapters' scale is lora_alpha / lora_rank; 0 means lora_rank (a scale of 1).
  lora_alpha: float = 0.0
  # The block projections given adapters (of LORA_TARGETS).
  lora_targets: List[str] = dataclasses.field(default_factory=lambda: ["query", "value"])

  def validate(self):
    require(0.0 <= self.head_dropout_rate < 1.0,
            f"head_dropout_rate must be in [0, 1), got {self.head_dropout_rate}")
    require(self.lora_rank >= 0, f"lora_rank must be >= 0, got {self.lora_rank}")
    require(self.lora_alpha >= 0, f"lora_alpha must be >= 0, got {self.lora_alpha}")
    require(bool(self.lora_targets) and set(self.lora_targets) <= set(LORA_TARGETS),
            f"lora_targets must be a non-empty subset of {', '.join(LORA_TARGETS)}, got "
            f"{self.lora_targets}")


@dataclasses.dataclass
class DataConfig(Config):
  """One input pipeline: where the data is and how it is batched."""

  # Comma-separated globs of files, or "dummy" for synthetic batches.
  input_path: str = ""
  # tfrecord, dummy, or a task's raw format (tsv, squad_json, conll, swag_csv, tfds).
  format: str = "tfrecord"
  global_batch_size: int = 32
  seq_length: int = 128
  max_predictions_per_seq: int = 20
  is_training: bool = True
  drop_remainder: bool = True
  # Training rows shuffled together, each epoch, after the files' order is shuffled
  # (bert_tf.data.records.record_order: the one order both engines read); 0 or 1: file order.
  shuffle_buffer_size: int = 10000
  compression_type: str = ""
  # Fine-tuning batches: upper bounds (in tokens, [CLS] and [SEP]s included) of the
  # lengths batches are padded to. A batch (its rows those of the one order) is cut to
  # its longest example and padded up to the smallest bound that holds it, so that a
  # step compiled once per shape (JAX, XLA, TPUs) compiles once per bound; where the
  # step takes any length (TensorFlow without XLA) it stays cut to its longest. Bounds
  # at or above seq_length are ignored (the last bound is seq_length).
  length_buckets: List[int] = dataclasses.field(default_factory=list)
  # Training batches from raw task files (sentence_prediction): the examples of each
  # batch laid end to end in rows of seq_length tokens, each attending only to itself,
  # instead of one padded row per example (bert_tf.data.pipelines.example_packing, on
  # both engines). A batch still holds global_batch_size examples; its row count varies.
  # Excludes length_buckets.
  pack_examples: bool = False
  # RoBERTa-style masks drawn on the fly from unmasked sequences.
  dynamic_masking: bool = False
  masked_lm_prob: float = 0.15
  whole_word_masking: bool = False
  # TensorFlow Datasets name (for format tfds), for example "glue/sst2".
  tfds_name: str = ""
  tfds_split: str = ""
  tfds_data_dir: str = ""
  # TFRecord input: read every record of every file and check its checksums before
  # training or evaluating starts, so that a corrupt file fails in seconds, named with
  # the byte offset, instead of hours in.
  validate_inputs: bool = False

  def validate(self):
    require(self.global_batch_size > 0, f"global_batch_size must be positive, got "
            f"{self.global_batch_size}")
    require(self.seq_length > 2, f"seq_length must exceed 2, got {self.seq_length}")
    require(self.max_predictions_per_seq >= 0, "max_predictions_per_seq must be >= 0")
    require(self.shuffle_buffer_size >= 0,
            f"shuffle_buffer_size must be >= 0, got {self.shuffle_buffer_size}")
    require(0.0 < self.masked_lm_prob < 1.0,
            f"masked_lm_prob must be in (0, 1), got {self.masked_lm_prob}")
    require(all(b > 0 for b in self.length_buckets) and
            list(self.length_buckets) == sorted(set(self.length_buckets)),
            f"length_buckets must be positive and increasing, got {self.length_buckets}")
    require(not (self.pack_examples and self.length_buckets),
            "pack_examples and length_buckets are two ways to batch; set one of them")
    require(not self.pack_examples or self.is_training,
            "pack_examples applies to training data (is_training: true) only")
    require(self.compression_type in ("", "GZIP", "ZLIB"),
            f"compression_type must be '', GZIP or ZLIB, got '{self.compression_type}'")

  def active_length_buckets(self) -> List[int]:
    """The length-bucket bounds below seq_length (the last bucket ends at seq_length)."""
    return [b for b in self.length_buckets if b < self.seq_length]

  def section_name(self) -> str:
    """The experiment section this data config is ("train_data" or "eval_data"), for
    error messages."""
    return "train_data" if self.is_training else "eval_data"


@dataclasses.dataclass
class TokenizerConfig(Config):
  """The WordPiece vocab and its case handling: one tokenizer for training, evaluation
  and export (tasks that read raw text, dynamic masking, the serving signatures)."""

  vocab_file: str = ""
  lower_case: bool = True
  # A vocab of fewer tokens than model.encoder.vocab_size is an error (its ids would
  # read rows of another vocab's tokens) unless the table is larger on purpose (rows
  # reserved for tokens added later, a size rounded up): then set this.
  allow_smaller_vocab: bool = False


OPTIMIZERS = ("adamw", "lamb", "sgd")


@dataclasses.dataclass
class OptimizerConfig(Config):
  """Optimizer and learning-rate schedule: linear warm-up, then polynomial decay."""

  type: str = "adamw"
  learning_rate: float = 1e-4
  warmup_steps: int = 10000
  # 0 means trainer.train_steps.
  decay_steps: int = 0
  end_learning_rate: float = 0.0
  power: float = 1.0
  weight_decay_rate: float = 0.01
  # Variables whose path contains one of these are not decayed.
  exclude_from_weight_decay: List[str] = dataclasses.field(
      default_factory=lambda: ["layer_norm", "LayerNorm", "bias"])
  beta_1: float = 0.9
  beta_2: float = 0.999
  epsilon: float = 1e-6
  # Global-norm clipping; 0 turns it off.
  global_clipnorm: float = 1.0

  def validate(self):
    require(self.type in OPTIMIZERS, f"type must be one of {OPTIMIZERS}, got '{self.type}'")
    require(self.learning_rate > 0, f"learning_rate must be positive, got {self.learning_rate}")
    require(self.warmup_steps >= 0, "warmup_steps must be >= 0")
    require(self.decay_steps >= 0, "decay_steps must be >= 0")
    require(self.weight_decay_rate >= 0, "weight_decay_rate must be >= 0")
    require(0 <= self.beta_1 < 1 and 0 <= self.beta_2 < 1, "beta_1 and beta_2 must be in [0, 1)")
    require(self.global_clipnorm >= 0, "global_clipnorm must be >= 0")


@dataclasses.dataclass
class TrainerConfig(Config):
  """The training loop: steps, checkpoints, summaries, evaluation."""

  train_steps: int = 1000
  # Steps run inside one tf.function call.
  steps_per_loop: int = 100
  summary_interval: int = 100
  checkpoint_interval: int = 1000
  max_to_keep: int = 5
  # Write each checkpoint on a background thread while training goes on (the step waits
  # only for the arrays' copy to host memory); false: on the training thread.
  async_checkpoints: bool = True
  # 0 evaluates over the whole evaluation input.
  validation_steps: int = 0
  validation_interval: int = 1000
  # Micro-batches whose gradients are summed before one optimizer update.
  gradient_accumulation_steps: int = 1
  # Console progress line every this many steps (rounded to steps_per_loop).
  log_interval: int = 100

  def validate(self):
    require(self.train_steps >= 0, "train_steps must be >= 0")
    for name in ("steps_per_loop", "summary_interval", "checkpoint_interval",
                 "validation_interval", "gradient_accumulation_steps", "log_interval"):
      require(getattr(self, name) > 0, f"{name} must be positive, got {getattr(self, name)}")
    require(self.max_to_keep > 0, "max_to_keep must be positive")
    require(self.validation_steps >= 0, "validation_steps must be >= 0")


STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
# "" leaves the choice to Keras (KERAS_BACKEND, default tensorflow).
BACKENDS = ("", "tensorflow", "jax")
# Earlier versions' flat runtime keys of the kernel settings: {old key: its place under
# runtime now}. They are read in their new place (see RuntimeConfig.from_dict).
MOVED_RUNTIME_KEYS = {"gpu_attention": ("kernels", "jax_gpu", "attention"),
                      "gpu_dropout_generator": ("kernels", "jax_gpu", "dropout_generator"),
                      "gpu_layer_norm": ("kernels", "jax_gpu", "layer_norm")}


class ObsoleteConfigKeyWarning(UserWarning):
  """A config uses a key that moved; it was read in its new place."""


@dataclasses.dataclass
class RuntimeConfig(Config):
  """Where and how the computation runs."""

  # The Keras backend that trains: "" (whatever Keras uses: KERAS_BACKEND, or its
  # default, tensorflow), "tensorflow" or "jax". tools/train.py selects it before
  # Keras loads; the strategies below are TensorFlow's.
  backend: str = ""
  distribution_strategy: str = "one_device"
  num_gpus: int = 0
  tpu: str = ""
  # Splits the CPU into this many logical devices (to run MirroredStrategy on CPU).
  num_cpu_devices: int = 0
  mixed_precision_dtype: str = "float32"
  loss_scale: str = "dynamic"
  # XLA-compiles the training step. Unset: on where TensorFlow runs the step on a GPU
  # or TPU, off on CPUs (where the fused kernels do better).
  jit_compile: Optional[bool] = None
  # The speed paths (bert_tf.kernels): the same variables and results, computed faster,
  # by the kernel set runtime.kernels.set names, else by the default set of the backend
  # and platform the model runs on: TensorFlow's on CPUs (tensorflow_cpu), JAX's on
  # GPUs (jax_gpu: fused attention with dropout, cheaper dropout masks). Unset: on where
  # a set is named or is the default there, off elsewhere. True: a set wherever one can
  # run. False: the reference layers.
  fused_kernels: Optional[bool] = None
  # The kernel set by name, and each set's settings (runtime.kernels.jax_gpu.attention,
  # ...): configs.kernel_sets.
  kernels: KernelsConfig = dataclasses.field(default_factory=KernelsConfig)
  seed: int = 42
  # Deterministic kernels (tf.config.experimental.enable_op_determinism).
  deterministic: bool = False
  # Collective implementation for multi-worker: auto, ring, nccl.
  all_reduce_alg: str = "auto"
  # Trains the encoder's block projections (query, key, value, attention output,
  # intermediate, output) in Keras's float8 mode with delayed scaling
  # (bert_tf.models.float8): float8 GEMMs on GPUs that have them. JAX backend only;
  # the embeddings, heads and the tied masked-LM output layer keep the dtype policy.
  float8_training: bool = False

  @classmethod
  def from_dict(cls, data: Optional[Mapping[str, Any]], path: str = ""):
    """As Config.from_dict, with earlier versions' flat kernel keys (MOVED_RUNTIME_KEYS:
    an earlier params.yaml, an override `runtime.gpu_attention=xla`) read in their place
    under `kernels`, with a warning naming it. An old key given beside its new place
    is taken over it: it is an override of a config that has the section."""
    data = dict(data or {})
    moved = []
    for old, place in MOVED_RUNTIME_KEYS.items():
      if old not in data:
        continue
      value = data.pop(old)
      node = data
      for part in place[:-1]:
        child = node.get(part)
        node[part] = dict(child) if isinstance(child, Mapping) else {}
        node = node[part]
      node[place[-1]] = value
      moved.append(f"{field_path(path, old)}: moved to "
                   f"{field_path(path, '.'.join(place))}")
    if moved:
      warnings.warn("Obsolete config keys read in their new place: " + "; ".join(moved),
                    ObsoleteConfigKeyWarning, stacklevel=2)
    return super().from_dict(data, path)

  def validate(self):
    require(self.backend in BACKENDS,
            f"backend must be one of {BACKENDS}, got '{self.backend}'")
    require(self.distribution_strategy in STRATEGIES,
            f"distribution_strategy must be one of {STRATEGIES}, got "
            f"'{self.distribution_strategy}'")
    require(self.mixed_precision_dtype in PRECISIONS,
            f"mixed_precision_dtype must be one of {PRECISIONS}, got "
            f"'{self.mixed_precision_dtype}'")
    require(self.num_gpus >= 0 and self.num_cpu_devices >= 0,
            "num_gpus and num_cpu_devices must be >= 0")
    require(self.all_reduce_alg in ("auto", "ring", "nccl"),
            f"all_reduce_alg must be auto, ring or nccl, got '{self.all_reduce_alg}'")


@dataclasses.dataclass
class TaskConfig(Config):
  """Settings shared by every task; `name` selects the task and its config class."""

  name: str = "pretraining"
  # A checkpoint whose encoder (and other checkpoint_items) initialize the model.
  init_checkpoint: str = ""


def task_config_from_dict(data: Optional[Mapping[str, Any]],
                          task_configs: Optional[Mapping[str, type]], path: str = "task"
                          ) -> TaskConfig:
  """Reads a task section with the config class its `name` selects.

  Args:
    data: the task section; a missing name means TaskConfig's default.
    task_configs: {task name: TaskConfig subclass}; None knows no task.
    path: dotted prefix used in error messages.

  Raises:
    ConfigError: an unknown name (naming the nearest known one), or a bad field.
  """
  if not isinstance(data, Mapping):
    raise ConfigError(f"{path} must be a mapping of task fields, got {data!r}")
  name = data.get("name", TaskConfig.name)
  task_configs = task_configs or {}
  if name not in task_configs:
    nearest = nearest_name(str(name), list(task_configs))
    hint = f"; did you mean '{nearest}'?" if nearest else ""
    known = (f" Tasks: {', '.join(sorted(task_configs))}" if task_configs else
             " No task configs were given: read experiments with "
             "bert_tf.training.experiments, which knows every registered task.")
    raise ConfigError(f"{field_path(path, 'name')}: unknown task '{name}'{hint}{known}")
  return task_configs[name].from_dict(data, path)


@dataclasses.dataclass
class ExperimentConfig(Config):
  """Everything one run needs: task, model, tokenizer, data, optimizer, trainer, runtime."""

  # The base TaskConfig until read with the task configs (see from_dict).
  task: TaskConfig = dataclasses.field(default_factory=TaskConfig)
  model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
  tokenizer: TokenizerConfig = dataclasses.field(default_factory=TokenizerConfig)
  train_data: DataConfig = dataclasses.field(default_factory=DataConfig)
  eval_data: DataConfig = dataclasses.field(
      default_factory=lambda: DataConfig(is_training=False, drop_remainder=False))
  optimizer: OptimizerConfig = dataclasses.field(default_factory=OptimizerConfig)
  trainer: TrainerConfig = dataclasses.field(default_factory=TrainerConfig)
  runtime: RuntimeConfig = dataclasses.field(default_factory=RuntimeConfig)

  @classmethod
  def from_dict(cls, data: Optional[Mapping[str, Any]], path: str = "",
                task_configs: Optional[Mapping[str, type]] = None):
    """Builds an experiment, reading its task section with `task_configs`.

    Args:
      data: nested mapping; missing keys keep their defaults.
      path: dotted prefix used in error messages.
      task_configs: {task name: TaskConfig subclass} (the task registry's,
        bert_tf.tasks.base.task_configs()). Without it only a section-less
        experiment (the base TaskConfig) can be read.
    """
    data = dict(data or {})
    if task_configs is not None or "task" in data:
      task = data.get("task") or {}
      if not isinstance(task, TaskConfig):
        data["task"] = task_config_from_dict(task, task_configs, field_path(path, "task"))
    return super().from_dict(data, path)

  def _reparse(self, merged: Mapping[str, Any], task_configs: Optional[Mapping[str, type]]
               = None):
    # The task's own class stays known, so that overriding other fields needs no mapping.
    known = {self.task.name: type(self.task)}
    known.update(task_configs or {})
    return type(self).from_dict(merged, task_configs=known)

  def validate(self):
    encoder = self.model.encoder
    for section in ("train_data", "eval_data"):
      data = getattr(self, section)
      require(data.seq_length <= encoder.max_position_embeddings,
              f"{section}.seq_length ({data.seq_length}) exceeds "
              f"model.encoder.max_position_embeddings ({encoder.max_position_embeddings})")
    require(not (self.runtime.float8_training and self.model.lora_rank),
            "runtime.float8_training does not combine with model.lora_rank (Keras's "
            "float8 Dense has no LoRA path)")
    require(not (self.train_data.pack_examples and
                 self.trainer.gradient_accumulation_steps > 1),
            "train_data.pack_examples does not split into micro-batches: set "
            "trainer.gradient_accumulation_steps to 1")
    check_batch_sizes(self.train_data.global_batch_size,
                      accumulation_steps=self.trainer.gradient_accumulation_steps)
