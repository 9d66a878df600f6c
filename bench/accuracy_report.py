r"""The "fine-tuning accuracy" section of bench/README.md, built from the results files.

bench/finetune_glue.py, bench/finetune_squad.py and bench/finetune_ner.py each write one
bench/results/accuracy_<name>.json per task they run and then call `record`, which
rebuilds the section from every accuracy_*.json present, so runs made at different
times (each with its own settings) share one table. Run this file to rebuild the section
from the results files alone:

  python bench/accuracy_report.py
"""

import glob
import json
import os
import sys
import time
from typing import Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # pylint: disable=g-import-not-at-top,wrong-import-position

SECTION = "finetune_accuracy"
PREFIX = "accuracy_"
# Table order; names not listed come after these, alphabetically.
ORDER = ("glue_sst2", "glue_cola", "glue_mrpc", "glue_rte", "glue_stsb", "squad_v1.1",
         "conll2003_ner")
HEADER = ("task", "train → evaluated", "dev result", "baseline", "budget", "time")


def load_average() -> str:
  """The 1/5/15-minute load averages, as `uptime` shows them."""
  return " / ".join(f"{x:.1f}" for x in os.getloadavg())


def lr_text(learning_rate: float) -> str:
  """5e-05 -> "5e-5", 0.0001 -> "1e-4", 1.5e-4 -> "1.5e-4"."""
  mantissa, exponent = f"{learning_rate:e}".split("e")
  return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def record(name: str, payload: Dict, write_readme: bool = True) -> str:
  """Writes bench/results/accuracy_<name>.json and, with write_readme, rebuilds the section.

  Args:
    name: the row's key (see ORDER).
    payload: task, data, result, baseline, budget, seconds, load, command (strings
      except seconds), plus whatever raw figures the script keeps (metrics, settings).

  Returns:
    the path of the results file.
  """
  payload = dict(payload, name=name, date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
  path = common.write_results(PREFIX + name, payload)
  print(f"Wrote {path}", flush=True)
  if write_readme:
    common.update_readme_section(SECTION, render())
    print(f"Updated the '{SECTION}' section of {common.README}", flush=True)
  return path


def _load_all(results_dir: str = common.RESULTS_DIR) -> List[Dict]:
  rows = []
  for path in glob.glob(os.path.join(results_dir, PREFIX + "*.json")):
    with open(path) as f:
      rows.append(json.load(f))
  rank = {name: i for i, name in enumerate(ORDER)}
  return sorted(rows, key=lambda r: (rank.get(r["name"], len(ORDER)), r["name"]))


def render(results_dir: str = common.RESULTS_DIR) -> str:
  """The section's markdown: one table row per results file, then each row's command."""
  rows = _load_all(results_dir)
  if not rows:
    return "(not run yet) `python bench/finetune_glue.py ...`"
  table = common.markdown_table(HEADER, [
      (r["task"], r["data"], r["result"], r["baseline"], r["budget"],
       f"{r['seconds'] / 60:.0f} min (load {r['load']})") for r in rows])
  commands = [f"- {r['task']} ({r['date']}):\n  `{r['command']}`" for r in rows]
  return "\n".join([table, "", "Commands, in table order:", "", *commands])


def main():
  common.update_readme_section(SECTION, render())
  print(render())


if __name__ == "__main__":
  main()
