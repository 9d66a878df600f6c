"""Typed, validated configuration: `configs.X` for every config class and constant.

The framework (`Config`, strict loading, coercion, overrides, YAML) is `configs.base`;
the experiment schema is `configs.encoder` (EncoderConfig and the released sizes) and
`configs.experiment` (the model, data, tokenizer, optimizer, trainer, runtime and task
sections, and ExperimentConfig over them); `configs.kernel_sets` is the registry of
kernel sets by name and the runtime.kernels section built from it.
"""

from bert_tf.configs.base import (Config, ConfigError, field_path, load_yaml, merged_yaml,
                                  nearest_name, parse_dotted_overrides, require)
from bert_tf.configs.batches import check_batch_sizes
from bert_tf.configs.encoder import ACTIVATIONS, ENCODER_SIZES, EncoderConfig
from bert_tf.configs.experiment import (BACKENDS, LORA_TARGETS, MOVED_RUNTIME_KEYS,
                                        OPTIMIZERS, PRECISIONS, STRATEGIES, DataConfig,
                                        ExperimentConfig, ModelConfig,
                                        ObsoleteConfigKeyWarning, OptimizerConfig,
                                        RuntimeConfig, TaskConfig, TokenizerConfig,
                                        TrainerConfig, task_config_from_dict)
from bert_tf.configs.kernel_sets import KernelsConfig
