"""The tables of bench/gpu_pretraining.py's runs, from their JSON-lines records: the
step times and throughputs, and, for profiled runs, where the device time goes.

Records: one "run" line (command, date, precision, the MFU denominator), one "matmul"
line per framework, one "step" line per configuration (size, seq_length, batch_size,
predictions, side, variant; "" is the base configuration, as in records written before
variants existed). Several runs merge: a configuration keeps the last run's figure,
or an earlier run's where a later one skipped it.
"""

import json

from bench import common
from bench import flops
from bench import kernel_profile


def read_records(path: str) -> list:
  with open(path) as f:
    return [json.loads(line) for line in f if line.strip()]


def configuration(record: dict) -> tuple:
  return (record["size"], record["seq_length"], record["batch_size"],
          record["predictions"], record["side"], record.get("variant", ""))


def merge_steps(runs: list) -> list:
  """The step records of several runs, one per configuration in first-seen order: the
  last run's where it is ok, else the last ok one, else the last one."""
  chosen = {}
  for records in runs:
    for r in records:
      if r["record"] != "step":
        continue
      key = configuration(r)
      if key not in chosen or r["status"] == "ok" or chosen[key]["status"] != "ok":
        chosen[key] = r
  return list(chosen.values())


def system(record: dict) -> str:
  """The row's system: 'bert_tf (JAX)', or with its variant, 'bert_tf (JAX) [fp8]'."""
  variant = record.get("variant", "")
  return f"{record['system']} [{variant}]" if variant else record["system"]


def run_note(records: list, used: list) -> str:
  """One run's line under the table: when, its command, device, precision and its
  MFU denominator; `used` are its step records that made it into the table."""
  run = next(r for r in records if r["record"] == "run")
  matmul = [r for r in records if r["record"] == "matmul" and r["status"] == "ok"]
  devices = sorted({r["device"] for r in used + matmul if r.get("device")})
  # A run records its rate per framework; runs before those divided by the higher one.
  rate = run.get("matmul_flops_per_second", float("nan"))
  denominator = ("fastest over shapes; each side against its own framework's"
                 if isinstance(rate, dict) else
                 f"best median over shapes; used: {rate / 1e12:.2f} TFLOP/s")
  head = ("at the masked positions only" if run["hf_mlm"] == "gathered"
          else "at every position")
  rows = sum(r["status"] == "ok" for r in used)
  return (f"Run of {run['date']} ({rows} row{'' if rows == 1 else 's'}): "
          f"`{run['command']}`; device {', '.join(devices) or 'unknown'}; "
          f"{run['precision']}; Hugging Face's masked-LM head {head}. MFU denominator: " +
          (", ".join(f"{r['framework']} {r['flops_per_second'] / 1e12:.2f} TFLOP/s"
                     for r in matmul) or "not measured") +
          f" (dense {run['precision']} matmul, {denominator}).")


def _ratio(base, value) -> str:
  return f"{base / value:.2f}x" if base and value else ""


def step_rows(steps: list) -> list:
  """The main table's rows: synced and back-to-back step times, throughput and MFU, and
  ours/this: the base configuration of bert_tf's seq/s over this row's."""
  ours = {(r["size"], r["seq_length"], r["batch_size"]): r for r in steps
          if r["side"] == "ours" and not r.get("variant") and r["status"] == "ok"}
  rows = []
  for r in steps:
    shape = f"{r['seq_length']} x {r['batch_size']} (P {r['predictions']})"
    if r["status"] != "ok":
      rows.append([r["size"], shape, system(r), r["status"]] + [""] * 9)
      continue
    base = ours.get((r["size"], r["seq_length"], r["batch_size"]))
    is_base = base is r
    back = r.get("back_to_back_sequences_per_second")
    memory = r.get("peak_memory_mb")
    rows.append([
        r["size"], shape, system(r),
        f"{r['median_step_ms']:.1f} [{r['q1_step_ms']:.1f}-{r['q3_step_ms']:.1f}]",
        f"{r['back_to_back_step_ms']:.1f}" if back else "n/a",
        f"{r['sequences_per_second']:,.1f}", f"{back:,.1f}" if back else "n/a",
        flops.utilisation_text(r["mfu"], 1),
        flops.utilisation_text(r.get("back_to_back_mfu"), 1),
        f"{r['first_step_s']:.1f}", f"{memory:,.0f}" if memory else "n/a",
        "" if is_base or not base else _ratio(base["sequences_per_second"],
                                              r["sequences_per_second"]),
        "" if is_base or not base else _ratio(
            base.get("back_to_back_sequences_per_second"), back)])
  return rows


def profile_section(steps: list) -> str:
  """Where the device time goes, for the rows that were profiled: ms per step by
  category (and its share), then each row's largest kernels; "" when none was."""
  profiled = [r for r in steps if r["status"] == "ok" and r.get("profile")]
  if not profiled:
    return ""
  header = (["size", "seq x batch", "system", "device ms/step"] +
            [kernel_profile.LABELS[c] for c in kernel_profile.CATEGORIES] +
            ["kernels/step", "wall ms/step"])
  rows, kernels = [], []
  for r in profiled:
    p = r["profile"]
    total = p["device_ms_per_step"]
    shape = f"{r['seq_length']} x {r['batch_size']}"
    rows.append([r["size"], shape, system(r), f"{total:.2f}"] +
                [f"{ms:.2f} ({100 * ms / total if total else 0:.0f}%)"
                 for ms in (p["categories_ms_per_step"][c]
                            for c in kernel_profile.CATEGORIES)] +
                [f"{p['kernels_per_step']:,.0f}", f"{p['wall_ms_per_step']:.1f}"])
    kernels.append(f"- {r['size']} {shape}, {system(r)} ({p['source']}): " + "; ".join(
        f"`{k['name']}` {k['ms_per_step']:.2f} ms x{k['calls_per_step']:g} "
        f"({kernel_profile.LABELS[k['category']]})" for k in p["top_kernels"]))
  steps_note = sorted({r["profile"]["steps"] for r in profiled})
  return ("Device time per step by kernel category (bench/kernel_profile.py; "
          f"{'/'.join(map(str, steps_note))} profiled steps back to back; kernels on "
          "several streams are summed; wall = the profiled steps' host clock):\n\n" +
          common.markdown_table(header, rows) + "\n\nLargest kernels per step:\n\n" +
          "\n".join(kernels))


def report(runs: list) -> str:
  """The markdown tables of one or more runs' records (each run a list of records, as
  read_records gives), with the runs' notes and each row's command."""
  steps = merge_steps(runs)
  commands = []
  for r in steps:
    shape = f"{r['seq_length']} x {r['batch_size']} (P {r['predictions']})"
    failure = "" if r["status"] == "ok" else f" ({r['status']}: {r['error']})"
    commands.append(f"- {r['size']} {shape}, {system(r)}: `{r['command']}`{failure}")
  notes = [run_note(records, used=[r for r in steps if r in records]) for records in runs]
  if len(runs) > 1:
    notes.append("Each row's MFU divides by its own run's matmul rate; each run started "
                 "its own machine.")
  frameworks = sorted({r["framework"] for r in steps if r.get("framework")})
  if frameworks:
    notes.append("Frameworks: " + "; ".join(frameworks) + ".")
  header = ["size", "seq x batch", "system", "synced step ms [IQR]", "back-to-back ms",
            "synced seq/s", "back-to-back seq/s", "MFU synced", "MFU back-to-back",
            "first step s", "peak MiB", "ours/this synced", "ours/this back-to-back"]
  sections = [common.markdown_table(header, step_rows(steps)), "\n\n".join(notes),
              profile_section(steps), "\n".join(commands)]
  return "\n\n".join(section for section in sections if section)
