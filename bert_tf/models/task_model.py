"""The base of the models that put heads on a BertEncoder."""

from typing import Dict, Sequence, Tuple

import keras

from bert_tf import constants
from bert_tf.layers.classification_head import ClassificationHead


class EncoderTaskModel(keras.Model):
  """A functional keras.Model over a BertEncoder, whose config holds the encoder.

  A subclass declares its model in three sections (layers, functional graph from
  `encoder_inputs`, stored arguments), sets `self.encoder`, and names in
  `config_arguments` the other constructor arguments that `get_config` returns.
  """

  # Constructor arguments, besides `encoder`, that get_config stores by attribute name.
  config_arguments: Tuple[str, ...] = ()
  # The model's low-rank adapters (bert_tf.models.lora.enable), None without them.
  lora_adapters = None

  @property
  def trained_items(self) -> Dict[str, object]:
    """The checkpoint items a training run saves and resumes: `checkpoint_items`, or
    with LoRA adapters the adapters (`lora`) and every item but the frozen encoder."""
    items = dict(self.checkpoint_items)
    if self.lora_adapters is not None:
      del items["encoder"]
      items["lora"] = self.lora_adapters
    return items

  @staticmethod
  def classification_head(encoder, num_classes: int, dropout_rate: float,
                          name: str) -> ClassificationHead:
    """A ClassificationHead ([..., H] -> [..., num_classes] logits) made as `encoder`'s
    layers are: with its initializer_range, dtype policy and kernels."""
    return ClassificationHead(num_classes, dropout_rate=dropout_rate,
                              initializer_range=encoder.initializer_range,
                              dtype=encoder.dtype_policy, kernels=encoder.kernels, name=name)

  @staticmethod
  def encoder_inputs(shape: Tuple = (None,),
                     names: Sequence[str] = constants.ENCODER_INPUTS
                     ) -> Dict[str, keras.KerasTensor]:
    """Symbolic int32 inputs of `shape` (per example) for each name."""
    return {name: keras.Input(shape, dtype="int32", name=name) for name in names}

  def get_config(self):
    config = {
        "name": self.name,
        "trainable": self.trainable,
        "encoder": keras.saving.serialize_keras_object(self.encoder),
    }
    config.update({name: getattr(self, name) for name in self.config_arguments})
    return config

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
    return cls(**config)
