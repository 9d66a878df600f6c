#!/bin/bash
# bench/gpu_pretraining.py on a GPU machine that has jax (CUDA), torch, transformers,
# numpy, pyyaml and absl-py, but neither TensorFlow nor keras: keras, namex and optree
# come as wheels in $WHEELS (default .whl/, ignored by git; bench/README.md, "GPU
# pretraining step", has the command that downloads them) and are installed into
# /tmp/site, outside the machine's own packages.
#
#   OUT=/path/to/results bash bench/gpu_run.sh [more flags for bench/gpu_pretraining.py]
#
# Writes four files to $OUT (the device machines return at most eight): machine.txt
# (GPU, driver, versions), gpu_pretraining.jsonl (the run's records), gpu_pretraining.txt
# (its printed progress, table and commands) and worker_logs.txt (the end of every
# worker's stderr). The whole run stays within $BUDGET seconds (default 480) plus a
# minute: the configurations that do not fit are recorded as skipped. 480 s leaves a
# few of a 15-minute device lease for the machine's start and the transfers.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/bert_tf_gpu}
WHEELS=${WHEELS:-.whl}
BUDGET=${BUDGET:-480}
PYTHON=${PYTHON:-python3}
LOGS=$(mktemp -d)
mkdir -p "$OUT"
# The frameworks' versions are in every worker's record; here the GPU, and whether
# TensorFlow is absent as expected.
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
  "$PYTHON" --version
  "$PYTHON" -c "import tensorflow" 2>&1 | tail -1
} >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
"$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$WHEELS"/*.whl || exit 1
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 KERAS_BACKEND=jax
timeout $((BUDGET + 60)) "$PYTHON" bench/gpu_pretraining.py --time_budget_s="$BUDGET" \
  --output="$OUT/gpu_pretraining.jsonl" --worker_logs="$LOGS" "$@" 2>&1 |
  tee "$OUT/gpu_pretraining.txt"
status=${PIPESTATUS[0]}
for log in "$LOGS"/*.log; do
  [ -e "$log" ] && { echo "== $(basename "$log")"; tail -n 40 "$log"; }
done >"$OUT/worker_logs.txt"
exit "$status"
