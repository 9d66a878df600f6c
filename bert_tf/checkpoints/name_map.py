"""The one table that names every BERT weight in bert_tf, Google TF1, Hugging Face and
KerasHub.

Each row links a bert_tf variable path (as `variable.path` prints it on a BertEncoder,
BertPretrainer or task model) to the variable of the original Google TF1 release, to the
tensor of a Hugging Face `BertModel` / `BertFor...` file and to the variable of a KerasHub
`BertBackbone` / `BertTextClassifier`, with the layout change between them. `{i}` stands
for the Transformer layer index. A weight that a format has no name for (the task heads
the original release never shipped, the heads KerasHub has no model for) is None there.

Layouts: bert_tf and TF1 dense kernels are [in, out]; torch `Linear.weight` is [out, in],
so every Hugging Face dense weight is transposed. The TF1 next-sentence and classifier
weights are stored [classes, H] (`output_weights`, multiplied with `transpose_b=True`),
while ours is a [H, classes] kernel. KerasHub's attention projections keep the heads on
their own axis (query kernel [H, heads, H / heads], bias [heads, H / heads], output kernel
[heads, H / heads, H]): the same numbers in the same order as ours, reshaped.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

# Checkpoint items (the CHECKPOINT CONVENTION's root children) that conversion knows: the
# encoder, the pretraining heads and the heads of the fine-tuning task models.
ENCODER = "encoder"
MASKED_LM = "masked_lm"
NEXT_SENTENCE = "next_sentence"
CLASSIFIER = "classifier"
TAGGER = "tagger"
SPAN_LABELER = "span_labeler"
CHOICE_SCORER = "choice_scorer"
ITEMS = (ENCODER, MASKED_LM, NEXT_SENTENCE, CLASSIFIER, TAGGER, SPAN_LABELER, CHOICE_SCORER)

# Hugging Face task models (BertForPreTraining, BertForMaskedLM) put the encoder under this
# prefix; a bare BertModel file has no prefix.
HF_ENCODER_PREFIX = "bert."


@dataclasses.dataclass(frozen=True)
class WeightName:
  """One weight under its three names.

  Attributes:
    item: the checkpoint item holding it (encoder, masked_lm, next_sentence, a head).
    bert_tf: our variable path.
    tf1: the original Google TF1 variable name, or None.
    hf: the Hugging Face tensor name; encoder rows are relative to BertModel (no "bert.").
    keras_hub: the KerasHub variable path (`variable.path` of a BertBackbone's, or of a
      BertTextClassifier's head), or None.
    tf1_transpose: the TF1 array is the transpose of ours.
    hf_transpose: the Hugging Face array is the transpose of ours.
    keras_hub_reshape: the KerasHub array holds ours in another shape (attention heads on
      their own axis).
  """

  item: str
  bert_tf: str
  tf1: Optional[str]
  hf: str
  tf1_transpose: bool = False
  hf_transpose: bool = False
  keras_hub: Optional[str] = None
  keras_hub_reshape: bool = False

  def for_layer(self, i: int) -> "WeightName":
    def fill(name):
      return None if name is None else name.format(i=i)
    return dataclasses.replace(self, bert_tf=fill(self.bert_tf), tf1=fill(self.tf1),
                               hf=fill(self.hf), keras_hub=fill(self.keras_hub))

  @property
  def per_layer(self) -> bool:
    return "{i}" in self.bert_tf

  def name_in(self, fmt: str) -> Optional[str]:
    """This weight's name in `fmt` (bert_tf.checkpoints.files.FORMATS), None where it
    has none."""
    return {"bert_tf": self.bert_tf, "google_tf1": self.tf1, "huggingface": self.hf,
            "keras_hub": self.keras_hub}[fmt]

  def transposed_in(self, fmt: str) -> bool:
    return {"bert_tf": False, "google_tf1": self.tf1_transpose,
            "huggingface": self.hf_transpose, "keras_hub": False}[fmt]

  def reshaped_in(self, fmt: str) -> bool:
    """Whether `fmt` stores this weight in another shape than ours (same values, same
    order)."""
    return fmt == "keras_hub" and self.keras_hub_reshape


def _dense(item, ours, tf1, hf, keras_hub=None, keras_hub_reshape=False):
  """A dense layer: kernel and bias; the torch weight is [out, in]."""
  return [
      WeightName(item, f"{ours}/kernel", tf1 and f"{tf1}/kernel", f"{hf}.weight",
                 hf_transpose=True, keras_hub=keras_hub and f"{keras_hub}/kernel",
                 keras_hub_reshape=keras_hub_reshape),
      WeightName(item, f"{ours}/bias", tf1 and f"{tf1}/bias", f"{hf}.bias",
                 keras_hub=keras_hub and f"{keras_hub}/bias",
                 keras_hub_reshape=keras_hub_reshape),
  ]


def _layer_norm(item, ours, tf1, hf, keras_hub=None):
  """A LayerNorm: gamma and beta (Hugging Face's weight and bias)."""
  return [
      WeightName(item, f"{ours}/gamma", f"{tf1}/gamma", f"{hf}.weight",
                 keras_hub=keras_hub and f"{keras_hub}/gamma"),
      WeightName(item, f"{ours}/beta", f"{tf1}/beta", f"{hf}.bias",
                 keras_hub=keras_hub and f"{keras_hub}/beta"),
  ]


def _head(item, hf, tf1_scope=None, keras_hub=None):
  """A task head's dense layer ([H, classes] kernel); TF1 stores it as [classes, H]
  under `tf1_scope` ("": at the top; None: no TF1 name)."""
  def tf1(name):
    return None if tf1_scope is None else "/".join(filter(None, (tf1_scope, name)))
  return [
      WeightName(item, f"{item}/dense/kernel", tf1("output_weights"), f"{hf}.weight",
                 tf1_transpose=True, hf_transpose=True,
                 keras_hub=keras_hub and f"{keras_hub}/kernel"),
      WeightName(item, f"{item}/dense/bias", tf1("output_bias"), f"{hf}.bias",
                 keras_hub=keras_hub and f"{keras_hub}/bias"),
  ]


_L = "transformer_layer_{i}"
_TF1_L = "bert/encoder/layer_{i}"
_HF_L = "encoder.layer.{i}"
_KH_L = "transformer_layer_{i}"
_KH_ATTENTION = f"{_KH_L}/self_attention_layer"

TABLE: Tuple[WeightName, ...] = tuple(
    # Embeddings: three tables [V, H], [P, H], [S, H], then LayerNorm.
    [
        WeightName(ENCODER, "embeddings/word_embeddings", "bert/embeddings/word_embeddings",
                   "embeddings.word_embeddings.weight",
                   keras_hub="token_embedding/embeddings"),
        WeightName(ENCODER, "embeddings/position_embeddings",
                   "bert/embeddings/position_embeddings",
                   "embeddings.position_embeddings.weight",
                   keras_hub="position_embedding/embeddings"),
        WeightName(ENCODER, "embeddings/token_type_embeddings",
                   "bert/embeddings/token_type_embeddings",
                   "embeddings.token_type_embeddings.weight",
                   keras_hub="segment_embedding/embeddings"),
    ]
    + _layer_norm(ENCODER, "embeddings/layer_norm", "bert/embeddings/LayerNorm",
                  "embeddings.LayerNorm", "embeddings_layer_norm")
    # Self-attention of layer i: query, key, value [H, H], all heads side by side in the
    # same order in every format (KerasHub: on their own axis); then the output projection.
    + _dense(ENCODER, f"{_L}/attention/query", f"{_TF1_L}/attention/self/query",
             f"{_HF_L}.attention.self.query", f"{_KH_ATTENTION}/query", True)
    + _dense(ENCODER, f"{_L}/attention/key", f"{_TF1_L}/attention/self/key",
             f"{_HF_L}.attention.self.key", f"{_KH_ATTENTION}/key", True)
    + _dense(ENCODER, f"{_L}/attention/value", f"{_TF1_L}/attention/self/value",
             f"{_HF_L}.attention.self.value", f"{_KH_ATTENTION}/value", True)
    + _dense(ENCODER, f"{_L}/attention/output", f"{_TF1_L}/attention/output/dense",
             f"{_HF_L}.attention.output.dense", f"{_KH_ATTENTION}/attention_output", True)
    + _layer_norm(ENCODER, f"{_L}/attention_layer_norm",
                  f"{_TF1_L}/attention/output/LayerNorm", f"{_HF_L}.attention.output.LayerNorm",
                  f"{_KH_L}/self_attention_layer_norm")
    # Feed-forward network of layer i: [H, I] then [I, H], then LayerNorm.
    + _dense(ENCODER, f"{_L}/intermediate", f"{_TF1_L}/intermediate/dense",
             f"{_HF_L}.intermediate.dense", f"{_KH_L}/feedforward_intermediate_dense")
    + _dense(ENCODER, f"{_L}/output", f"{_TF1_L}/output/dense", f"{_HF_L}.output.dense",
             f"{_KH_L}/feedforward_output_dense")
    + _layer_norm(ENCODER, f"{_L}/output_layer_norm", f"{_TF1_L}/output/LayerNorm",
                  f"{_HF_L}.output.LayerNorm", f"{_KH_L}/feedforward_layer_norm")
    # Pooler: tanh(dense) over [CLS].
    + _dense(ENCODER, "pooler", "bert/pooler/dense", "pooler.dense", "pooled_dense")
    # Masked-LM head: transform dense + LayerNorm, and the vocabulary bias [V]; the output
    # matrix is the word-embedding table in every format.
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
    ]
    # The fine-tuning heads, each one dense layer: sentence classification or regression
    # (the original run_classifier.py's output_weights [classes, H]), token tagging,
    # SQuAD spans (run_squad.py's cls/squad, [2, H]: start, end) and multiple choice
    # ([1, H]: one score per choice). Hugging Face names three of them alike; its
    # config's architecture tells them apart (bert_tf.checkpoints.architectures).
    + _head(CLASSIFIER, "classifier", tf1_scope="", keras_hub="logits")
    + _head(TAGGER, "classifier")
    + _head(SPAN_LABELER, "qa_outputs", tf1_scope="cls/squad")
    + _head(CHOICE_SCORER, "classifier"))

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
  """{name in fmt: row}.

  Raises:
    ValueError: `fmt` has no name for some of the rows, naming their items.
  """
  unnamed = sorted({row.item for row in rows if row.name_in(fmt) is None},
                   key=ITEMS.index)
  if unnamed:
    raise ValueError(f"The {fmt} format has no names for the checkpoint item(s) "
                     f"{', '.join(unnamed)}")
  return {row.name_in(fmt): row for row in rows}


def items_present(names: Iterable[str], fmt: str) -> Tuple[str, ...]:
  """Which checkpoint items have at least one weight among `names` (canonical, in fmt).

  Layer indices do not matter: any layer's name marks the encoder as present. Names
  that several items share (Hugging Face's `classifier.*`) mark none of them: the
  model's architecture tells which it is (bert_tf.checkpoints.architectures).
  """
  owners = {}
  for row in TABLE:
    if row.name_in(fmt) is not None:
      owners.setdefault(row.name_in(fmt), set()).add(row.item)
  patterns = {}
  for template, items in owners.items():
    if len(items) > 1:
      continue
    regex = re.escape(template).replace(re.escape("{i}"), r"\d+")
    patterns.setdefault(next(iter(items)), []).append(re.compile(f"^{regex}$"))
  names = list(names)
  return tuple(item for item in ITEMS
               if any(p.match(n) for p in patterns.get(item, []) for n in names))


def layer_index(name: str, fmt: str) -> Optional[int]:
  """The Transformer layer index in a name of `fmt`, or None."""
  pattern = {"bert_tf": r"transformer_layer_(\d+)/", "google_tf1": r"/layer_(\d+)/",
             "huggingface": r"encoder\.layer\.(\d+)\.",
             "keras_hub": r"transformer_layer_(\d+)/"}[fmt]
  match = re.search(pattern, name)
  return int(match.group(1)) if match else None
