"""Distillation of a fine-tuned sentence classifier (the teacher) into a smaller one.

The student is the experiment's model (`model.encoder`, e.g. a 4-layer MiniLM or
BERT-mini shape), trained on a GLUE-style task as sentence_prediction is, on a mix of
the labels (hard loss) and the teacher's temperature-softened predictions (soft loss),
as in Hinton et al. (2015) and DistilBERT:

  loss = (1 - soft_loss_weight) * CE(labels, s)
         + soft_loss_weight * T^2 * KL(softmax(t / T) || softmax(s / T))

for logits s (student) and t (teacher) and temperature T (the T^2 keeps the soft
gradients' scale independent of T); for regression (num_classes 1) the soft term is
(s - t)^2 (bert_tf.losses.distillation_loss).

The teacher runs in the same training step, forward only, rather than from logits
written into the TFRecords beforehand: every input the sentence_prediction task reads
(raw files, TFRecords, packed rows, length buckets, shuffled epochs) then works
unchanged, with no second copy of the data to keep in step with the vocab and
sequence length, at the price of one teacher forward pass per step. The teacher is no
checkpoint item of the student: checkpoints and exports hold the student alone.
"""

import dataclasses

from bert_tf import configs
from bert_tf import constants
from bert_tf import losses
from bert_tf.checkpoints import restore
from bert_tf.models.bert_classifier import LOGITS, BertClassifier
from bert_tf.tasks import base
from bert_tf.tasks import sentence_prediction


@dataclasses.dataclass
class DistillationConfig(sentence_prediction.SentencePredictionConfig):
  """A sentence_prediction task whose loss also follows a teacher classifier."""

  name: str = "distillation"
  # The teacher's encoder shape and its checkpoint (items encoder and classifier, as a
  # sentence_prediction run on the same task writes them).
  teacher_encoder: configs.EncoderConfig = dataclasses.field(
      default_factory=configs.EncoderConfig)
  teacher_checkpoint: str = ""
  # T: both logits are divided by it before the soft loss's softmax.
  temperature: float = 2.0
  # The soft loss's share of the loss; 0 is plain fine-tuning on the labels.
  soft_loss_weight: float = 0.5

  def validate(self):
    super().validate()
    if self.temperature <= 0:
      raise configs.ConfigError(f"temperature must be positive, got {self.temperature}")
    if not 0.0 <= self.soft_loss_weight <= 1.0:
      raise configs.ConfigError(f"soft_loss_weight must be in [0, 1], got "
                                f"{self.soft_loss_weight}")


@base.register_task("distillation", DistillationConfig)
class DistillationTask(sentence_prediction.SentencePredictionTask):
  """sentence_prediction with the distillation loss; inputs, metrics and export are
  sentence_prediction's."""

  teacher = None

  def build_model(self):
    """The student; builds (once) and restores the teacher beside it, frozen."""
    if self.teacher is None:
      self.teacher = self.build_teacher()
    return super().build_model()

  def build_teacher(self) -> BertClassifier:
    """The teacher classifier restored from task.teacher_checkpoint, not trainable."""
    if not self.config.teacher_checkpoint:
      raise configs.ConfigError("task.teacher_checkpoint: distillation needs the teacher's "
                                "checkpoint")
    teacher = BertClassifier(self.build_encoder(self.config.teacher_encoder,
                                                name="teacher_encoder"),
                             self.num_classes, dropout_rate=0.0, name="teacher")
    restore.restore_items(self.config.teacher_checkpoint, teacher.checkpoint_items,
                          items=("encoder", "classifier"))
    teacher.trainable = False
    return teacher

  def compute_loss(self, features, outputs, global_batch_size):
    teacher_logits = self.teacher(self.model_inputs(features), training=False)[LOGITS]
    per_example = losses.distillation_loss(outputs[LOGITS], teacher_logits,
                                           features[constants.LABEL_IDS],
                                           self.config.temperature,
                                           self.config.soft_loss_weight, self.regression)
    return {"loss": losses.global_mean(per_example, global_batch_size)}
