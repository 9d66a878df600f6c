"""The embedded quickstart corpus: real English from CPython's documentation topics."""

import re

import pytest

from bert_tf.data.creation import corpus


def _documents(path):
  with open(path, encoding="utf-8") as f:
    text = f.read()
  return [d.split("\n") for d in text.strip("\n").split("\n\n")]


def test_embedded_corpus_has_thousands_of_mostly_alphabetic_sentences(tmp_path):
  stats = corpus.write_embedded_corpus(str(tmp_path / "corpus.txt"))
  assert stats.sentences >= 2000
  assert stats.documents >= 100
  assert stats.alphabetic_fraction > 0.9
  docs = _documents(stats.path)
  assert len(docs) == stats.documents
  assert sum(len(d) for d in docs) == stats.sentences


def test_corpus_is_one_sentence_per_line_with_no_code_lines(tmp_path):
  stats = corpus.write_embedded_corpus(str(tmp_path / "corpus.txt"))
  lines = [line for doc in _documents(stats.path) for line in doc]
  assert all(line.strip() == line and line for line in lines)
  assert not any(marker in line for line in lines for marker in ("::=", ">>>", "==="))
  ends_like_sentence = sum(bool(re.search(r"[.!?:;\"')]$", line)) for line in lines)
  assert ends_like_sentence / len(lines) > 0.9
  starts_capitalized = sum(line[0].isupper() or line[0] in "\"'(" for line in lines)
  assert starts_capitalized == len(lines)


def test_split_sentences_keeps_abbreviations_inside_a_sentence():
  text = ("Use a list, e.g. the one above. Then call it! Is it done? Yes, it is done.")
  assert corpus.split_sentences(text) == [
      "Use a list, e.g. the one above.", "Then call it!", "Is it done?",
      "Yes, it is done."]


def test_writing_the_corpus_is_repeatable(tmp_path):
  a = corpus.write_embedded_corpus(str(tmp_path / "a.txt"))
  b = corpus.write_embedded_corpus(str(tmp_path / "b.txt"))
  with open(a.path, "rb") as f, open(b.path, "rb") as g:
    assert f.read() == g.read()


def test_split_documents_holds_out_every_nth_document_and_keeps_all(tmp_path):
  text = "\n\n".join(f"Document {i} first.\nDocument {i} second." for i in range(25)) + "\n"
  source = tmp_path / "all.txt"
  source.write_text(text, encoding="utf-8")
  train, heldout = tmp_path / "train.txt", tmp_path / "heldout.txt"
  counts = corpus.split_documents(str(source), str(train), str(heldout), heldout_every=10)
  assert counts == (22, 3)
  heldout_docs = _documents(str(heldout))
  assert [d[0] for d in heldout_docs] == [f"Document {i} first." for i in (0, 10, 20)]
  all_lines = sorted(line for d in _documents(str(train)) + heldout_docs for line in d)
  assert all_lines == sorted(line for line in text.split("\n") if line)


def test_split_documents_needs_two_documents(tmp_path):
  source = tmp_path / "one.txt"
  source.write_text("Only one document here.\nStill the same one.\n", encoding="utf-8")
  with pytest.raises(ValueError, match="one.txt"):
    corpus.split_documents(str(source), str(tmp_path / "t"), str(tmp_path / "h"))
