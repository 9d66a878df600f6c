"""The model a run trains and exports: the task's model (Task.build_model), with the
run's model variants applied, low-rank adapters (model.lora_rank) and float8 block
projections (runtime.float8_training). Both engines and the exporter build it here, so a
task declares its model once and never sees the variants."""

from bert_tf import configs
from bert_tf.checkpoints import restore
from bert_tf.models import float8
from bert_tf.models import lora


def build(task):
  """task.build_model(), given the adapters of model.lora_rank when it is set: the
  encoder restored from task.init_checkpoint, frozen, with low-rank adapters
  (bert_tf.models.lora). With adapters, `trained_items` holds only what trains, and the
  encoder always comes from task.init_checkpoint, on a resumed run too. With
  runtime.float8_training the block projections train in float8
  (bert_tf.models.float8), converted after the warm start from task.init_checkpoint,
  which task.initialize then reports.

  Args:
    task: a bert_tf.tasks.base.Task.

  Returns:
    the Keras model, with `checkpoint_items`.

  Raises:
    ConfigError: model.lora_rank without task.init_checkpoint, or float8 on a model
      that cannot take it.
  """
  model = task.build_model()
  settings = task.experiment.model
  if settings.lora_rank:
    if not task.config.init_checkpoint:
      raise configs.ConfigError("model.lora_rank: LoRA fine-tunes a pretrained encoder; "
                                "set task.init_checkpoint")
    restore.restore_items(task.config.init_checkpoint, model.checkpoint_items,
                          items=("encoder",))
    lora.enable(model, settings.lora_rank, settings.lora_targets, settings.lora_alpha)
  if task.experiment.runtime.float8_training:
    # Checkpoints of plain models hold no float8 scaling state: restore into the plain
    # layers, then convert them.
    float8.check_supported(model)
    restored = task.initialize(model)
    float8.enable(model)
    object.__setattr__(model, "initialized_when_built", restored)
  return model
