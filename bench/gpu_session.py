"""The plan of a GPU device session: which prepared script each call runs, with what
budget, in what order, and what comes back, within a session's device time (starts
included). `python -m bench.gpu_session` prints it with the commands to type;
bench/README.md ("A GPU session, planned") explains it.

Each call runs one script from the checkout's root on the device machine, carrying the
ignored folders CARRY (the wheels the machine lacks and the records made here); the
machine returns at most eight files of 16 MiB from $OUT per call, which is why each
script is one call.
"""

import sys
from typing import NamedTuple, Tuple

# A session's device time, the machine's start and every idle second included.
DEVICE_SECONDS = 15 * 60
# The longest one command may run on the device machine.
COMMAND_LIMIT_S = 600
# A fresh machine takes about a minute to start; the transfers take seconds.
START_S = 90
TRANSFER_S = 15
CARRY = (".whl", ".gpu_data")
# Everything each script does around its budgeted run: installing the wheels, the
# machine facts, the last phase's overrun of its estimate (each script starts a phase
# only when its estimate fits in what is left).
SCRIPT_OVERHEAD_S = 30


class Call(NamedTuple):
  """One call of the device tool: what it measures, the command, its budget (the
  script's BUDGET) and the files it writes to $OUT."""

  measures: str
  command: str
  budget_s: int
  returns: Tuple[str, ...]

  @property
  def expected_s(self) -> int:
    return self.budget_s + SCRIPT_OVERHEAD_S

  @property
  def timeout_s(self) -> int:
    """The call's timeout_s: the script's own `timeout` stops it at BUDGET + 60."""
    return self.budget_s + 60 + SCRIPT_OVERHEAD_S


FIRST_SESSION = (
    Call("the trainer and the numerics: the GPU kernels against XLA, the trainer killed and resumed "
         "(BERT-base, 200 steps), 100 steps against the float32 CPU step, the export "
         "model, the trainer's throughput against the bench step's (the deterministic "
         "pair is skipped at this budget)",
         'BUDGET=360 OUT="$OUT" bash bench/gpu_trainer.sh', 360,
         ("machine.txt", "trainer.jsonl", "trainer.txt", "logs.txt", "gpu_outputs.npz",
          "ckpt-100.h5", "params.yaml")),
    Call("the speed levers: BERT-large seq 128 batch 64, ours and its variants "
         "(reference layers, XLA attention, command buffers, float8, no dropout), HF "
         "torch.compile and eager, profiled",
         'PLAN=profile BUDGET=330 OUT="$OUT" bash bench/gpu_run.sh', 330,
         ("machine.txt", "gpu_pretraining.jsonl", "gpu_pretraining.txt",
          "worker_logs.txt", "traces.tar.gz")),
)
NEXT_SESSION = (
    Call("the figures of record: base and large, seq 128 and 512, ours, HF "
         "eager and torch.compile", 'BUDGET=480 OUT="$OUT" bash bench/gpu_run.sh', 480,
         ("machine.txt", "gpu_pretraining.jsonl", "gpu_pretraining.txt",
          "worker_logs.txt")),
    Call("what the first session skipped of the trainer: killed and resumed under "
         "deterministic XLA ops (bit for bit)",
         'BUDGET=180 OUT="$OUT" bash bench/gpu_trainer.sh --phases=deterministic', 180,
         ("machine.txt", "trainer.jsonl", "trainer.txt", "logs.txt")),
)


def expected_seconds(calls) -> int:
  """The device time of a session running `calls` on one machine, its start included."""
  return START_S + sum(call.expected_s + TRANSFER_S for call in calls)


def describe(name: str, calls) -> str:
  lines = [f"{name}: about {expected_seconds(calls)} s of the {DEVICE_SECONDS} s a session "
           f"has (the machine's start {START_S} s)"]
  for i, call in enumerate(calls, 1):
    lines += [f"  {i}. {call.measures}",
              f"     run: command={call.command!r} carry={list(CARRY)} "
              f"timeout_s={call.timeout_s}",
              f"     about {call.expected_s} s; back in $OUT: {', '.join(call.returns)}"]
  return "\n".join(lines)


def main() -> None:
  print("Before (here, with TensorFlow): STAGE=prepare bash bench/gpu_trainer.sh, the "
        "wheels into .whl/ (bench/README.md), then both scripts with DRY_RUN=1.")
  print(describe("First session", FIRST_SESSION))
  print(describe("Next session", NEXT_SESSION))
  print("After (here): STAGE=compare RESULTS=<the first call's files> bash "
        "bench/gpu_trainer.sh; bench/README.md says where each figure goes.")
  sys.stdout.flush()


if __name__ == "__main__":
  main()
