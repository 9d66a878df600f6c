"""Small random KerasHub presets (a BertBackbone or a BertTextClassifier) saved as
keras_hub's save_to_preset writes them, for the conversion tests."""

import keras_hub

from checkpoint_helpers import TINY, randomize, write_vocab

NUM_CLASSES = 3


def vocabulary(tmp_path):
  """Writes tmp_path/vocab.txt (TINY's size); returns its tokens."""
  path = write_vocab(tmp_path / "vocab.txt", TINY.vocab_size)
  with open(path, encoding="utf-8") as f:
    return [line.rstrip("\n") for line in f]


def backbone():
  """A random BertBackbone of TINY's sizes, without dropout."""
  return keras_hub.models.BertBackbone(
      vocabulary_size=TINY.vocab_size, num_layers=TINY.num_layers,
      num_heads=TINY.num_attention_heads, hidden_dim=TINY.hidden_size,
      intermediate_dim=TINY.intermediate_size,
      max_sequence_length=TINY.max_position_embeddings, num_segments=TINY.type_vocab_size,
      dropout=0.0)


def save_preset(kind, tmp_path, seed=0):
  """A random BertBackbone or BertTextClassifier (kind "backbone" or "classifier") saved
  as a preset in tmp_path/preset beside tmp_path/vocab.txt; returns the model."""
  tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocabulary(tmp_path))
  encoder = backbone()
  if kind == "backbone":
    model = encoder
  else:
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer,
                                                                   sequence_length=16)
    model = keras_hub.models.BertTextClassifier(encoder, NUM_CLASSES,
                                                preprocessor=preprocessor, dropout=0.0)
  randomize(model, seed)
  preset = tmp_path / "preset"
  model.save_to_preset(str(preset))
  if kind == "backbone":
    tokenizer.save_to_preset(str(preset))
  return model
