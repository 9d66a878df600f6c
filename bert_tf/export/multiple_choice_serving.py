"""Serving multiple choice (SWAG): a context and its candidate endings in, the choice out.

Each (context, ending) pair is packed as `[CLS] context [SEP] ending [SEP]` by the
packer of the multiple_choice record kind's featurizer
(`bert_tf.data.pipelines.loaders.multiple_choice`), so the served inputs are the
trained ones; the model scores the C pairs of a row together and
a softmax over them gives the probabilities.
"""

import tensorflow as tf

from bert_tf import constants
from bert_tf.export import serving_module
from bert_tf.models.bert_classifier import LOGITS

PROBABILITIES = "probabilities"
CHOICE = "choice"
CHOSEN_ENDING = "chosen_ending"
TRUNCATED_TOKENS = "truncated_tokens"


def ending_name(index: int) -> str:
  """The raw-text input of ending `index`: ending0, ending1, ... as SWAG's CSV names them."""
  return f"ending{index}"


@serving_module.register_serving("multiple_choice")
class MultipleChoiceServing(serving_module.ServingModule):
  """A BertMultipleChoice served on a context and its C endings.

  Raw-text inputs: context, ending0 ... ending{C-1}, string [B].
  serve_token_ids inputs: input_word_ids, input_mask, input_type_ids, int32
  [B, C, T], one packed pair per choice.
  Outputs of every signature:
    logits: float32 [B, C], the score of each choice.
    probabilities: float32 [B, C], softmax over the choices.
    choice: int32 [B], the most probable choice.
  Raw-text signatures also give:
    chosen_ending: string [B], the text of that ending.
    truncated_tokens: int32 [B], WordPieces cut to fit seq_length, over all C pairs.
  """

  answer_outputs = (frozenset({CHOICE, CHOSEN_ENDING, PROBABILITIES}),)

  @staticmethod
  def answer(outputs, row):
    return {"choice": int(outputs[CHOICE][row]),
            "ending": serving_module.text_of(outputs[CHOSEN_ENDING][row]),
            "probabilities": [float(p) for p in outputs[PROBABILITIES][row]]}

  @staticmethod
  def describe_answer(answer):
    probabilities = ", ".join(f"{p:.3f}" for p in answer["probabilities"])
    return [f"  choice {answer['choice']}: \"{answer['ending']}\" "
            f"(probabilities {probabilities})"]

  def __init__(self, multiple_choice_model, text_encoder, num_choices=4,
               name="multiple_choice_serving"):
    if num_choices != multiple_choice_model.num_choices:
      raise ValueError(f"num_choices {num_choices} != the model's "
                       f"{multiple_choice_model.num_choices}")
    self.num_choices = int(num_choices)
    inputs = (serving_module.CONTEXT,) + tuple(ending_name(i) for i in range(self.num_choices))
    super().__init__(multiple_choice_model, text_encoder, inputs, name=name)
    self.token_ids_shape = (None, self.num_choices, None)

  def _encode(self, texts):
    """(int32 [B, C, T] inputs, int32 [B] truncated pieces, string [B, C] endings)."""
    context = tf.convert_to_tensor(texts[serving_module.CONTEXT], tf.string)
    endings = tf.stack([tf.convert_to_tensor(texts[ending_name(i)], tf.string)
                        for i in range(self.num_choices)], axis=1)
    inputs, truncated = self.text_encoder.encode_with_truncation(
        tf.repeat(context, self.num_choices), tf.reshape(endings, [-1]))
    shape = [-1, self.num_choices, self.seq_length]
    inputs = {name: tf.reshape(value, shape) for name, value in inputs.items()}
    truncated = tf.reduce_sum(tf.reshape(truncated, [-1, self.num_choices]), axis=1)
    return inputs, truncated, endings

  def encode_text(self, texts):
    return self._encode(texts)[0]

  def predict_token_ids(self, inputs):
    inputs = {name: tf.cast(inputs[name], tf.int32) for name in constants.ENCODER_INPUTS}
    logits = tf.cast(self.model(inputs, training=False)[LOGITS], tf.float32)
    return {LOGITS: logits, PROBABILITIES: tf.nn.softmax(logits, axis=-1),
            CHOICE: tf.argmax(logits, axis=-1, output_type=tf.int32)}

  def predict_text(self, texts):
    inputs, truncated, endings = self._encode(texts)
    result = self.predict_token_ids(inputs)
    result[CHOSEN_ENDING] = tf.gather(endings, result[CHOICE], batch_dims=1)
    result[TRUNCATED_TOKENS] = truncated
    return result
