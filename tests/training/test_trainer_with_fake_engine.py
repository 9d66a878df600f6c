"""The Trainer's own behaviour, on neither backend: it drives a fake engine whose model
is one NumPy weight, so that what it asserts (intervals, checkpoints and resume,
params.yaml, a non-finite loss, SIGTERM, a corrupt record, evaluation) is the Trainer's
policy and not an engine's."""

import logging
import os
import signal

import numpy as np
import pytest

from bert_tf import constants
from bert_tf.checkpoints import portable
from bert_tf.training import engine as engine_lib
from bert_tf.training import host_loop
from bert_tf.training import input_source
from bert_tf.training import params_file
from bert_tf.training import steps
from bert_tf.training import trainer as trainer_lib
from bert_tf.utils import errors

import checkpoint_helpers
import trainer_helpers


class NumpyVariable:
  """The part of a Keras variable that checkpoints read and assign."""

  def __init__(self, path: str, value):
    self.path = path
    self.name = path.rsplit("/", 1)[-1]
    self.value = np.asarray(value)
    # Fixed: assign keeps them.
    self.shape, self.dtype = self.value.shape, self.value.dtype

  def numpy(self):
    return self.value.copy()

  def assign(self, value):
    self.value = np.asarray(value, self.value.dtype).reshape(self.value.shape)


class Item:
  def __init__(self, variables):
    self.variables = variables


class FakeModel:
  """One weight of WEIGHT_SIZE values, which each step raises by 1, and a dropout seed
  state."""

  WEIGHT_SIZE = 2

  def __init__(self):
    self.weight = NumpyVariable("encoder/weight", np.zeros([self.WEIGHT_SIZE], np.float32))
    self.seed = NumpyVariable(f"encoder/dropout/{constants.SEED_STATE_NAME}",
                              np.array([7, 0], np.int64))
    self.trained_items = {"encoder": Item([self.weight])}
    self.variables = [self.weight, self.seed]


class FakeTask:
  """The task members the Trainer calls, over the fake engine's outputs."""

  name = "fake"
  progress_metrics = ("loss",)

  def initialize(self, model):
    del model
    return {}

  def data_loader(self, data_config):
    del data_config
    return FakeLoader()

  def reduce_eval(self, values):
    return {"mean_weight": float(np.mean(values["weight"]))}

  def write_predictions(self, values, directory):
    del values, directory
    return None


class FakeLoader:
  """The data loader members the Trainer calls: files that are always right."""

  def check_files(self):
    pass

  def settings_from_files(self):
    return {}


class CorruptRecord(Exception):
  pass


class FakeInput(input_source.EngineInput):
  """An input that records how it is positioned; an earlier version's position of it
  is a file beside the checkpoint holding "position".

  Attributes: events ([("restore", checkpoint name, restored) or ("skip", steps)]).
  """

  def __init__(self):
    self.events = []

  def restore(self, checkpoint, process_index):
    saved = portable.input_prefix(checkpoint, process_index)
    restored = os.path.exists(saved)
    if restored:
      with open(saved, encoding="utf-8") as f:
        if f.read() != "position":
          raise ValueError(f"{saved} is damaged")
    self.events.append(("restore", os.path.basename(checkpoint), restored))
    return restored

  def skip(self, steps):  # pylint: disable=redefined-outer-name
    self.events.append(("skip", steps))

  def corrupt_record_error(self, error, data_config):
    del data_config
    if isinstance(error, CorruptRecord):
      return errors.InputError(f"corrupt record in {error}")
    return None


class FakeEngine(engine_lib.Engine):
  """Steps that add 1 to the weight; `loss_at(step)` gives each step's loss.

  Attributes: loops (the num_steps of each run_steps call), input (its FakeInput),
  on_step ({step: callable} run before that step), builds (how often build was called).
  """

  def __init__(self, experiment, task, log_fn, loss_at=lambda step: 1.0 / (step + 1)):
    super().__init__(experiment, task, log_fn)
    self.loss_at = loss_at
    self.loops, self.input = [], FakeInput()
    self.on_step = {}
    self._step = 0
    self.builds = 0

  @property
  def placement(self):
    return engine_lib.Placement(num_replicas=2, description="a fake engine (2 replicas)")

  def build(self):
    self.builds += 1
    self.model = FakeModel()
    self.count = NumpyVariable(constants.OPTIMIZER_COUNT, np.zeros([], np.int64))

  def run_steps(self, num_steps):
    self.loops.append(num_steps)
    totals = dict.fromkeys(steps.output_keys(["loss"], [], with_loss_scale=False), 0.0)
    for _ in range(num_steps):
      if self._step + 1 in self.on_step:
        self.on_step[self._step + 1]()
      loss = self.loss_at(self._step + 1)
      finite = bool(np.isfinite(loss))
      if finite:
        self.model.weight.assign(self.model.weight.value + 1.0)
        self.count.assign(self.count.value + 1)
      self._step += 1
      totals["loss"] += loss
      totals[steps.LEARNING_RATE] += 0.1
      totals[steps.NON_FINITE_LOSS_STEPS] += 0.0 if finite else 1.0
      totals[steps.SKIPPED_STEPS] += 0.0 if finite else 1.0
    return totals

  def evaluate_outputs(self, data_config, steps):  # pylint: disable=redefined-outer-name
    del data_config
    return {"weight": [self.model.weight.numpy()] * max(steps, 1)}

  @property
  def step(self):
    return self._step

  @step.setter
  def step(self, step):
    self._step = int(step)

  def checkpoint_state(self):
    return {constants.OPTIMIZER_COUNT: self.count}

  def training_input(self):
    return self.input


def _trainer(model_dir, steps_total=6, log=None, **trainer_settings):
  settings = dict(steps_per_loop=4, summary_interval=6, log_interval=2,
                  checkpoint_interval=3, max_to_keep=2)
  settings.update(trainer_settings)
  experiment = trainer_helpers.tiny_experiment(steps=steps_total, trainer=settings)
  task = FakeTask()
  engine = FakeEngine(experiment, task, lambda _: None)
  lines = [] if log is None else log
  return trainer_lib.Trainer(experiment, str(model_dir), task=task, engine=engine,
                             log_fn=lines.append), engine


def test_loops_end_at_every_interval_and_checkpoints_keep_the_newest(tmp_path):
  lines = []
  trainer, engine = _trainer(tmp_path, log=lines)
  report = trainer.train()
  # Intervals 2 (log), 3 (checkpoint), 6 (summary), at most 4 steps a loop.
  assert engine.loops == [2, 1, 1, 2]
  assert [os.path.basename(p) for p in portable.checkpoints_in(str(tmp_path))] == [
      "ckpt-6.h5", "ckpt-3.h5"]
  # Each holds the input position, the global batches read, in the run's order.
  order = input_source.order_of(trainer.experiment)
  assert portable.read(str(tmp_path / "ckpt-6.h5")).position == dict(order, batches_read=6)
  assert engine.input.events == []  # started at step 0: nothing to restore or skip
  assert report["loss"] == pytest.approx(np.mean([1 / s for s in range(2, 8)]))
  # The rate of the last update (the 6th, after 5: AdamW at 1e-3, 2 warm-up steps, then
  # linear decay to 0 at step 6), not the window's mean (the fake engine's 0.1).
  assert report[steps.LEARNING_RATE] == pytest.approx(1e-3 * (1 - 5 / 6))
  assert sum(line.startswith("Saved checkpoint") for line in lines) == 2


def test_a_checkpoint_written_on_the_training_thread_is_logged_at_its_step(tmp_path):
  lines = []
  trainer, _ = _trainer(tmp_path, log=lines, async_checkpoints=False)
  trainer.train()
  assert [line for line in lines if line.startswith(("step", "Saved"))] == [
      "step 2/6 (33%) | loss 0.4167", f"Saved checkpoint {tmp_path / 'ckpt-3.h5'}",
      *[line for line in lines if line.startswith(("step 4/", "step 6/"))],
      f"Saved checkpoint {tmp_path / 'ckpt-6.h5'}"]


def test_a_rerun_resumes_weights_optimizer_and_seed_state_at_the_saved_step(tmp_path):
  first, _ = _trainer(tmp_path, steps_total=3)
  first.train()
  first.model.seed.assign([7, 3])
  first.save()
  first.checkpoints.wait()  # written in the background
  resumed, engine = _trainer(tmp_path, steps_total=6)
  resumed.initialize()
  assert resumed.step == 3 and resumed.restored_from.endswith("ckpt-3.h5")
  np.testing.assert_array_equal(resumed.model.weight.value, [3.0, 3.0])
  np.testing.assert_array_equal(resumed.model.seed.value, [7, 3])
  assert int(engine.count.value) == 3
  lines = []
  resumed._log = lines.append  # pylint: disable=protected-access
  resumed.train()
  # At the checkpoint's position (seeking, no line), not a skip for want of one.
  assert engine.input.events == [("skip", 3)]
  assert not any("consumed batches" in line for line in lines)
  np.testing.assert_array_equal(resumed.model.weight.value, [6.0, 6.0])


def _as_earlier_version(path, position=None):
  """Rewrites the checkpoint as version 2, with `position` (a file's content) beside it
  where given."""
  checkpoint_helpers.rewrite_as_version_2(path)
  if position is not None:
    with open(portable.input_prefix(path), "w", encoding="utf-8") as f:
      f.write(position)


@pytest.mark.parametrize("beside, events, line", [
    ("position", [("restore", "ckpt-3.h5", True)], None),
    (None, [("restore", "ckpt-3.h5", False), ("skip", 3)],
     "No input position of this input saved with {}: skipped the 3 consumed batches"),
    ("posi", [("skip", 3)], "Cannot read the input position saved with {} (ValueError: ")])
def test_a_checkpoint_of_an_earlier_version_resumes_its_position_beside_it_or_skips(
    tmp_path, beside, events, line):
  first, _ = _trainer(tmp_path, steps_total=3)
  first.train()
  path = str(tmp_path / "ckpt-3.h5")
  _as_earlier_version(path, beside)
  lines = []
  resumed, engine = _trainer(tmp_path, steps_total=6, log=lines)
  resumed.train()
  assert engine.input.events == events
  if line:
    assert any(l.startswith(line.format(path)) for l in lines), lines
    if "Cannot" in line:
      assert (f"No input position of this input saved with {path}: skipped the 3 "
              "consumed batches") in lines
  np.testing.assert_array_equal(resumed.model.weight.value, [6.0, 6.0])
  # It continues in the current format.
  assert portable.read(str(tmp_path / "ckpt-6.h5")).position["batches_read"] == 6


def test_a_position_in_another_order_is_not_restored_but_skipped_with_a_line(tmp_path):
  first, _ = _trainer(tmp_path, steps_total=3)
  first.train()
  lines = []
  resumed, engine = _trainer(tmp_path, steps_total=6, log=lines)
  resumed.input.order["seed"] += 1
  resumed.train()
  assert engine.input.events == [("skip", 3)]
  assert any(line.startswith(f"The input position of {tmp_path / 'ckpt-3.h5'} was taken "
                             "with seed ") and line.endswith("skipped the 3 consumed batches")
             for line in lines), lines


@pytest.mark.parametrize("name", ["items/encoder/encoder/weight", "optimizer/count",
                                  "step", "input/batches_read"])
def test_a_flipped_bit_in_any_item_resumes_from_the_previous_checkpoint_bit_exactly(
    tmp_path, name, caplog):
  straight, _ = _trainer(tmp_path / "straight", steps_total=9, max_to_keep=5)
  straight.train()
  first, _ = _trainer(tmp_path / "flipped", steps_total=6, max_to_keep=5)
  first.train()
  damaged = str(tmp_path / "flipped" / "ckpt-6.h5")
  checkpoint_helpers.flip_bit(damaged, name, bit=3)
  resumed, engine = _trainer(tmp_path / "flipped", steps_total=9, max_to_keep=5)
  with caplog.at_level(logging.WARNING):
    resumed.train()
  assert resumed.restored_from == str(tmp_path / "flipped" / "ckpt-3.h5")
  assert engine.input.events == [("skip", 3)]
  [line] = [r.getMessage() for r in caplog.records if "fails its checksum" in r.getMessage()]
  assert line.startswith(f"Checkpoint {damaged} fails its checksum at {name} ")
  assert line.endswith(f"using the newest readable checkpoint {resumed.restored_from} instead")
  a = portable.arrays(str(tmp_path / "straight" / "ckpt-9.h5"))
  b = portable.arrays(str(tmp_path / "flipped" / "ckpt-9.h5"))
  assert a.keys() == b.keys()
  for key in a:
    np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_a_position_of_other_data_shapes_is_not_restored_but_skipped(tmp_path):
  first, _ = _trainer(tmp_path, steps_total=3)
  first.train()
  resumed, engine = _trainer(tmp_path, steps_total=6)
  resumed.initialize()
  resumed.restore_input_position = False  # as run() sets it when train_data changed
  resumed.train()
  assert engine.input.events == [("skip", 3)]


def test_a_non_finite_loss_stops_before_any_checkpoint_of_its_steps(tmp_path):
  trainer, _ = _trainer(tmp_path)
  trainer.engine.loss_at = lambda step: float("nan") if step == 5 else 1.0
  with pytest.raises(host_loop.NonFiniteLossError, match=r"within steps 5\.\.6.*ckpt-3\.h5"):
    trainer.train()
  assert [os.path.basename(p) for p in portable.checkpoints_in(str(tmp_path))] == [
      "ckpt-3.h5"]


def test_sigterm_saves_a_checkpoint_at_the_loops_end_and_returns_early(tmp_path):
  lines = []
  trainer, engine = _trainer(tmp_path, steps_total=10, log=lines)
  engine.on_step[4] = lambda: os.kill(os.getpid(), signal.SIGTERM)
  before = signal.getsignal(signal.SIGTERM)
  trainer.train()
  assert signal.getsignal(signal.SIGTERM) is before
  assert trainer.preempted and trainer.step == 4
  assert os.path.exists(tmp_path / "ckpt-4.h5")
  assert lines[-1] == ("Received SIGTERM: saved checkpoint "
                       f"{os.path.join(str(tmp_path), 'ckpt-4.h5')} at step 4; stopping. "
                       "Rerun the same command to resume.")


def test_a_corrupt_record_is_one_error_after_a_checkpoint_at_the_last_finished_step(tmp_path):
  trainer, engine = _trainer(tmp_path)

  def corrupt():
    raise CorruptRecord("data-1.tfrecord at offset 12")

  engine.on_step[5] = corrupt
  with pytest.raises(errors.InputError) as raised:
    trainer.train()
  assert str(raised.value) == (
      "train_data: corrupt record in data-1.tfrecord at offset 12. Saved checkpoint "
      f"{os.path.join(str(tmp_path), 'ckpt-4.h5')} at step 4, the last finished step; "
      "replace or remove the file and rerun to resume.")


def test_run_writes_params_yaml_and_refuses_a_run_that_changes_the_shapes(tmp_path):
  trainer, _ = _trainer(tmp_path, steps_total=2)
  report = trainer.run("train_and_eval")
  assert report["eval/mean_weight"] == 2.0
  assert os.path.exists(tmp_path / params_file.PARAMS_FILE)
  wider = trainer_helpers.tiny_experiment(steps=2, batch=16)
  task = FakeTask()
  other = trainer_lib.Trainer(wider, str(tmp_path), task=task,
                              engine=FakeEngine(wider, task, print), log_fn=print)
  with pytest.raises(params_file.ParamsMismatchError, match="train_data.global_batch_size"):
    other.run("train")
  empty, engine = _trainer(tmp_path / "empty")
  with pytest.raises(errors.MissingInputError, match="--mode=eval needs a checkpoint"):
    empty.run("eval")
  assert not os.path.exists(tmp_path / "empty") and engine.builds == 0


def test_a_batch_that_does_not_split_over_the_replicas_is_refused_before_building(tmp_path):
  experiment = trainer_helpers.tiny_experiment(batch=9)
  task = FakeTask()
  with pytest.raises(trainer_lib.configs.ConfigError, match=r"\(9\) must be divisible by "
                     r"the number of replicas \(2\)"):
    trainer_lib.Trainer(experiment, str(tmp_path), task=task,
                        engine=FakeEngine(experiment, task, print))


def test_older_tensorflow_checkpoints_are_one_error_on_an_engine_without_their_reader(
    tmp_path):
  (tmp_path / "ckpt-4.index").write_bytes(b"")
  trainer, _ = _trainer(tmp_path)
  with pytest.raises(errors.UserError, match=r"holds TensorFlow checkpoints \(ckpt-N.index\) "
                     "of an older version: resume it once on the TensorFlow engine"):
    trainer.initialize()


def test_a_run_refused_for_its_params_yaml_is_refused_before_the_model_is_built(tmp_path):
  trainer, _ = _trainer(tmp_path, steps_total=2)
  trainer.run("train")
  wider = trainer_helpers.tiny_experiment(steps=2, batch=16)
  task = FakeTask()
  engine = FakeEngine(wider, task, print)
  other = trainer_lib.Trainer(wider, str(tmp_path), task=task, engine=engine, log_fn=print)
  with pytest.raises(params_file.ParamsMismatchError, match="train_data.global_batch_size"):
    other.run("train")
  assert engine.builds == 0


def test_a_run_refused_for_its_model_dir_is_refused_before_the_model_is_built(tmp_path):
  trainer, engine = _trainer("nope://bucket/run")
  with pytest.raises(errors.UserError, match="model_dir: cannot write to nope://bucket/run"):
    trainer.run("train")
  assert engine.builds == 0


def test_a_rerun_parses_params_yaml_once_and_eval_reads_the_newest_checkpoint_once(
    tmp_path, monkeypatch):
  trainer, _ = _trainer(tmp_path, steps_total=2)
  trainer.run("train")
  parsed, checked = [], []
  parse = params_file.experiments.experiment_from_yaml
  monkeypatch.setattr(params_file.experiments, "experiment_from_yaml",
                      lambda path: parsed.append(path) or parse(path))
  read = portable.read
  monkeypatch.setattr(portable, "read",
                      lambda path, *args: checked.append(path) or read(path, *args))
  evaluation, _ = _trainer(tmp_path, steps_total=2)
  evaluation.run("eval")
  assert evaluation.restored_from.endswith("ckpt-2.h5")
  assert len(parsed) == 1 and len(checked) == 1, (parsed, checked)


def test_an_evaluation_leaves_the_runs_params_yaml_as_the_training_wrote_it(tmp_path):
  trainer, _ = _trainer(tmp_path, steps_total=2)
  trainer.run("train")
  written = (tmp_path / params_file.PARAMS_FILE).read_bytes()
  other_eval = trainer_helpers.tiny_experiment(
      steps=2, eval_data=dict(input_path="other_eval.tfrecord", global_batch_size=4))
  task = FakeTask()
  evaluation = trainer_lib.Trainer(other_eval, str(tmp_path), task=task,
                                   engine=FakeEngine(other_eval, task, print), log_fn=print)
  assert evaluation.run("eval")["mean_weight"] == 2.0
  assert (tmp_path / params_file.PARAMS_FILE).read_bytes() == written


def test_a_bad_record_met_by_an_evaluation_is_one_error_naming_eval_data(tmp_path,
                                                                       monkeypatch):
  trainer, engine = _trainer(tmp_path, steps_total=2)
  trainer.train()

  def meet_a_bad_record(data_config, steps):  # pylint: disable=redefined-outer-name
    raise CorruptRecord("data-1.tfrecord at offset 12")

  monkeypatch.setattr(engine, "evaluate_outputs", meet_a_bad_record)
  with pytest.raises(errors.InputError) as raised:
    trainer.evaluate()
  assert str(raised.value) == "eval_data: corrupt record in data-1.tfrecord at offset 12"


def test_a_run_moved_and_read_from_another_directory_evaluates_with_the_vocab_it_holds(
    tmp_path, monkeypatch):
  """params.yaml names a copy of the vocab in model_dir, relative to it: the vocab given
  relative to the training's working directory is found once the run is moved and read
  from elsewhere."""
  monkeypatch.chdir(tmp_path)
  vocab_size = trainer_helpers.TINY_ENCODER["vocab_size"]
  checkpoint_helpers.write_vocab(tmp_path / "vocab.txt", vocab_size)
  settings = dict(steps_per_loop=2, summary_interval=2, log_interval=2,
                  checkpoint_interval=2, max_to_keep=2)
  experiment = trainer_helpers.tiny_experiment(steps=2, trainer=settings,
                                               tokenizer={"vocab_file": "vocab.txt"})
  task = FakeTask()
  trainer_lib.Trainer(experiment, "runs/a", task=task,
                      engine=FakeEngine(experiment, task, print), log_fn=print).run("train")
  assert "vocab_file: vocab.txt\n" in (tmp_path / "runs/a/params.yaml").read_text()
  assert (tmp_path / "runs/a/vocab.txt").read_bytes() == (tmp_path / "vocab.txt").read_bytes()
  os.rename(tmp_path / "runs", tmp_path / "moved")
  (tmp_path / "vocab.txt").unlink()
  (tmp_path / "elsewhere").mkdir()
  monkeypatch.chdir(tmp_path / "elsewhere")
  model_dir = str(tmp_path / "moved" / "a")
  recorded = params_file.experiments.experiment_from_yaml(
      *params_file.evaluation_config_files(model_dir, []))
  assert recorded.tokenizer.vocab_file == os.path.join(model_dir, "vocab.txt")
  evaluation = trainer_lib.Trainer(recorded, model_dir, task=task,
                                   engine=FakeEngine(recorded, task, print), log_fn=print)
  assert evaluation.run("eval")["mean_weight"] == 2.0


def test_an_evaluation_of_a_model_only_checkpoint_takes_its_step_from_its_name(tmp_path):
  """A converted folder's ckpt-1.h5 holds the model alone, no step."""
  converted = FakeModel()
  converted.weight.assign([5.0, 5.0])
  portable.save(portable.path_for_step(str(tmp_path), 1), converted.trained_items)
  evaluation, engine = _trainer(tmp_path, steps_total=2)
  assert evaluation.run("eval")["mean_weight"] == 5.0
  assert engine.step == 1
