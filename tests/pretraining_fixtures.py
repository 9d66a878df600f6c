"""Small vocab, generated text and pretraining TFRecords shared by the data tests."""

import os
import random

import numpy as np

from bert_tf import constants
from bert_tf.data.creation import pretraining_chunks
from bert_tf.data.records import pretraining_format
from bert_tf.data.creation import pretraining_instances as pi

# Whole words, plus stems that only appear with "##" continuations.
WORDS = ("the a cat dog sat on mat ran far big small red blue house tree sky sun moon "
         "and or but if then when where who what why how is was are were be been "
         "green yellow river stone cloud rain snow wind fire water light dark old new").split()
STEMS = ("walk", "jump", "play", "talk", "look")
SUFFIXES = ("##ing", "##ed", "##er", "##s")
VOCAB = (list(constants.SPECIAL_TOKENS) + [".", ","] + WORDS + list(STEMS)
         + list(SUFFIXES))


def write_vocab(directory, tokens=VOCAB, name="vocab.txt") -> str:
  path = os.path.join(str(directory), name)
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(tokens) + "\n")
  return path


def random_sentence(rng: random.Random) -> str:
  words = []
  for _ in range(rng.randint(3, 14)):
    if rng.random() < 0.2:
      words.append(rng.choice(STEMS) + rng.choice(SUFFIXES)[2:])
    else:
      words.append(rng.choice(WORDS))
  return " ".join(words).capitalize() + "."


def random_text(num_documents: int, seed: int = 0, min_sentences=2, max_sentences=12) -> str:
  """Documents of random sentences, one per line, a blank line between documents."""
  rng = random.Random(seed)
  docs = ["\n".join(random_sentence(rng)
                    for _ in range(rng.randint(min_sentences, max_sentences)))
          for _ in range(num_documents)]
  return "\n\n".join(docs) + "\n"


def write_text(directory, text: str, name="corpus.txt") -> str:
  path = os.path.join(str(directory), name)
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)
  return path


def random_id_documents(num_documents: int, seed: int = 0, vocab_size: int = len(VOCAB),
                        min_sentences=1, max_sentences=20, min_len=3, max_len=30):
  """Tokenized documents without a tokenizer: (tokens, sentence_offsets, document_offsets).

  Ids start after the special tokens, every tenth or so is a "##" piece of VOCAB.
  """
  rng = np.random.default_rng(seed)
  sentences_per_doc = rng.integers(min_sentences, max_sentences + 1, num_documents)
  lengths = rng.integers(min_len, max_len + 1, int(sentences_per_doc.sum()))
  sentence_offsets = np.concatenate([[0], np.cumsum(lengths)])
  tokens = rng.integers(len(constants.SPECIAL_TOKENS), vocab_size,
                        int(sentence_offsets[-1])).astype(np.int32)
  document_offsets = np.concatenate([[0], np.cumsum(sentences_per_doc)])
  return tokens, sentence_offsets, document_offsets


def special_ids() -> pi.SpecialIds:
  return pi.SpecialIds.from_vocab(VOCAB)


def write_record_file(path: str, num_documents: int = 40, seed: int = 0,
                      settings: pretraining_format.PretrainingDataSettings = None,
                      gzip: bool = False):
  """Writes a TFRecord file of examples made from random id documents; returns the count."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  settings = settings or pretraining_format.PretrainingDataSettings(
      max_seq_length=32, max_predictions_per_seq=5, dupe_factor=1)
  tokens, sentence_offsets, document_offsets = random_id_documents(num_documents, seed)
  rng, np_rng = pretraining_chunks.chunk_rngs(settings.random_seed + seed, 0)
  options = tf.io.TFRecordOptions(compression_type="GZIP" if gzip else "")
  count = 0
  with tf.io.TFRecordWriter(path, options) as writer:
    for records in pretraining_chunks.create_examples_from_documents(
        tokens, sentence_offsets, document_offsets, settings, special_ids(), rng, np_rng):
      for r in records:
        writer.write(r)
        count += 1
  return count
