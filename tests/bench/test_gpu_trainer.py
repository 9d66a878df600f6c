"""The GPU trainer's parts, without running them: the trainer overrides that
bench/gpu_trainer.py hands tools/train.py are config fields, the workers' arguments
parse (bench/gpu_worker.py), the dry run's flags of bench/gpu.sh parse, and every phase
has an estimate that fits the budget bench/README.md gives it."""

import json
import os
import re
import shlex

from bench import gpu_trainer
from bench import gpu_worker
from bench.peers import protocol
from bert_tf.training import experiments
from bert_tf.training import summaries
import paths


# Every key the phases read from their workers' RESULT lines.
WORKER_RESULT = {"back_to_back_step_seconds": [0.5], "step_seconds": [0.5],
                 "first_step_s": 9.0, "device": "cpu", "sequences_per_second": 100.0}


def _device_run(tmp_path, monkeypatch, *flags):
  """A DeviceRun whose processes are not started: (run, the argv of each)."""
  # --device=any leaves JAX_PLATFORMS as it is; the run's folders go to tmp_path.
  args = gpu_trainer.argument_parser().parse_args([
      "--stage=device", "--device=any", f"--out={tmp_path / 'out'}",
      f"--work_dir={tmp_path / 'work'}", *flags])
  run = gpu_trainer.DeviceRun(args)
  calls = []

  def run_process(argv, log_path, timeout, env=None):
    calls.append(argv)
    return "RESULT " + json.dumps(WORKER_RESULT) + "\n"

  monkeypatch.setattr(gpu_trainer, "_run", run_process)
  return run, calls


def _workers(calls):
  """[(module, its parser's namespace)] of the `python -m MODULE ...` argvs in calls,
  each parsed by bench/gpu_worker.py's parser."""
  return [(argv[2], gpu_worker.argument_parser().parse_args(argv[3:]))
          for argv in calls if argv[1] == "-m"]


def _resolved(command):
  """The experiment tools/train.py resolves from a train_command argv."""
  flags = dict(arg[2:].split("=", 1) for arg in command if arg.startswith("--"))
  return experiments.resolve_experiment(
      flags["experiment"], (), flags["params_override"],
      experiments.runtime_overrides(backend=flags["backend"],
                                    mixed_precision_dtype=flags["mixed_precision_dtype"]))


def test_trainer_runs_overrides_are_config_fields_with_the_shapes_asked(tmp_path,
                                                                        monkeypatch):
  run, _ = _device_run(tmp_path, monkeypatch)
  experiment = _resolved(run.train_command("m", "base", 200))
  assert experiment.model.encoder.num_layers == 12
  assert experiment.train_data.global_batch_size == 64
  assert (experiment.train_data.seq_length, experiment.train_data.max_predictions_per_seq
          ) == (128, 20)
  assert experiment.trainer.train_steps == 200
  assert experiment.trainer.checkpoint_interval == 50
  assert experiment.runtime.mixed_precision_dtype == "mixed_bfloat16"
  export = _resolved(run.train_command("m", "tiny", 100, ["model.encoder.vocab_size=987"]))
  assert export.model.encoder.vocab_size == 987


def test_numerics_workers_arguments_parse_with_the_workers_parsers(tmp_path, monkeypatch):
  run, calls = _device_run(tmp_path, monkeypatch)
  run.phase_kernels()
  run.phase_steps()
  (kernels_module, kernels), (steps_module, steps) = _workers(calls)
  assert (kernels_module, steps_module) == ("bench.gpu_worker",) * 2
  assert (kernels.check, kernels.batch_size) == ("kernels", 8)
  assert (steps.check, steps.size, steps.steps) == ("steps", "mini", 100)


def test_throughput_workers_arguments_parse_with_the_workers_parsers(tmp_path, monkeypatch):
  run, calls = _device_run(tmp_path, monkeypatch, "--size=large", "--batch_size=32")
  whole = os.path.join(run.args.work_dir, "train_whole")
  os.makedirs(whole)
  monkeypatch.setattr(summaries, "read_scalars",
                      lambda path: {"sequences_per_second": [(10, 48.0), (20, 64.0)]})
  result = run.phase_throughput()
  (bench_module, bench), (input_module, host) = _workers(calls)
  assert bench_module == "bench.gpu_worker"
  assert (bench.side, bench.size, bench.batch_size, bench.precision, bench.device) == (
      "ours", "large", 32, "bf16", "any")
  assert (input_module, host.check, host.config) == (
      "bench.gpu_worker", "input", os.path.join(whole, "params.yaml"))
  assert result["trainer_over_bench"] == 56.0 / (32 / 0.5)


def _array(name):
  """The words of the longest `NAME=( ... )` in bench/gpu.sh."""
  text = open(os.path.join(paths.ROOT, "bench", "gpu.sh"), encoding="utf-8").read()
  return max((shlex.split(words) for words in re.findall(rf"{name}\+?=\((.*?)\)", text,
                                                         re.S)), key=len)


def test_dry_run_flags_of_the_trainer_script_parse():
  flags = _array("flags")
  args = gpu_trainer.argument_parser().parse_args(["--stage=device", *flags])
  assert (args.device, args.size, args.kill_after) == ("cpu", "tiny", 10)
  assert args.kill_after < args.train_steps
  assert args.kill_after % args.checkpoint_interval == 0


def test_unknown_phase_is_one_error_line(capsys):
  assert gpu_trainer.main(["--stage=device", "--phases=kernels,speed"]) == 2
  assert capsys.readouterr().err.startswith("gpu_trainer: error: --phases: unknown ['speed']")


def test_every_phase_has_an_estimate_and_all_but_the_last_fit_a_budget_of_360_s():
  # bench/README.md runs the trainer script first with BUDGET=360, the deterministic
  # pair left for another run.
  assert set(gpu_trainer.ESTIMATE_S) == set(gpu_trainer.PHASES)
  assert gpu_trainer.PHASES[-1] == "deterministic"
  assert sum(gpu_trainer.ESTIMATE_S[p] for p in gpu_trainer.PHASES[:-1]) <= 360


def test_a_workers_result_line_reads_back_among_other_output(capsys):
  protocol.emit("RESULT", {"steps": [1]})
  protocol.emit("RESULT", {"steps": [1, 2]})
  stdout = "a log line\n" + capsys.readouterr().out + "another\n"
  assert protocol.last_payload(stdout, "RESULT") == {"steps": [1, 2]}
  assert protocol.last_payload("a log line\n", "RESULT") is None
