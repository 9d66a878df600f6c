"""The quickstart's embedded English corpus: CPython's own documentation topics.

`pydoc_data.topics` ships with every CPython (the text behind `help("topic")`), so real
English prose is available offline on any machine. `write_embedded_corpus` turns it into
the pretraining input format: one sentence per line, a blank line between documents, one
document per section of a topic. Code examples, grammar rules and headings are dropped.
"""

import dataclasses
import re
from typing import Iterator, List, Tuple

from bert_tf.utils import files

# A heading is underlined by one repeated character.
_UNDERLINE = re.compile(r"^([=*\-~^\"#+])\1{2,}\s*$")
_BULLET = re.compile(r"^\s*(?:[*\-+]|\d+\.|\(\d+\))\s+")
_FOOTNOTE = re.compile(r"\[\d+\]")
_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.", "Ex.", "No.")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[A-Z\"'(\[])")
_CODE_HINTS = ("::=", ">>>", "...:", " = ", "==", "->", "{", "}", ";", "\\")


@dataclasses.dataclass
class CorpusStats:
  """What `write_embedded_corpus` wrote."""

  path: str
  documents: int
  sentences: int
  words: int
  bytes: int
  alphabetic_fraction: float


def _looks_like_code(line: str) -> bool:
  stripped = line.strip()
  if not stripped:
    return False
  if any(h in stripped for h in _CODE_HINTS):
    return True
  letters = sum(c.isalpha() or c.isspace() for c in stripped)
  return letters / len(stripped) < 0.8


def _paragraphs(section_lines: List[str]) -> Iterator[str]:
  """Prose paragraphs of a section, bullet markers dropped.

  A block where a third or more of the lines look like code (grammar rules, examples,
  tables) is left out; indentation alone does not tell, as descriptions are indented too.
  """
  block: List[str] = []
  for line in section_lines + [""]:
    if line.strip():
      block.append(line)
      continue
    if block:
      code_lines = sum(_looks_like_code(b) for b in block)
      if code_lines * 3 < len(block):
        yield " ".join(_BULLET.sub("", b).strip() for b in block)
      block = []


def split_sentences(paragraph: str) -> List[str]:
  """Splits prose at ., ! or ? followed by a capitalized word, keeping abbreviations."""
  protected = paragraph
  for i, abbr in enumerate(_ABBREVIATIONS):
    protected = protected.replace(abbr + " ", f"\x00{i}\x00 ")
  parts = _SENTENCE_END.split(protected)
  out = []
  for part in parts:
    for i, abbr in enumerate(_ABBREVIATIONS):
      part = part.replace(f"\x00{i}\x00", abbr)
    part = re.sub(r"\s+", " ", _FOOTNOTE.sub("", part)).strip()
    if part:
      out.append(part)
  return out


def _is_prose(sentence: str) -> bool:
  words = sentence.split()
  if len(words) < 4 or _looks_like_code(sentence):
    return False
  return sentence[0].isupper() or sentence[0] in "\"'("


def corpus_documents() -> List[List[str]]:
  """The corpus as documents (lists of sentences), in topic order."""
  from pydoc_data.topics import topics  # pylint: disable=g-import-not-at-top
  documents = []
  for name in sorted(topics):
    lines = topics[name].splitlines()
    sections: List[List[str]] = [[]]
    for i, line in enumerate(lines):
      if _UNDERLINE.match(line):
        continue
      if i + 1 < len(lines) and _UNDERLINE.match(lines[i + 1]) and line.strip():
        sections.append([])  # A heading starts a section.
        continue
      sections[-1].append(line)
    for section in sections:
      sentences = []
      for paragraph in _paragraphs(section):
        sentences.extend(s for s in split_sentences(paragraph) if _is_prose(s))
      if sentences:
        documents.append(sentences)
  return documents


def write_embedded_corpus(path: str) -> CorpusStats:
  """Writes the corpus in the pretraining input format (atomically).

  Args:
    path: the text file to write.

  Returns:
    CorpusStats with counts of documents, sentences, words and the share of letters
    among the non-space characters.
  """
  documents = corpus_documents()
  text = "\n\n".join("\n".join(doc) for doc in documents) + "\n"
  with files.atomic_open(path) as f:
    f.write(text)
  non_space = [c for c in text if not c.isspace()]
  return CorpusStats(
      path=path, documents=len(documents),
      sentences=sum(len(d) for d in documents),
      words=len(text.split()), bytes=len(text.encode("utf-8")),
      alphabetic_fraction=sum(c.isalpha() for c in non_space) / max(len(non_space), 1))


def split_documents(input_path: str, train_path: str, heldout_path: str,
                    heldout_every: int = 10) -> Tuple[int, int]:
  """Splits a corpus file into training and held-out documents (atomically).

  Every `heldout_every`-th document (the 1st, the 11th, ... for 10) is held out, so
  both parts cover the whole corpus.

  Args:
    input_path: one sentence per line, a blank line between documents.
    train_path, heldout_path: the files to write, in the same format.
    heldout_every: at least 2.

  Returns:
    (training documents, held-out documents).

  Raises:
    ValueError: `heldout_every` below 2, or fewer than two documents in the input.
  """
  if heldout_every < 2:
    raise ValueError(f"heldout_every must be at least 2, got {heldout_every}")
  with open(input_path, encoding="utf-8") as f:
    documents = [d.strip("\n") for d in re.split(r"\n\s*\n", f.read()) if d.strip()]
  if len(documents) < 2:
    raise ValueError(f"{input_path}: needs at least two documents (separated by a blank "
                     f"line) to hold one out, found {len(documents)}")
  heldout = documents[::heldout_every]
  train = [d for i, d in enumerate(documents) if i % heldout_every]
  for path, part in ((train_path, train), (heldout_path, heldout)):
    with files.atomic_open(path) as f:
      f.write("\n\n".join(part) + "\n")
  return len(train), len(heldout)
