"""The kinds of export (bert_tf.export.kinds): each `*_serving` module is a whole kind,
loaded without being named. A kind of this module's own, registered under a name of its
own, is told by its outputs and answered and described by `bert-tf-query`'s functions,
which know no kind."""

import pathlib

import pytest
import tensorflow as tf

import paths
import registry_names
from bert_tf.export import kinds
from bert_tf.export import query
from bert_tf.export import serving_module

TOY = registry_names.local_name("toy_upper", __file__)
UPPER = f"{TOY}_text"
LENGTH = f"{TOY}_length"


class ToyUpperServing(serving_module.ServingModule):
  """Outputs the text upper-cased (string [B]) and its length (int32 [B])."""

  answer_outputs = (frozenset({UPPER, LENGTH}),)

  @staticmethod
  def answer(outputs, row):
    return {"upper": serving_module.text_of(outputs[UPPER][row]),
            "length": int(outputs[LENGTH][row])}

  @staticmethod
  def describe_answer(answer):
    return [f"  upper: {answer['upper']} ({answer['length']} characters)"]


@pytest.fixture(name="toy")
def _toy():
  with registry_names.registered(
      lambda: serving_module.register_serving(TOY)(ToyUpperServing),
      lambda: serving_module.unregister_serving(TOY)) as cls:
    yield cls


def _call(texts):
  text = texts["text"]
  return {UPPER: tf.strings.upper(text), LENGTH: tf.strings.length(text),
          "logits": tf.zeros([tf.shape(text)[0], 2])}


def test_a_kind_registered_by_one_module_is_told_by_its_outputs_and_answers(toy):
  assert toy.kind == TOY and TOY in serving_module.serving_kinds()
  assert query.kind_of({UPPER, LENGTH, "logits"}) == TOY
  export = query.Export(TOY, ("text",), _call)
  answers = query.ask(export, ["cat", "a dog"])
  assert answers == [{"kind": TOY, "text": "cat", "upper": "CAT", "length": 3},
                     {"kind": TOY, "text": "a dog", "upper": "A DOG", "length": 5}]
  assert query.describe(answers[1]) == ["text: a dog", "  upper: A DOG (5 characters)"]


def test_outputs_holding_only_part_of_a_kinds_answer_tell_no_kind(toy):
  del toy
  assert kinds.kind_of_outputs({UPPER}) == ""


def test_an_unregistered_kind_is_no_longer_told():
  assert kinds.kind_of_outputs({UPPER, LENGTH}) == ""


_PACKAGE_KINDS = [kind for kind in serving_module.serving_kinds()
                  if serving_module.serving_class(kind).__module__.startswith("bert_tf.")]


def test_every_serving_module_of_the_package_is_loaded_as_a_kind():
  files = pathlib.Path(paths.ROOT, "bert_tf", "export").glob("*_serving.py")
  modules = {serving_module.serving_class(kind).__module__ for kind in _PACKAGE_KINDS}
  assert modules == {f"bert_tf.export.{path.stem}" for path in files}


@pytest.mark.parametrize("kind", _PACKAGE_KINDS)
def test_each_kind_of_the_package_declares_its_answers_and_is_told_by_them(kind):
  cls = serving_module.serving_class(kind)
  assert cls.answer_outputs
  for form in cls.answer_outputs:
    assert kinds.kind_of_outputs(form) == kind
  assert cls.answer is not serving_module.ServingModule.answer
  assert cls.describe_answer is not serving_module.ServingModule.describe_answer
