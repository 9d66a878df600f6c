"""The one table that names every BERT weight in bert_tf, Google TF1 and Hugging Face.

Each row links a bert_tf variable path (as `variable.path` prints it on a BertEncoder or
BertPretrainer) to the variable of the original Google TF1 release and to the tensor of a
Hugging Face `BertModel` / `BertForPreTraining` file, with the layout change between them.
`{i}` stands for the Transformer layer index.

Layouts: bert_tf and TF1 dense kernels are [in, out]; torch `Linear.weight` is [out, in],
so every Hugging Face dense weight is transposed. The TF1 next-sentence weights are stored
[2, H] (`output_weights`, multiplied with `transpose_b=True`), while ours is a [H, 2] kernel.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

# Checkpoint items (the CHECKPOINT CONVENTION's root children) that conversion knows.
ENCODER = "encoder"
MASKED_LM = "masked_lm"
NEXT_SENTENCE = "next_sentence"
ITEMS = (ENCODER, MASKED_LM, NEXT_SENTENCE)

# Hugging Face task models (BertForPreTraining, BertForMaskedLM) put the encoder under this
# prefix; a bare BertModel file has no prefix.
HF_ENCODER_PREFIX = "bert."


@dataclasses.dataclass(frozen=True)
class WeightName:
  """One weight under its three names.

  Attributes:
    item: the checkpoint item holding it (encoder, masked_lm, next_sentence).
    bert_tf: our variable path.
    tf1: the original Google TF1 variable name.
    hf: the Hugging Face tensor name; encoder rows are relative to BertModel (no "bert.").
    tf1_transpose: the TF1 array is the transpose of ours.
    hf_transpose: the Hugging Face array is the transpose of ours.
  """

  item: str
  bert_tf: str
  tf1: str
  hf: str
  tf1_transpose: bool = False
  hf_transpose: bool = False

  def for_layer(self, i: int) -> "WeightName":
    return dataclasses.replace(self, bert_tf=self.bert_tf.format(i=i),
                               tf1=self.tf1.format(i=i), hf=self.hf.format(i=i))

  @property
  def per_layer(self) -> bool:
    return "{i}" in self.bert_tf

  def name_in(self, fmt: str) -> str:
    """This weight's name in `fmt`: bert_tf, google_tf1 or huggingface."""
    return {"bert_tf": self.bert_tf, "google_tf1": self.tf1, "huggingface": self.hf}[fmt]

  def transposed_in(self, fmt: str) -> bool:
    return {"bert_tf": False, "google_tf1": self.tf1_transpose,
            "huggingface": self.hf_transpose}[fmt]


def _dense(item, ours, tf1, hf):
  """A dense layer: kernel and bias; the torch weight is [out, in]."""
  return [
      WeightName(item, f"{ours}/kernel", f"{tf1}/kernel", f"{hf}.weight", hf_transpose=True),
      WeightName(item, f"{ours}/bias", f"{tf1}/bias", f"{hf}.bias"),
  ]


def _layer_norm(item, ours, tf1, hf):
  """A LayerNorm: gamma and beta (Hugging Face's weight and bias)."""
  return [
      WeightName(item, f"{ours}/gamma", f"{tf1}/gamma", f"{hf}.weight"),
      WeightName(item, f"{ours}/beta", f"{tf1}/beta", f"{hf}.bias"),
  ]


_L = "transformer_layer_{i}"
_TF1_L = "bert/encoder/layer_{i}"
_HF_L = "encoder.layer.{i}"

TABLE: Tuple[WeightName, ...] = tuple(
    # Embeddings: three tables [V, H], [P, H], [S, H], then LayerNorm.
    [
        WeightName(ENCODER, "embeddings/word_embeddings", "bert/embeddings/word_embeddings",
                   "embeddings.word_embeddings.weight"),
        WeightName(ENCODER, "embeddings/position_embeddings",
                   "bert/embeddings/position_embeddings",
                   "embeddings.position_embeddings.weight"),
        WeightName(ENCODER, "embeddings/token_type_embeddings",
                   "bert/embeddings/token_type_embeddings",
                   "embeddings.token_type_embeddings.weight"),
    ]
    + _layer_norm(ENCODER, "embeddings/layer_norm", "bert/embeddings/LayerNorm",
                  "embeddings.LayerNorm")
    # Self-attention of layer i: query, key, value [H, H], all heads side by side in the
    # same order in every format, so no reshape is needed; then the output projection.
    + _dense(ENCODER, f"{_L}/attention/query", f"{_TF1_L}/attention/self/query",
             f"{_HF_L}.attention.self.query")
    + _dense(ENCODER, f"{_L}/attention/key", f"{_TF1_L}/attention/self/key",
             f"{_HF_L}.attention.self.key")
    + _dense(ENCODER, f"{_L}/attention/value", f"{_TF1_L}/attention/self/value",
             f"{_HF_L}.attention.self.value")
    + _dense(ENCODER, f"{_L}/attention/output", f"{_TF1_L}/attention/output/dense",
             f"{_HF_L}.attention.output.dense")
    + _layer_norm(ENCODER, f"{_L}/attention_layer_norm",
                  f"{_TF1_L}/attention/output/LayerNorm", f"{_HF_L}.attention.output.LayerNorm")
    # Feed-forward network of layer i: [H, I] then [I, H], then LayerNorm.
    + _dense(ENCODER, f"{_L}/intermediate", f"{_TF1_L}/intermediate/dense",
             f"{_HF_L}.intermediate.dense")
    + _dense(ENCODER, f"{_L}/output", f"{_TF1_L}/output/dense", f"{_HF_L}.output.dense")
    + _layer_norm(ENCODER, f"{_L}/output_layer_norm", f"{_TF1_L}/output/LayerNorm",
                  f"{_HF_L}.output.LayerNorm")
    # Pooler: tanh(dense) over [CLS].
    + _dense(ENCODER, "pooler", "bert/pooler/dense", "pooler.dense")
    # Masked-LM head: transform dense + LayerNorm, and the vocabulary bias [V]; the output
    # matrix is the word-embedding table in all three formats.
    + _dense(MASKED_LM, "masked_lm/transform", "cls/predictions/transform/dense",
             "cls.predictions.transform.dense")
    + _layer_norm(MASKED_LM, "masked_lm/transform_layer_norm",
                  "cls/predictions/transform/LayerNorm", "cls.predictions.transform.LayerNorm")
    + [WeightName(MASKED_LM, "masked_lm/output_bias", "cls/predictions/output_bias",
                  "cls.predictions.bias")]
    # Next-sentence head: TF1 keeps the weights as [2, H].
    + [
        WeightName(NEXT_SENTENCE, "next_sentence/dense/kernel",
                   "cls/seq_relationship/output_weights", "cls.seq_relationship.weight",
                   tf1_transpose=True, hf_transpose=True),
        WeightName(NEXT_SENTENCE, "next_sentence/dense/bias",
                   "cls/seq_relationship/output_bias", "cls.seq_relationship.bias"),
    ])

# TF1 variables that are not weights: the step counter and the original optimizer's slots.
TF1_IGNORED = re.compile(r"^(global_step|.*/adam_[mv]|.*/Adam(_1)?)$")

# Hugging Face buffers that are not weights: the constant position index.
HF_IGNORED = re.compile(r"^(bert\.)?embeddings\.position_ids$")

# Older Hugging Face files name LayerNorm parameters gamma and beta.
_HF_LAYER_NORM_ALIAS = re.compile(r"(LayerNorm)\.(gamma|beta)$")

# The tied copies Hugging Face may store: the decoder matrix is the word-embedding table and
# the decoder bias is cls.predictions.bias.
HF_TIED_DECODER_WEIGHT = "cls.predictions.decoder.weight"
HF_TIED_DECODER_BIAS = "cls.predictions.decoder.bias"


def canonical_hf_name(name: str) -> str:
  """Maps a Hugging Face tensor name to the table's spelling.

  Drops the "bert." prefix of task models and renames LayerNorm gamma/beta to
  weight/bias. The tied decoder names are returned unchanged.
  """
  if name.startswith(HF_ENCODER_PREFIX):
    name = name[len(HF_ENCODER_PREFIX):]
  return _HF_LAYER_NORM_ALIAS.sub(
      lambda m: f"{m.group(1)}.{'weight' if m.group(2) == 'gamma' else 'bias'}", name)


def hf_file_name(row: WeightName, with_prefix: bool) -> str:
  """The name a Hugging Face file stores `row` under (BertForPreTraining when prefixed)."""
  if row.item == ENCODER and with_prefix:
    return HF_ENCODER_PREFIX + row.hf
  return row.hf


def weight_names(num_layers: int, items: Iterable[str] = ITEMS) -> List[WeightName]:
  """The table expanded for `num_layers` layers, restricted to `items`, in table order."""
  items = tuple(items)
  unknown = [item for item in items if item not in ITEMS]
  if unknown:
    raise ValueError(f"Unknown checkpoint items {unknown}; known: {ITEMS}")
  rows = []
  for row in TABLE:
    if row.item not in items:
      continue
    if row.per_layer:
      rows.extend(row.for_layer(i) for i in range(num_layers))
    else:
      rows.append(row)
  # Group the per-layer rows by layer, as the checkpoints list them.
  return sorted(rows, key=_row_order)


def _row_order(row: WeightName):
  match = re.match(r"transformer_layer_(\d+)/", row.bert_tf)
  section = 0 if row.bert_tf.startswith("embeddings/") else (1 if match else 2)
  return (ITEMS.index(row.item), section, int(match.group(1)) if match else 0)


def rows_by_name(rows: Sequence[WeightName], fmt: str) -> Dict[str, WeightName]:
  """{name in fmt: row}."""
  return {row.name_in(fmt): row for row in rows}


def items_present(names: Iterable[str], fmt: str) -> Tuple[str, ...]:
  """Which checkpoint items have at least one weight among `names` (canonical, in fmt).

  Layer indices do not matter: any layer's name marks the encoder as present.
  """
  patterns = {}
  for row in TABLE:
    template = row.name_in(fmt)
    regex = re.escape(template).replace(re.escape("{i}"), r"\d+")
    patterns.setdefault(row.item, []).append(re.compile(f"^{regex}$"))
  names = list(names)
  return tuple(item for item in ITEMS
               if any(p.match(n) for p in patterns.get(item, []) for n in names))


def layer_index(name: str, fmt: str) -> Optional[int]:
  """The Transformer layer index in a name of `fmt`, or None."""
  pattern = {"bert_tf": r"transformer_layer_(\d+)/", "google_tf1": r"/layer_(\d+)/",
             "huggingface": r"encoder\.layer\.(\d+)\."}[fmt]
  match = re.search(pattern, name)
  return int(match.group(1)) if match else None
