"""BERT for sentence and sentence-pair classification or regression."""

import keras

from bert_tf import constants
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.task_model import EncoderTaskModel

LOGITS = "logits"


@keras.saving.register_keras_serializable(package="bert_tf")
class BertClassifier(EncoderTaskModel):
  """An encoder plus dropout and a dense layer over the pooled [CLS] vector.

  Inputs (a dict): input_word_ids, input_mask, input_type_ids, int32 [B, T].
  Outputs (a dict): logits, float32 [B, num_classes] (num_classes 1: a regression
  score [B, 1]).
  checkpoint_items: encoder, classifier.

  Called on tensors, the model computes its encoder's last block only at [CLS], the
  one position the pooler reads (BertEncoder.call_at_positions); the functional graph
  (used for saving, summaries and symbolic calls) is the plain one. With
  `sparse_last_layer=False` tensor calls run the plain graph too.

  Given a packed batch (bert_tf.data.pipelines.example_packing: rows of several examples, with
  input_position_ids, input_example_ids, packed_cls_positions and
  packed_example_slots), it classifies every packed example: logits [N, num_classes]
  in the batch's example order (BertEncoder.call_packed).
  """

  config_arguments = ("num_classes", "dropout_rate", "sparse_last_layer")

  def __init__(self, encoder: BertEncoder, num_classes: int, dropout_rate: float = 0.1,
               sparse_last_layer: bool = True, **kwargs):
    # === Layers ===
    classifier = self.classification_head(encoder, num_classes, dropout_rate, "classifier")

    # === Functional graph ===
    inputs = self.encoder_inputs()
    pooled = encoder(inputs)[constants.POOLED_OUTPUT]
    outputs = {LOGITS: keras.ops.cast(classifier(pooled), "float32")}
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    # === Config ===
    self.encoder = encoder
    self.classifier = classifier
    self.num_classes = num_classes
    self.dropout_rate = dropout_rate
    self.sparse_last_layer = sparse_last_layer

  def call(self, inputs, training=None, mask=None):
    if constants.INPUT_EXAMPLE_IDS in inputs:
      return self._call_packed(inputs, training)
    if not self.sparse_last_layer:
      return super().call(inputs, training=training, mask=mask)
    pooled = self.encoder.call_at_positions(
        {name: inputs[name] for name in constants.ENCODER_INPUTS},
        training=training)[constants.POOLED_OUTPUT]
    return {LOGITS: keras.ops.cast(self.classifier(pooled, training=training), "float32")}

  def _call_packed(self, inputs, training):
    pooled = self.encoder.call_packed(inputs, inputs[constants.PACKED_CLS_POSITIONS],
                                      training=training)[constants.POOLED_OUTPUT]
    pooled = keras.ops.reshape(pooled, (-1, keras.ops.shape(pooled)[-1]))
    pooled = keras.ops.take(pooled, inputs[constants.PACKED_EXAMPLE_SLOTS], axis=0)
    return {LOGITS: keras.ops.cast(self.classifier(pooled, training=training), "float32")}

  @property
  def checkpoint_items(self):
    return {"encoder": self.encoder, "classifier": self.classifier}
