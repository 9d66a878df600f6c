"""Pretraining instances from tokenized documents, with the original BERT release's semantics.

The work is split so that only the part that must be sequential runs per instance in Python:

1. `create_instance_spans` walks each document's sentences exactly like the original
   `create_instances_from_document` (target length, shortened with `short_seq_prob` once
   per document pass; chunks of consecutive sentences; random `a_end`; 50% random next
   segment from another document, putting back the unused sentences) and records each
   instance as four token offsets into one flat token array.
2. `truncate_spans` applies the original `truncate_seq_pair` (remove from the longer segment,
   front or back with probability 1/2 each) in closed form over all instances at once.
3. `build_sequences` and `mask_sequences` assemble and mask (80% [MASK], 10% random id,
   10% kept; whole-word option) a batch of instances with numpy, with no Python loop per
   token; `example_features` names their arrays as the original release's features,
   which `example_encoding.serialize_examples` encodes as `tf.train.Example` bytes.

Tokens are ids throughout: a document is a run of sentences, a sentence a run of ids in a
flat int32 array (`sentence_offsets` into it, `document_offsets` into the sentences).
"""

import dataclasses
import random
from typing import Dict, Sequence

import numpy as np

from bert_tf import constants
from bert_tf.text import vocab as vocab_lib
from bert_tf.utils import errors


@dataclasses.dataclass(frozen=True)
class SpecialIds:
  """What masking needs to know about the vocab.

  Attributes:
    cls_id, sep_id, mask_id: ids of [CLS], [SEP], [MASK].
    vocab_size: random replacement ids are drawn uniformly from [0, vocab_size), as the
      original draws from the whole vocab.
    is_continuation: bool numpy array [vocab_size], True for "##" pieces (used by
      whole-word masking).
  """

  cls_id: int
  sep_id: int
  mask_id: int
  vocab_size: int
  is_continuation: np.ndarray

  @classmethod
  def from_vocab(cls, tokens: Sequence[str], vocab_file: str = "<vocab>") -> "SpecialIds":
    """Builds from the vocab's tokens in id order (`bert_tf.text.vocab.load_vocab`).

    Raises:
      ValueError: naming `vocab_file` and every special token the vocab lacks.
    """
    special = vocab_lib.special_token_ids(tokens, vocab_file)
    return cls(cls_id=special[constants.CLS_TOKEN], sep_id=special[constants.SEP_TOKEN],
               mask_id=special[constants.MASK_TOKEN], vocab_size=len(tokens),
               is_continuation=np.array([t.startswith("##") for t in tokens], dtype=bool))


@dataclasses.dataclass
class InstanceSpans:
  """Instances as token offsets into one flat token array (numpy arrays [N]).

  Segment A is tokens[a_start:a_start + a_length], B is tokens[b_start:b_start + b_length].
  `is_random_next` is the next-sentence label (1: B comes from another document);
  `short_target` marks instances made while the document's target length was shortened;
  `single_sentence` marks chunks of one sentence, whose B is always random (as in the
  original), which puts real text's share of random next segments a few points above 50%.
  """

  a_start: np.ndarray
  a_length: np.ndarray
  b_start: np.ndarray
  b_length: np.ndarray
  is_random_next: np.ndarray
  short_target: np.ndarray
  single_sentence: np.ndarray

  def __len__(self):
    return len(self.a_start)

  def take(self, index) -> "InstanceSpans":
    return InstanceSpans(**{f.name: getattr(self, f.name)[index]
                            for f in dataclasses.fields(self)})


def create_instance_spans(sentence_offsets: Sequence[int], document_offsets: Sequence[int],
                          max_seq_length: int, short_seq_prob: float, dupe_factor: int,
                          rng: random.Random):
  """Cuts documents into segment pairs (before truncation), `dupe_factor` passes over all.

  Args:
    sentence_offsets: int sequence [num_sentences + 1]; sentence s is
      tokens[sentence_offsets[s]:sentence_offsets[s + 1]], every sentence non-empty.
    document_offsets: int sequence [num_documents + 1]; document d is sentences
      document_offsets[d] .. document_offsets[d + 1] - 1, every document non-empty.
    max_seq_length: length of [CLS] A [SEP] B [SEP].
    short_seq_prob: probability that a document pass uses a random shorter target.
    dupe_factor: number of passes over the documents.
    rng: the random source of every draw (random.Random, as the original uses).

  Returns:
    (InstanceSpans (int64 arrays) in creation order, number of document passes whose
    target length was shortened).
  """
  sb = [int(x) for x in sentence_offsets]
  db = [int(x) for x in document_offsets]
  num_docs = len(db) - 1
  if num_docs < 1:
    raise errors.InputError("No documents to create instances from")
  max_num_tokens = max_seq_length - 3
  if max_num_tokens < 2:
    raise errors.InputError(f"max_seq_length must be at least 5, got {max_seq_length}")
  rand, randint = rng.random, rng.randint
  a_start, a_end_tok, b_start, b_end_tok, random_next, short_flags = [], [], [], [], [], []
  short_passes = 0
  single = []
  for _ in range(dupe_factor):
    for d in range(num_docs):
      first, end = db[d], db[d + 1]
      target = max_num_tokens
      short = False
      if rand() < short_seq_prob:
        target = randint(2, max_num_tokens)
        short = True
        short_passes += 1
      chunk_start = first
      i = first
      while i < end:
        if i == end - 1 or sb[i + 1] - sb[chunk_start] >= target:
          num_sentences = i + 1 - chunk_start
          a_end = randint(1, num_sentences - 1) if num_sentences >= 2 else 1
          single.append(num_sentences == 1)
          a0, a1 = sb[chunk_start], sb[chunk_start + a_end]
          if num_sentences == 1 or rand() < 0.5:
            target_b = target - (a1 - a0)
            for _ in range(10):
              other = randint(0, num_docs - 1)
              if other != d:
                break
            other_last = db[other + 1] - 1
            j = randint(db[other], other_last)
            b0 = sb[j]
            while sb[j + 1] - b0 < target_b and j < other_last:
              j += 1
            b1 = sb[j + 1]
            random_next.append(True)
            # The sentences not used for A go back to the document.
            i -= num_sentences - a_end
          else:
            b0, b1 = a1, sb[i + 1]
            random_next.append(False)
          a_start.append(a0)
          a_end_tok.append(a1)
          b_start.append(b0)
          b_end_tok.append(b1)
          short_flags.append(short)
          chunk_start = i + 1
        i += 1
  a_start = np.array(a_start, dtype=np.int64)
  b_start = np.array(b_start, dtype=np.int64)
  spans = InstanceSpans(
      a_start=a_start, a_length=np.array(a_end_tok, dtype=np.int64) - a_start,
      b_start=b_start, b_length=np.array(b_end_tok, dtype=np.int64) - b_start,
      is_random_next=np.array(random_next, dtype=bool),
      short_target=np.array(short_flags, dtype=bool),
      single_sentence=np.array(single, dtype=bool))
  return spans, short_passes


def truncated_lengths(a_length: np.ndarray, b_length: np.ndarray, max_num_tokens: int):
  """Lengths after the original `truncate_seq_pair`, in closed form.

  The original removes one token at a time from the longer segment (from B when they are
  equal) until the pair fits: first the longer one shrinks to the shorter's length, then
  they alternate, B first.

  Returns:
    (new_a_length, new_b_length), int64 arrays [N].
  """
  a = np.asarray(a_length, dtype=np.int64)
  b = np.asarray(b_length, dtype=np.int64)
  excess = np.maximum(a + b - max_num_tokens, 0)
  from_a = np.minimum(excess, np.maximum(a - b, 0))
  from_b = np.minimum(excess, np.maximum(b - a, 0))
  rest = excess - from_a - from_b
  from_b += (rest + 1) // 2
  from_a += rest // 2
  return a - from_a, b - from_b


def truncate_spans(spans: InstanceSpans, max_seq_length: int,
                   np_rng: np.random.Generator) -> InstanceSpans:
  """Truncates every pair to max_seq_length - 3 tokens, as the original does.

  Each removed token comes from the front or the back with probability 1/2, so the number
  removed from the front is Binomial(removed, 1/2).
  """
  new_a, new_b = truncated_lengths(spans.a_length, spans.b_length, max_seq_length - 3)
  front_a = np_rng.binomial(spans.a_length - new_a, 0.5)
  front_b = np_rng.binomial(spans.b_length - new_b, 0.5)
  return dataclasses.replace(spans, a_start=spans.a_start + front_a, a_length=new_a,
                             b_start=spans.b_start + front_b, b_length=new_b)


def build_sequences(tokens: np.ndarray, spans: InstanceSpans, max_seq_length: int,
                    special: SpecialIds):
  """Assembles [CLS] A [SEP] B [SEP], padded with 0 as the original pads.

  Args:
    tokens: int32 [num_tokens], the flat token array the spans point into.
    spans: truncated InstanceSpans [N].

  Returns:
    (input_ids int32 [N, S], segment_ids int32 [N, S], input_mask int32 [N, S],
     candidates bool [N, S]: the maskable positions, every token except [CLS]/[SEP]).
  """
  pos = np.arange(max_seq_length, dtype=np.int64)[None, :]
  la = spans.a_length[:, None]
  lb = spans.b_length[:, None]
  in_a = (pos >= 1) & (pos <= la)
  in_b = (pos >= la + 2) & (pos <= la + lb + 1)
  source = np.where(in_a, spans.a_start[:, None] + pos - 1,
                    np.where(in_b, spans.b_start[:, None] + pos - la - 2, 0))
  candidates = in_a | in_b
  input_ids = np.where(candidates, tokens[source], 0).astype(np.int32)
  rows = np.arange(len(spans))
  input_ids[:, 0] = special.cls_id
  input_ids[rows, spans.a_length + 1] = special.sep_id
  input_ids[rows, spans.a_length + spans.b_length + 2] = special.sep_id
  length = la + lb + 3
  input_mask = (pos < length).astype(np.int32)
  segment_ids = ((pos >= la + 2) & (pos < length)).astype(np.int32)
  return input_ids, segment_ids, input_mask, candidates


# Outcomes of a masked position, as the counts in MaskedBatch.outcome_counts.
MASKED, RANDOM, KEPT = "mask", "random", "kept"


@dataclasses.dataclass
class MaskedBatch:
  """Masked inputs of N instances with P = max_predictions_per_seq.

  input_ids int32 [N, S] (after masking); masked_lm_positions, masked_lm_ids int32 [N, P]
  (sorted positions, original ids, 0-padded); masked_lm_weights float32 [N, P];
  outcome_counts: how many positions became [MASK], a random id, or were kept.
  """

  input_ids: np.ndarray
  masked_lm_positions: np.ndarray
  masked_lm_ids: np.ndarray
  masked_lm_weights: np.ndarray
  outcome_counts: Dict[str, int]


def num_to_predict(lengths: np.ndarray, masked_lm_prob: float,
                   max_predictions_per_seq: int) -> np.ndarray:
  """min(max_predictions, max(1, round(length * prob))) with round half to even, as the
  original's Python 3 `round` does. lengths count [CLS] and [SEP] like the original."""
  k = np.rint(np.asarray(lengths, dtype=np.float64) * masked_lm_prob).astype(np.int64)
  return np.minimum(max_predictions_per_seq, np.maximum(1, k))


def choose_masked_positions(input_ids: np.ndarray, candidates: np.ndarray,
                            num_predict: np.ndarray, np_rng: np.random.Generator,
                            special: SpecialIds, whole_word: bool) -> np.ndarray:
  """Picks the positions to predict, like the original's shuffled-candidate walk.

  Without whole words, a uniformly random `num_predict` candidates. With whole words, a
  "##" piece joins the group of the candidate before it (if any), groups are visited in
  random order, and a group is taken when it fits in the remaining budget (a group that
  does not fit is skipped, later smaller ones may still be taken).

  Returns:
    bool [N, S], True at the chosen positions.
  """
  n, s = input_ids.shape
  keys = np_rng.random((n, s))
  rows = np.arange(n)
  if not whole_word:
    keys = np.where(candidates, keys, 2.0)
    kth = np.sort(keys, axis=1)[rows, np.minimum(num_predict, s) - 1]
    return candidates & (keys <= kth[:, None])
  continuation = special.is_continuation[input_ids] & candidates
  has_previous = (np.cumsum(candidates, axis=1) - candidates) > 0
  starts = candidates & ~(continuation & has_previous)
  group = np.cumsum(starts, axis=1) - 1
  flat_group = (rows[:, None] * s + group)[candidates]
  group_length = np.bincount(flat_group, minlength=n * s).reshape(n, s)
  # Group start positions in random order; non-starts sort last.
  order = np.argsort(np.where(starts, keys, 2.0), axis=1)
  num_groups = starts.sum(axis=1)
  ordered_groups = group[rows[:, None], order]
  ordered_length = np.where(np.arange(s)[None, :] < num_groups[:, None],
                            group_length[rows[:, None], np.maximum(ordered_groups, 0)],
                            s + 1)
  total = np.zeros(n, dtype=np.int64)
  taken = np.zeros((n, s), dtype=bool)
  for j in range(int(num_groups.max(initial=0))):
    fits = total + ordered_length[:, j] <= num_predict
    taken[:, j] = fits
    total += np.where(fits, ordered_length[:, j], 0)
    if np.all(total >= num_predict):
      break
  group_taken = np.zeros((n, s), dtype=bool)
  r, c = np.nonzero(taken)
  group_taken[r, ordered_groups[r, c]] = True
  return candidates & group_taken[rows[:, None], np.maximum(group, 0)]


def mask_sequences(input_ids: np.ndarray, input_mask: np.ndarray, candidates: np.ndarray,
                   masked_lm_prob: float, max_predictions_per_seq: int,
                   special: SpecialIds, np_rng: np.random.Generator,
                   whole_word: bool = False) -> MaskedBatch:
  """Masks a batch as the original `create_masked_lm_predictions` does.

  Args:
    input_ids: int32 [N, S]; input_mask: int32 [N, S]; candidates: bool [N, S].

  Returns:
    MaskedBatch.
  """
  n, s = input_ids.shape
  lengths = input_mask.sum(axis=1)
  chosen = choose_masked_positions(input_ids, candidates,
                                   num_to_predict(lengths, masked_lm_prob,
                                                  max_predictions_per_seq),
                                   np_rng, special, whole_word)
  draw = np_rng.random((n, s))
  to_mask = chosen & (draw < 0.8)
  to_random = chosen & (draw >= 0.9)
  random_ids = np_rng.integers(0, special.vocab_size, size=(n, s), dtype=np.int32)
  masked_ids = np.where(to_mask, np.int32(special.mask_id),
                        np.where(to_random, random_ids, input_ids)).astype(np.int32)
  r, c = np.nonzero(chosen)
  slot = (np.cumsum(chosen, axis=1) - 1)[r, c]
  positions = np.zeros((n, max_predictions_per_seq), dtype=np.int32)
  labels = np.zeros((n, max_predictions_per_seq), dtype=np.int32)
  weights = np.zeros((n, max_predictions_per_seq), dtype=np.float32)
  positions[r, slot] = c
  labels[r, slot] = input_ids[r, c]
  weights[r, slot] = 1.0
  num_chosen = int(chosen.sum())
  num_mask, num_random = int(to_mask.sum()), int(to_random.sum())
  return MaskedBatch(masked_ids, positions, labels, weights,
                     {MASKED: num_mask, RANDOM: num_random,
                      KEPT: num_chosen - num_mask - num_random})


def example_features(input_ids, input_mask, segment_ids, masked: MaskedBatch,
                     is_random_next) -> Dict[str, np.ndarray]:
  """The original release's features (names from bert_tf.constants) of a batch."""
  return {
      constants.TFRECORD_INPUT_IDS: masked.input_ids,
      constants.TFRECORD_INPUT_MASK: input_mask,
      constants.TFRECORD_SEGMENT_IDS: segment_ids,
      constants.TFRECORD_MASKED_LM_POSITIONS: masked.masked_lm_positions,
      constants.TFRECORD_MASKED_LM_IDS: masked.masked_lm_ids,
      constants.TFRECORD_MASKED_LM_WEIGHTS: masked.masked_lm_weights,
      constants.TFRECORD_NEXT_SENTENCE_LABELS: np.asarray(is_random_next, dtype=np.int64),
  }
