#!/bin/bash
# The GPU benchmarks on a GPU machine that has jax (CUDA), torch, transformers, numpy,
# pyyaml, absl-py, h5py and tensorboard but neither TensorFlow nor keras: keras, namex,
# optree, grain and the packages grain needs come as wheels in $WHEELS (default .whl/,
# ignored by git; bench/README.md has the command that downloads them) and are
# installed into $SITE (default /tmp/site), outside the machine's own packages.
#
#   OUT=DIR bash bench/gpu.sh pretraining [flags]   bench/gpu_pretraining.py: the JAX
#       step against Hugging Face's; PLAN=record (the default: base and large, seq 128
#       and 512, ours, HF eager and HF torch.compile, the figures of record) or
#       PLAN=profile (BERT-large, seq 128, batch 64, 10 timed steps, every
#       configuration profiled: ours, then its A/B variants, then HF torch.compile,
#       then HF eager, the first the budget drops). Writes machine.txt,
#       gpu_pretraining.jsonl, gpu_pretraining.txt, worker_logs.txt and, profiled,
#       traces.tar.gz (when under $TRACE_MB MiB, default 15). BUDGET default 480.
#   STAGE=prepare bash bench/gpu.sh trainer          here, with TensorFlow: the records
#       into $DATA (default .gpu_data/, ignored by git: carry it)
#   OUT=DIR bash bench/gpu.sh trainer [flags]        there (STAGE=device): the phases of
#       bench/gpu_trainer.py. Writes machine.txt, trainer.jsonl, trainer.txt,
#       logs.txt, gpu_outputs.npz, ckpt-N.h5 and params.yaml. BUDGET default 420.
#   STAGE=compare RESULTS=DIR bash bench/gpu.sh trainer   here, after: the export
#
# Flags after the benchmark's name go to its Python driver after the plan's. Each run
# stays within $BUDGET seconds plus a minute, recording what no longer fits as
# skipped, and writes at most eight files of 16 MiB to $OUT (what a device machine
# returns). DRY_RUN=1 runs the plan on a CPU at tiny size (BERT-tiny, float32, few
# steps; the trainer's Pallas kernels in Pallas's interpreter): the plan proven before
# it runs on a GPU.
set -u
cd "$(dirname "$0")/.."
BENCH=${1:-}
shift || true
WHEELS=${WHEELS:-.whl}
PYTHON=${PYTHON:-python3}

# $OUT/machine.txt: the GPU, Python, and whether TensorFlow is absent as expected.
write_machine_facts() {
  mkdir -p "$OUT"
  {
    if command -v nvidia-smi >/dev/null; then
      nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
    else
      echo "no nvidia-smi: no NVIDIA GPU here"
    fi
    "$PYTHON" --version
    "$PYTHON" -c "import tensorflow" 2>&1 | tail -1
  } >"$OUT/machine.txt" 2>&1
}

# Installs $WHEELS/*.whl into $SITE and puts it on PYTHONPATH. Without wheels (a dry run
# where they are installed) nothing is installed, and the modules named must import.
install_wheels() {
  local site=${SITE:-/tmp/site}
  if compgen -G "$WHEELS/*.whl" >/dev/null; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$site" "$WHEELS"/*.whl || return 1
    export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
  elif ! KERAS_BACKEND=jax "$PYTHON" -c "import $(IFS=,; echo "$*")" 2>/dev/null; then
    echo "no wheels in $WHEELS and no $*: see bench/README.md, \"GPU benchmarks\"" >&2
    return 1
  fi
}

pretraining() {
  OUT=${OUT:-/tmp/bert_tf_gpu}
  BUDGET=${BUDGET:-480}
  TRACE_MB=${TRACE_MB:-15}
  local logs traces status
  logs=$(mktemp -d)
  traces=$(mktemp -d)
  case "${PLAN:-record}" in
    record) PLAN_FLAGS=() ;;
    profile)
      PLAN_FLAGS=(--sizes=large --seqs=128 --batch_sizes=128:64 --steps=10 --profile
                  --sides=ours,hf_compile,hf_eager
                  "--variant=reference=runtime.fused_kernels=false"
                  "--variant=xla_attention=runtime.kernels.jax_gpu.attention=xla"
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
  write_machine_facts
  cat "$OUT/machine.txt"
  install_wheels keras || exit 1
  export PYTHONUNBUFFERED=1 KERAS_BACKEND=jax
  timeout $((BUDGET + 60)) "$PYTHON" -m bench.gpu_pretraining --time_budget_s="$BUDGET" \
    --output="$OUT/gpu_pretraining.jsonl" --worker_logs="$logs" --profile_dir="$traces" \
    "${PLAN_FLAGS[@]}" "$@" 2>&1 | tee "$OUT/gpu_pretraining.txt"
  status=${PIPESTATUS[0]}
  for log in "$logs"/*.log; do
    [ -e "$log" ] && { echo "== $(basename "$log")"; tail -n 40 "$log"; }
  done >"$OUT/worker_logs.txt"
  if [ -n "$(ls -A "$traces")" ]; then
    tar -czf "$OUT/traces.tar.gz" -C "$traces" .
    if [ "$(du -m "$OUT/traces.tar.gz" | cut -f1)" -gt "$TRACE_MB" ]; then
      echo "traces.tar.gz over $TRACE_MB MiB: left out (the summaries are in the records)"
      rm "$OUT/traces.tar.gz"
    fi
  fi
  exit "$status"
}

trainer() {
  OUT=${OUT:-/tmp/bert_tf_gpu_trainer}
  BUDGET=${BUDGET:-420}
  DATA=${DATA:-.gpu_data}
  case "${STAGE:-device}" in
    prepare) exec "$PYTHON" -m bench.gpu_trainer --stage=prepare --data_dir="$DATA" "$@" ;;
    compare) exec "$PYTHON" -m bench.gpu_trainer --stage=compare --data_dir="$DATA" \
               --results="${RESULTS:?RESULTS: the folder of the device run files}" "$@" ;;
    device) ;;
    *) echo "STAGE must be prepare, device or compare, got '$STAGE'" >&2; exit 2 ;;
  esac
  if ! compgen -G "$DATA/pretrain-*.tfrecord" >/dev/null; then
    echo "no records in $DATA: run STAGE=prepare first (here, with TensorFlow) and carry $DATA" >&2
    exit 1
  fi
  local flags=()
  if [ "${DRY_RUN:-0}" = 1 ]; then
    flags=(--device=cpu --precision=float32 --size=tiny --batch_size=8 --train_steps=20
           --steps_per_loop=5 --checkpoint_interval=10 --kill_after=10 --numerics_size=tiny
           --numerics_batch_size=4 --numerics_steps=10 --kernel_batch_size=2
           --export_steps=20)
  fi
  write_machine_facts
  install_wheels keras grain || exit 1
  export PYTHONUNBUFFERED=1 KERAS_BACKEND=jax
  "$PYTHON" -c "import jax, keras; print('jax', jax.__version__, jax.devices(), 'keras', keras.__version__)" \
    >>"$OUT/machine.txt" 2>&1
  cat "$OUT/machine.txt"
  timeout $((BUDGET + 60)) "$PYTHON" -m bench.gpu_trainer --stage=device --data_dir="$DATA" \
    --out="$OUT" --time_budget_s="$BUDGET" "${flags[@]}" "$@" 2>&1 | tee "$OUT/trainer.txt"
  exit "${PIPESTATUS[0]}"
}

case "$BENCH" in
  pretraining) pretraining "$@" ;;
  trainer) trainer "$@" ;;
  *) echo "usage: bash bench/gpu.sh pretraining|trainer [flags] (bench/README.md)" >&2; exit 2 ;;
esac
