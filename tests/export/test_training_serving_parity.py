"""Training features equal the served model's inputs, id for id, for every task family.

Each family's featurizer (what fine-tuning trains on) and the export's in-graph text
encoding (what the served model sees for the same raw text) are run on realistic rows,
including texts longer than seq_length and pairs whose two segments are both long with an
odd token budget, where the original BERT rule cuts the second segment on a tie.
"""

import types

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import constants
from bert_tf.data.pipelines import featurizers
from bert_tf.data.pipelines.loaders import multiple_choice
from bert_tf.data.pipelines.loaders import sentence
from bert_tf.data.pipelines.loaders import tagging
from bert_tf.data.task_files import glue
from bert_tf.data.task_files import squad
from bert_tf.data.pipelines import squad_features
from bert_tf.data.task_files import swag
from bert_tf.data.task_files.conll import TaggingExample
from bert_tf.export import classifier_serving
from bert_tf.export import squad_serving
from bert_tf.export import tagging_serving
from bert_tf.export import text_encoding
from bert_tf.text.tokenizer import BertWordPieceTokenizer

# Whole words, and stems whose endings come as "##" pieces; words of the rows below that
# are in neither become [UNK].
WORDS = ("the a an of to in on his he him as only whom called witness brother accused "
         "evidence deliberately referring amrozi eu rejects german call boycott british "
         "lamb peter blackburn man is playing guitar while woman sings song stage she "
         "walks away then sits down picks up where was steve jobs born and raised apple "
         "company founded california san francisco 1955 moved with family . , \" ' ? - "
         "( )").split()
PIECES = ("distort", "##ing", "##ed", "##s", "##ly", "mount", "##ain", "view", "##er")
SEQ_LENGTH = 32


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
  path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
  tokens = list(dict.fromkeys((*constants.SPECIAL_TOKENS, *WORDS, *PIECES)))
  path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
  return str(path)


@pytest.fixture(scope="module")
def text_encoder(vocab_file):
  return text_encoding.TextEncoder(BertWordPieceTokenizer(vocab_file, lower_case=True),
                                   SEQ_LENGTH)


def _padded(features, key):
  """A featurizer's unpadded [.., T_i] feature padded with zeros to SEQ_LENGTH."""
  value = np.asarray(features[key])
  width = [(0, 0)] * (value.ndim - 1) + [(0, SEQ_LENGTH - value.shape[-1])]
  return np.pad(value, width)


def _assert_same_inputs(training, served):
  """Training features (unpadded rows) == served dense int32 [N, T] inputs."""
  for key in constants.ENCODER_INPUTS:
    trained = np.stack([_padded(f, key) for f in training])
    np.testing.assert_array_equal(trained, np.asarray(served[key]), err_msg=key)


def _num_pieces(text_encoder, texts):
  return text_encoder.pieces(tf.constant(texts)).row_lengths().numpy().tolist()


MRPC = [
    ("Lena told her sister , whom she called \" the expert \" , of quietly "
     "changing their travel plans .",
     "Calling her only \" the expert \" , Lena told her sister of quietly changing "
     "their travel plans ."),
    ("ACME drops Danish plan to tax imported cheese .", "Maria Lindqvist"),
    ("The man is playing the guitar while the woman sings a song on the stage , then "
     "she walks away and sits down .",
     "A man is playing a guitar ."),
]


def test_sentence_pairs_train_on_what_the_classifier_serves(vocab_file, text_encoder):
  lengths = [_num_pieces(text_encoder, list(pair)) for pair in zip(*MRPC)]
  # The first pair is long on both sides with an odd budget (32 - 3 = 29).
  assert min(lengths[0][0], lengths[1][0]) > (SEQ_LENGTH - 3) // 2
  examples = [glue.SentenceExample(i, a, b, "1") for i, (a, b) in enumerate(MRPC)]
  training = list(sentence.sentence_dataset(examples, featurizers.PieceTokenizer(vocab_file), SEQ_LENGTH,
                                      [1] * len(MRPC), regression=False).as_numpy_iterator())
  serving = classifier_serving.ClassifierServing(
      types.SimpleNamespace(num_classes=2), text_encoder, pair=True)
  served = serving.encode_text({"text": tf.constant([a for a, _ in MRPC]),
                                "text_b": tf.constant([b for _, b in MRPC])})
  _assert_same_inputs(training, served)
  # The tie is cut in B: A keeps 15 pieces, B 14.
  type_ids = served[constants.INPUT_TYPE_IDS][0].numpy()
  assert (type_ids == 0).sum() == 15 + 2 and (type_ids == 1).sum() == 14 + 1


def test_single_sentences_longer_than_seq_length_train_on_what_is_served(vocab_file,
                                                                        text_encoder):
  texts = [MRPC[0][0] + " " + MRPC[0][1], "the witness"]
  assert _num_pieces(text_encoder, texts)[0] > SEQ_LENGTH
  examples = [glue.SentenceExample(i, t, None, "1") for i, t in enumerate(texts)]
  training = list(sentence.sentence_dataset(examples, featurizers.PieceTokenizer(vocab_file), SEQ_LENGTH,
                                      [1, 0], regression=False).as_numpy_iterator())
  serving = classifier_serving.ClassifierServing(
      types.SimpleNamespace(num_classes=2), text_encoder)
  _assert_same_inputs(training, serving.encode_text({"text": tf.constant(texts)}))


def test_conll_sentences_train_on_the_windows_tagging_serves_with_aligned_labels(vocab_file,
                                                                               text_encoder):
  sentences = [
      ("Maria Lindqvist accused the ACME board of quietly changing evidence in Mountain "
       "View , California , where Steve Jobs was born in 1955 and raised with his family "
       "in San Francisco .").split(),
      "ACME drops Danish plan to tax imported cheese .".split(),
  ]
  assert _num_pieces(text_encoder, [" ".join(sentences[0])])[0] > SEQ_LENGTH
  label_names = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG"]
  tags = [[label_names[(3 * i) % len(label_names)] for i in range(len(words))]
          for words in sentences]
  examples = [TaggingExample(i, w, t) for i, (w, t) in enumerate(zip(sentences, tags))]
  stride = 4
  training = list(tagging.tagging_dataset(
      examples, featurizers.PieceTokenizer(vocab_file), SEQ_LENGTH, label_names,
      stride).as_numpy_iterator())
  serving = tagging_serving.TaggingServing(
      types.SimpleNamespace(num_classes=len(label_names)), text_encoder, label_names,
      window_stride=stride)
  # Every window of every sentence, in the same order.
  windows_of = [int(f[constants.EXAMPLE_INDEX]) for f in training]
  assert windows_of.count(0) >= 2 and windows_of[-1:] == [1] and windows_of.count(1) == 1
  _assert_same_inputs(training, serving.encode_text(
      {"text": tf.constant([" ".join(w) for w in sentences])}))
  # Each word's tag sits on its first piece in exactly one window, in word order.
  tokenizer = text_encoder.tokenizer
  for index, (words, word_tags) in enumerate(zip(sentences, tags)):
    first_ids = [p[0] for p in tokenizer.tokenize_pieces(tf.constant(words)).to_list()]
    labelled, ids = [], []
    for features in training:
      if features[constants.EXAMPLE_INDEX] == index:
        scored = features[constants.LABEL_IDS] != constants.IGNORE_LABEL
        labelled.extend(label_names[t] for t in features[constants.LABEL_IDS][scored])
        ids.extend(features[constants.INPUT_WORD_IDS][scored])
    assert labelled == word_tags
    assert ids == first_ids


def test_swag_choices_train_on_what_the_pair_encoder_serves(vocab_file, text_encoder):
  context = ("The man is playing the guitar while the woman sings a song on the stage , "
             "then she walks away .")
  endings = ["She sits down and picks up the guitar while the man sings a song .",
             "The woman walks away .", "Then she sits down .",
             "The brother called the witness ."]
  example = swag.MultipleChoiceExample(0, context, endings, 1)
  [training] = list(multiple_choice.multiple_choice_dataset([example], featurizers.PieceTokenizer(vocab_file),
                                               SEQ_LENGTH, len(endings)).as_numpy_iterator())
  served = text_encoder.encode(tf.constant([context] * len(endings)), tf.constant(endings))
  _assert_same_inputs([{k: training[k][c] for k in constants.ENCODER_INPUTS}
                       for c in range(len(endings))], served)
  # The first choice cuts both segments; the rest cut only the context.
  type_ids = served[constants.INPUT_TYPE_IDS][0].numpy()
  assert (type_ids == 0).sum() == 15 + 2 and (type_ids == 1).sum() == 14 + 1


def test_squad_windows_are_what_squad_serving_encodes(vocab_file, text_encoder):
  context = ("Steve Jobs was born in San Francisco , California in 1955 . He moved with "
             "his family to Mountain View , where he founded the company Apple with his "
             "brother and was raised .")
  questions = ["Where was Steve Jobs born ?",
               "Where was the company that Steve Jobs founded with his brother called "
               "Apple founded and where was he raised with his family ?"]
  max_query_length = 12
  assert _num_pieces(text_encoder, [context])[0] > SEQ_LENGTH
  assert _num_pieces(text_encoder, questions)[1] > max_query_length
  data = [{"title": "t", "paragraphs": [{"context": context, "qas": [
      {"id": str(i), "question": q, "answers": []} for i, q in enumerate(questions)]}]}]
  examples, _ = squad.read_squad_examples(data, is_training=False,
                                          version_2_with_negative=False)
  tokenizer = text_encoder.tokenizer
  features = squad_features.convert_examples_to_features(
      examples, squad_features.tokenize_fn_from_tokenizer(tokenizer),
      {t: i for i, t in enumerate(tokenizer.vocab)}, max_seq_length=SEQ_LENGTH,
      doc_stride=8, max_query_length=max_query_length)
  assert len([f for f in features if f.doc_span_index == 0]) == 2 and len(features) > 2
  serving = squad_serving.SquadServing(None, text_encoder,
                                       max_query_length=max_query_length, doc_stride=8)
  served = serving.encode_text({"question": tf.constant(questions),
                                "context": tf.constant([context] * 2)})
  # Serving packs every doc_stride window of each question, in the evaluation's order.
  arrays = squad_features.features_to_arrays(features)
  for key in constants.ENCODER_INPUTS:
    np.testing.assert_array_equal(arrays[key], served[key], err_msg=key)
