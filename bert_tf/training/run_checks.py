"""What a training run checks of its configuration before it writes anything, so that no
run is silently wrong: that the storage of every remote path it reads answers, and the
vocab against the word-embedding tables of the model and of task.init_checkpoint
(errors); the schedule and the checkpoint interval against trainer.train_steps, and a
resumed run's schedule against the one its params.yaml recorded (one warning line each).
"""

from typing import Callable, List, Optional, Sequence

from bert_tf import configs
from bert_tf.checkpoints import readable
from bert_tf.checkpoints import restore
from bert_tf.data.pipelines import loaders
from bert_tf.data.records import record_files
from bert_tf.text import vocab as vocab_lib
from bert_tf.training import schedules
from bert_tf.utils import errors
from bert_tf.utils import files


class VocabSizeError(configs.ConfigError):
  """The vocab's token count differs from the rows of the model's or the warm start's
  word-embedding table; the message names both."""


def check_vocab_size(experiment: configs.ExperimentConfig) -> None:
  """Raises VocabSizeError unless tokenizer.vocab_file (when set) has exactly as many
  tokens as the word-embedding table has rows: task.init_checkpoint's encoder's, where
  it is set, and model.encoder.vocab_size. Fewer tokens pass with
  tokenizer.allow_smaller_vocab (a table with rows on purpose beyond the vocab's). A
  vocab of another size gives ids that index the wrong rows of the table (a cased vocab
  with an uncased checkpoint), or none. Raises VocabCasingError
  (bert_tf.text.vocab.check_casing) for a vocab whose casing contradicts
  tokenizer.lower_case."""
  tokenizer = experiment.tokenizer
  if not tokenizer.vocab_file:
    return
  tokens = len(vocab_lib.load_vocab(tokenizer.vocab_file, tokenizer.lower_case))
  checkpoint = experiment.task.init_checkpoint
  tables = []
  if checkpoint:
    try:
      rows = restore.checkpoint_vocab_size(checkpoint)
    except (FileNotFoundError, readable.UnreadableCheckpointError):
      rows = None  # The warm start says so where it needs the checkpoint.
    if rows is not None:
      tables.append((rows, f"the encoder in task.init_checkpoint {checkpoint} has {rows} "
                           "word-embedding rows", "give the vocab it was trained with"))
  rows = experiment.model.encoder.vocab_size
  tables.append((rows, f"model.encoder.vocab_size is {rows}",
                 f"set model.encoder.vocab_size={tokens}"))
  for rows, table, remedy in tables:
    if tokens == rows or (tokens < rows and tokenizer.allow_smaller_vocab):
      continue
    if tokens < rows:
      remedy += (", or tokenizer.allow_smaller_vocab=true if the table is larger on "
                 "purpose")
    raise VocabSizeError(
        f"tokenizer.vocab_file {tokenizer.vocab_file} has {tokens} tokens but {table}: "
        f"each id would read another token's row. Use the vocab of the model: {remedy}.")


def check_remote_paths(experiment: configs.ExperimentConfig, sections: Sequence[str]) -> None:
  """Checks that the storage of every remote path the run reads is served and answers:
  the input globs of `sections` ("train_data", "eval_data"), task.init_checkpoint and
  tokenizer.vocab_file (bert_tf.utils.files.check_readable).

  Raises:
    StorageError: naming the setting, the path and what is missing (the extra to
      install, the host that did not answer).
  """
  paths = [(f"{section}.input_path", glob.strip())
           for section in sections
           for glob in getattr(experiment, section).input_path.split(",") if glob.strip()]
  paths += [("task.init_checkpoint", experiment.task.init_checkpoint),
            ("tokenizer.vocab_file", experiment.tokenizer.vocab_file)]
  for field, path in paths:
    if path:
      files.check_readable(path, field)


def schedule_warnings(experiment: configs.ExperimentConfig) -> List[str]:
  """One line for each setting longer than the run (trainer.train_steps): the warm-up
  (the rate never reaches its peak), the decay (it never reaches its end) and the
  checkpoint interval (only the last step is saved: a killed run starts again)."""
  optimizer, trainer = experiment.optimizer, experiment.trainer
  total = trainer.train_steps
  if total <= 0:
    return []
  last_rate = schedules.rate_at(schedules.for_run(optimizer, total), total - 1)
  lines = []
  if optimizer.warmup_steps > total:
    lines.append(
        f"Warning: optimizer.warmup_steps {optimizer.warmup_steps} is longer than "
        f"trainer.train_steps {total}: the learning rate rises to {last_rate:.3g} at the "
        f"last step, never to its peak {optimizer.learning_rate:.3g}. Set "
        f"optimizer.warmup_steps to about a tenth of the run.")
  if optimizer.decay_steps > total:
    lines.append(
        f"Warning: optimizer.decay_steps {optimizer.decay_steps} is longer than "
        f"trainer.train_steps {total}: the learning rate ends at {last_rate:.3g}, not "
        f"at {optimizer.end_learning_rate:.3g}. Set optimizer.decay_steps=0 to decay "
        "over the run.")
  if trainer.checkpoint_interval > total:
    lines.append(
        f"Warning: trainer.checkpoint_interval {trainer.checkpoint_interval} is longer "
        f"than trainer.train_steps {total}: only the last step is saved, so a run "
        f"stopped before it starts again from step 0. Set trainer.checkpoint_interval "
        "below train_steps.")
  lines.append(_report_interval_warning(trainer))
  return [line for line in lines if line]


def _report_interval_warning(trainer: configs.TrainerConfig) -> str:
  """One line where trainer.log_interval or summary_interval is longer than the run:
  its progress line and its TensorBoard points come at the last step alone. The run
  keeps the intervals it was given (as Model Garden's trainer does); the line names the
  settings that report about ten times over the run."""
  total = trainer.train_steps
  longer = [f"trainer.{name} {getattr(trainer, name)}"
            for name in ("log_interval", "summary_interval") if getattr(trainer, name) > total]
  if not longer:
    return ""
  shown = {"trainer.log_interval": "progress lines",
           "trainer.summary_interval": "TensorBoard points"}
  what = " and ".join(shown[entry.rsplit(" ", 1)[0]] for entry in longer)
  suggested = max(total // 10, 1)
  settings = ",".join(f"{entry.rsplit(' ', 1)[0]}={suggested}" for entry in longer)
  return (f"Warning: {' and '.join(longer)} {'is' if len(longer) == 1 else 'are'} longer "
          f"than trainer.train_steps {total}: the run writes its {what} at its last step "
          f"alone. Set {settings} to report about ten times over the run.")


_SCHEDULE_KEYS = ("learning_rate", "warmup_steps", "decay_steps", "end_learning_rate",
                  "power")


def resumed_schedule_warning(recorded: Optional[configs.ExperimentConfig],
                             experiment: configs.ExperimentConfig, step: int,
                             params_path: str) -> str:
  """A warning line where a run resumed at `step` goes on with another learning-rate
  schedule than `recorded` (its params.yaml) ran with: both rates at `step` and the
  entries that changed; "" where the schedules agree or nothing was recorded."""
  if recorded is None:
    return ""
  old = schedules.for_run(recorded.optimizer, recorded.trainer.train_steps)
  new = schedules.for_run(experiment.optimizer, experiment.trainer.train_steps)
  if old.get_config() == new.get_config():
    return ""
  changed = [f"optimizer.{key} {getattr(recorded.optimizer, key)} -> "
             f"{getattr(experiment.optimizer, key)}" for key in _SCHEDULE_KEYS
             if getattr(recorded.optimizer, key) != getattr(experiment.optimizer, key)]
  if (old.decay_steps != new.decay_steps
      and recorded.trainer.train_steps != experiment.trainer.train_steps
      and not (recorded.optimizer.decay_steps and experiment.optimizer.decay_steps)):
    changed.append(f"trainer.train_steps {recorded.trainer.train_steps} -> "
                   f"{experiment.trainer.train_steps}, which sets the decay")
  return (f"Warning: the learning-rate schedule differs from the one {params_path} "
          f"recorded ({'; '.join(changed)}): at step {step} the rate is now "
          f"{schedules.rate_at(new, step):.3g}, {schedules.rate_at(old, step):.3g} on the "
          f"recorded schedule. The run goes on with the new one; to keep the old, rerun "
          f"with its values.")


def run_warnings(experiment: configs.ExperimentConfig,
                 recorded: Optional[configs.ExperimentConfig], resumed_step: Optional[int],
                 params_path: str) -> List[str]:
  """The warning lines of a training run: schedule_warnings, and for a run resumed at
  `resumed_step` (None: not resumed) the resumed_schedule_warning against `recorded`."""
  lines = schedule_warnings(experiment)
  if resumed_step is not None:
    lines.append(resumed_schedule_warning(recorded, experiment, resumed_step, params_path))
  return [line for line in lines if line]


def check_input(task, data_config: configs.DataConfig, section: str,
                log_fn: Callable[[str], None]) -> None:
  """Checks the input of `section` (train_data or eval_data) before a run writes
  anything: a format the task reads (raw task files: with tensorflow-text installed),
  every record's checksums where validate_inputs, then the loader's check_files. The
  user errors of the last two are prefixed with the section."""
  loader = task.data_loader(data_config)
  if data_config.format not in loaders.PREPARED_FORMATS:
    loaders.require_tensorflow_text(data_config)
  try:
    if data_config.validate_inputs and data_config.format == loaders.TFRECORD:
      count = record_files.validate_record_files(data_config.input_path,
                                                  data_config.compression_type)
      log_fn(f"{section}: every record of {count} file(s) read with valid checksums")
    loader.check_files()
  except errors.UserError as e:
    e.args = (f"{section}: {e}",)
    raise
