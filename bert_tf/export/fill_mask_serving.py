"""Serving the pretraining model as fill-mask: top-k tokens for every [MASK].

In raw text the literal "[MASK]" marks a masked token; the text between marks is
tokenized as usual. With token ids in, every id equal to the vocab's [MASK] id
is a masked position.
"""

import tensorflow as tf

from bert_tf import constants
from bert_tf.export import serving_module

MASK_COUNT = "mask_count"
MASK_POSITIONS = "mask_positions"
TOP_K_IDS = "top_k_ids"
TOP_K_TOKENS = "top_k_tokens"
TOP_K_PROBABILITIES = "top_k_probabilities"
TOP_K_LOGITS = "top_k_logits"
MASKS_DROPPED = "masks_dropped"


@serving_module.register_serving("fill_mask")
class FillMaskServing(serving_module.ServingModule):
  """A BertPretrainer's masked-LM head over the [MASK] tokens of each input.

  Outputs (P = max_masks, K = top_k):
    mask_count: int32 [B], [MASK]s predicted: the first P of the packed input.
    masks_dropped: int32 [B], [MASK]s not predicted: those beyond P, and with raw
      text in, also those cut by truncation.
    mask_positions: int32 [B, P], their positions in the packed sequence (0 pads).
    top_k_ids: int32 [B, P, K], best token ids, most probable first (0 pads).
    top_k_tokens: string [B, P, K], those tokens ("" pads).
    top_k_probabilities: float32 [B, P, K], their softmax probabilities (0 pads).
    top_k_logits: float32 [B, P, K], their logits (what transformers'
      BertForMaskedLM gives at that position for that token; 0 pads).
  """

  answer_outputs = (frozenset({MASK_COUNT, TOP_K_TOKENS, TOP_K_PROBABILITIES}),)

  @staticmethod
  def answer(outputs, row):
    text = serving_module.text_of
    return {"masks": [[[text(t), float(p)] for t, p in zip(outputs[TOP_K_TOKENS][row, m],
                                                           outputs[TOP_K_PROBABILITIES][row, m])]
                      for m in range(int(outputs[MASK_COUNT][row]))]}

  @staticmethod
  def describe_answer(answer):
    return [f"  [MASK] {m + 1}: " + ", ".join(f"{t} {p:.3f}" for t, p in candidates)
            for m, candidates in enumerate(answer["masks"])] or ["  no [MASK] in the text"]

  def __init__(self, pretrainer, text_encoder, top_k=5, max_masks=20,
               name="fill_mask_serving"):
    super().__init__(pretrainer, text_encoder, (serving_module.TEXT,), name=name)
    if top_k < 1 or max_masks < 1:
      raise ValueError(f"top_k and max_masks must be positive, got {top_k}, {max_masks}")
    self.top_k = int(top_k)
    self.max_masks = int(max_masks)

  def encode_text(self, texts):
    """Raw text with "[MASK]" marks -> int32 [B, T] inputs holding the [MASK] id there."""
    return self.text_encoder.encode_with_masks(texts[serving_module.TEXT])

  def predict_text(self, texts):
    text = tf.convert_to_tensor(texts[serving_module.TEXT], tf.string)
    result = self.predict_token_ids(self.encode_text(texts))
    marks = tf.cast(tf.strings.split(text, sep=constants.MASK_TOKEN).row_lengths(), tf.int32) - 1
    result[MASKS_DROPPED] = marks - result[MASK_COUNT]
    return result

  def predict_token_ids(self, inputs):
    word_ids = tf.cast(inputs[constants.INPUT_WORD_IDS], tf.int32)
    is_mask = tf.logical_and(tf.equal(word_ids, self.text_encoder.mask_id),
                             tf.not_equal(tf.cast(inputs[constants.INPUT_MASK], tf.int32), 0))
    seq_length = tf.shape(word_ids)[1]
    positions = tf.ragged.boolean_mask(
        tf.broadcast_to(tf.range(seq_length), tf.shape(word_ids)), is_mask)
    positions = positions[:, :self.max_masks]
    count = tf.cast(positions.row_lengths(), tf.int32)
    dropped = tf.reduce_sum(tf.cast(is_mask, tf.int32), axis=1) - count
    dense_positions = positions.to_tensor(default_value=0, shape=[None, self.max_masks])
    model_inputs = dict(inputs)
    model_inputs[constants.MASKED_LM_POSITIONS] = dense_positions
    model_inputs = {name: tf.cast(model_inputs[name], tf.int32)
                    for name in (*constants.ENCODER_INPUTS, constants.MASKED_LM_POSITIONS)}
    logits = tf.cast(self.model(model_inputs, training=False)[constants.MLM_LOGITS],
                     tf.float32)
    probabilities = tf.nn.softmax(logits, axis=-1)
    top_probabilities, top_ids = tf.math.top_k(probabilities, k=self.top_k)
    valid = tf.sequence_mask(count, self.max_masks)[:, :, tf.newaxis]
    valid = tf.broadcast_to(valid, tf.shape(top_ids))
    top_ids = tf.where(valid, top_ids, 0)
    top_tokens = tf.where(valid, self.text_encoder.tokenizer.ids_to_tokens(top_ids), "")
    return {
        MASK_COUNT: count,
        MASKS_DROPPED: dropped,
        MASK_POSITIONS: dense_positions,
        TOP_K_IDS: top_ids,
        TOP_K_TOKENS: top_tokens,
        TOP_K_PROBABILITIES: tf.where(valid, top_probabilities, 0.0),
        TOP_K_LOGITS: tf.where(valid, tf.gather(logits, top_ids, batch_dims=2), 0.0),
    }
