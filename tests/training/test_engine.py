"""The engine's interface (bert_tf.training.engine): which process is the chief, what an
engine exposes, and the run's processes as one object beside it."""

import inspect

import pytest

from bert_tf.training import engine as engine_lib
from bert_tf.training import process_group

import test_trainer_with_fake_engine as fake
import trainer_helpers


def test_the_chief_is_process_zero():
  assert engine_lib.Placement(num_replicas=2, description="", process_index=0,
                              process_count=2).is_chief
  assert not engine_lib.Placement(num_replicas=2, description="", process_index=1,
                                  process_count=2).is_chief


def _public_members(cls):
  return {name for klass in inspect.getmro(cls) if klass is not object
          for name in vars(klass) if not name.startswith("_")}


def test_an_engine_has_at_most_twelve_members_and_its_processes_are_one_of_them():
  # Its methods, properties and class attributes, and the run's processes; the
  # attributes that hold what it was made with (experiment, task) and what `build` made
  # (model, optimizer) are not part of what an engine implements.
  engine = fake.FakeEngine(trainer_helpers.tiny_experiment(steps=1), fake.FakeTask(),
                           lambda _: None)
  members = _public_members(engine_lib.Engine) | {"processes"}
  assert len(members) <= 12, sorted(members)
  assert isinstance(engine.processes, process_group.ProcessGroup)
  assert not {"any_process", "barrier", "lost_process", "lost_process_reason",
              "end_on_lost_process"} & _public_members(type(engine))


def test_a_run_of_one_process_agrees_with_itself_and_loses_no_process():
  processes = process_group.ProcessGroup()
  assert processes.any_process(True) and not processes.any_process(False)
  processes.barrier("checkpoint of step 3")  # returns at once
  assert processes.lost_process(ConnectionResetError("Connection reset by peer")) is None
  assert processes.lost_process_reason(ValueError("a\n  b")) == "a b"
  with pytest.raises(TypeError):
    processes.barrier()  # pylint: disable=no-value-for-parameter
