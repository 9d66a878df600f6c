"""A tagger's entities in raw text without TensorFlow, as the export's serving_default
gives them (bert_tf.export.tagging_serving, whose docstring states the rule): the
text's whitespace-separated words each tokenized on its own ([UNK] for a word without
pieces), the pieces cut into windows of seq_length - 2 (bert_tf.text.windows), each
word tagged at its first piece in the window giving that piece the most context, and
the words' tags read as entities (bert_tf.metrics.tagging.served_entities).
"""

import re
from typing import Dict, List

import numpy as np

from bert_tf import constants
from bert_tf.inference import host_compute
from bert_tf.inference import predictions as names
from bert_tf.metrics import tagging
from bert_tf.text import host_tokenizer
from bert_tf.text import windows

# A word as Python's str.split() finds it.
_WORD = re.compile(r"\S+")


class TaggingHead:
  """Entities of texts: their types, text and character spans."""

  inputs = (host_compute.TEXT,)

  def __init__(self, model, tokenizer, seq_length: int, label_names=(),
               window_stride: int = 64):
    if len(label_names) != model.num_classes:
      raise ValueError(f"{len(label_names)} label names for {model.num_classes} classes")
    self.model, self.tokenizer, self.seq_length = model, tokenizer, seq_length
    self.entity_types, self.type_index, self.begins = tagging.tag_types(label_names)
    self.window_stride, self.max_tokens = int(window_stride), seq_length - 2

  def _text_pieces(self, text: str):
    """(word spans [(begin, end)], each word's first piece, the text's pieces)."""
    spans = [match.span() for match in _WORD.finditer(text)]
    unk = self.tokenizer.special_ids[constants.UNK_TOKEN]
    word_pieces = [p or [unk] for p in self.tokenizer.pieces([text[b:e] for b, e in spans])]
    first = np.cumsum([0] + [len(p) for p in word_pieces])[:-1]
    return spans, first, [piece for p in word_pieces for piece in p]

  def __call__(self, texts: Dict[str, List[str]]) -> Dict[str, np.ndarray]:
    read = [self._text_pieces(text) for text in texts[host_compute.TEXT]]
    layouts = [windows.doc_windows(len(pieces), self.max_tokens, self.window_stride)
               or [(0, 0)] for _, _, pieces in read]
    packed, _ = host_tokenizer.pack(
        [[pieces[s:s + n] for (_, _, pieces), spans in zip(read, layouts) for s, n in spans]],
        self.seq_length, self.tokenizer.special_ids)
    tags = host_compute.run_model(self.model, packed)[names.LOGITS].argmax(axis=-1)
    found, row = [], 0
    for text, (spans, first, _), layout in zip(texts[host_compute.TEXT], read, layouts):
      word_tags = []
      for piece in first:
        owner = windows.max_context_span(layout, int(piece))
        word_tags.append(int(tags[row + owner, piece - layout[owner][0] + 1]))
      row += len(layout)
      entities = tagging.served_entities([self.type_index[t] for t in word_tags],
                                         [self.begins[t] for t in word_tags])
      found.append([(self.entity_types[t], spans[a][0], spans[b][1],
                     text[spans[a][0]:spans[b][1]]) for t, a, b in entities])
    width = max([len(f) for f in found] + [0])

    def column(index, pad, dtype):
      return np.asarray([[e[index] for e in f] + [pad] * (width - len(f)) for f in found],
                        dtype).reshape([len(found), width])

    return {
        names.ENTITY_COUNT: np.asarray([len(f) for f in found], np.int32),
        names.NUM_WINDOWS: np.asarray([len(layout) for layout in layouts], np.int32),
        names.ENTITY_TYPES: column(0, "", object),
        names.ENTITY_START: column(1, -1, np.int32),
        names.ENTITY_END: column(2, -1, np.int32),
        names.ENTITY_TEXT: column(3, "", object),
    }
