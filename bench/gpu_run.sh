#!/bin/bash
# bench/gpu_pretraining.py on a GPU machine that has jax (CUDA), torch, transformers,
# numpy, pyyaml and absl-py, but neither TensorFlow nor keras: keras, namex and optree
# come as wheels in $WHEELS (default .whl/, ignored by git; bench/README.md, "GPU
# pretraining step", has the command that downloads them) and are installed into
# /tmp/site, outside the machine's own packages.
#
#   OUT=/path/to/results bash bench/gpu_run.sh [more flags for bench/gpu_pretraining.py]
#   OUT=/path/to/results PLAN=profile bash bench/gpu_run.sh
#
# PLAN picks the flags the run starts from (flags after the script come after them):
#   record    the default plan: base and large, seq 128 and 512, ours, HF eager and HF
#             torch.compile (the figures of record)
#   profile   BERT-large, seq 128, batch 64, 10 timed steps, every configuration
#             profiled (device time by kernel category, largest kernels): ours (the
#             JAX engine's defaults: the GPU kernels, command buffers off), then its
#             A/B variants (the reference layers, XLA attention, XLA's command
#             buffers, float8 projections, no dropout), then HF torch.compile, then
#             HF eager (the first the budget drops). More variants go after the
#             script, e.g. "--variant=threefry=runtime.gpu_dropout_generator=threefry"
#             "--variant=pallas_ln=runtime.gpu_layer_norm=pallas"
#
# DRY_RUN=1 runs the plan on a CPU at tiny size (no GPU needed: the plan proven before
# it runs on a GPU): BERT-tiny, seq 128, batch 4, float32, 2 timed steps,
# ours only (its variants too), the jax matmul rate on a small product. Flags after
# the script still come last: "--sides=ours,hf_eager --matmul=jax,torch" adds the
# Hugging Face side where torch and transformers are installed.
#
# Writes to $OUT (the device machines return at most eight files): machine.txt (GPU,
# driver, versions), gpu_pretraining.jsonl (the run's records), gpu_pretraining.txt
# (its printed progress, tables and commands), worker_logs.txt (the end of every
# worker's stderr) and, with --profile, traces.tar.gz (the profilers' traces, when
# under $TRACE_MB MiB, default 15: a file over 16 MiB does not come back). The whole run stays within $BUDGET seconds (default 480) plus a
# minute: the configurations that do not fit are recorded as skipped. 480 s leaves a
# few of a 15-minute device lease for the machine's start and the transfers.
set -u
cd "$(dirname "$0")/.."
source bench/gpu_machine.sh
OUT=${OUT:-/tmp/bert_tf_gpu}
WHEELS=${WHEELS:-.whl}
BUDGET=${BUDGET:-480}
PLAN=${PLAN:-record}
TRACE_MB=${TRACE_MB:-15}
PYTHON=${PYTHON:-python3}
LOGS=$(mktemp -d)
TRACES=$(mktemp -d)
case "$PLAN" in
  record) PLAN_FLAGS=() ;;
  profile)
    PLAN_FLAGS=(--sizes=large --seqs=128 --batch_sizes=128:64 --steps=10 --profile
                --sides=ours,hf_compile,hf_eager
                "--variant=reference=runtime.fused_kernels=false"
                "--variant=xla_attention=runtime.gpu_attention=xla"
                "--variant=cmdbuf=xla:--xla_gpu_enable_command_buffer=+FUSION"
                "--variant=fp8=runtime.float8_training=true"
                "--variant=nodrop=model.encoder.dropout_rate=0;model.encoder.attention_dropout_rate=0") ;;
  *) echo "PLAN must be record or profile, got '$PLAN'" >&2; exit 2 ;;
esac
if [ "${DRY_RUN:-0}" = 1 ]; then
  PLAN_FLAGS+=(--sizes=tiny --seqs=128 --batch_sizes=128:4 --sides=ours --matmul=jax
               --precision=float32 --device=cpu --steps=2 --warmup_steps=1
               --back_to_back_rounds=1 --profile_steps=2 --matmul_shapes=256x256x256
               --timeout_s=240)
fi
mkdir -p "$OUT"
# The frameworks' versions are in every worker's record; here the GPU, and whether
# TensorFlow is absent as expected.
write_machine_facts
cat "$OUT/machine.txt"
install_wheels keras || exit 1
export PYTHONUNBUFFERED=1 KERAS_BACKEND=jax
timeout $((BUDGET + 60)) "$PYTHON" -m bench.gpu_pretraining --time_budget_s="$BUDGET" \
  --output="$OUT/gpu_pretraining.jsonl" --worker_logs="$LOGS" --profile_dir="$TRACES" \
  "${PLAN_FLAGS[@]}" "$@" 2>&1 | tee "$OUT/gpu_pretraining.txt"
status=${PIPESTATUS[0]}
for log in "$LOGS"/*.log; do
  [ -e "$log" ] && { echo "== $(basename "$log")"; tail -n 40 "$log"; }
done >"$OUT/worker_logs.txt"
if [ -n "$(ls -A "$TRACES")" ]; then
  tar -czf "$OUT/traces.tar.gz" -C "$TRACES" .
  if [ "$(du -m "$OUT/traces.tar.gz" | cut -f1)" -gt "$TRACE_MB" ]; then
    echo "traces.tar.gz over $TRACE_MB MiB: left out (the summaries are in the records)"
    rm "$OUT/traces.tar.gz"
  fi
fi
exit "$status"
