#!/bin/bash
# The whole trainer on one GPU without TensorFlow, and the GPU numerics
# (bench/gpu_trainer.py, whose docstring lists the phases), in three stages:
#
#   STAGE=prepare bash bench/gpu_trainer.sh    # here, with TensorFlow: the records into
#                                              # .gpu_data/ (ignored by git: carry it)
#   OUT=/path/to/results bash bench/gpu_trainer.sh       # there: STAGE=device
#   STAGE=compare RESULTS=/path/to/results bash bench/gpu_trainer.sh   # here, after
#
# The device stage runs on a GPU machine with jax (CUDA), numpy, pyyaml, absl-py, h5py
# and tensorboard but neither TensorFlow nor keras: keras, namex, optree, grain and
# the packages grain needs come as wheels in $WHEELS (default .whl/; bench/README.md,
# "GPU pretraining step", has the command that downloads them) and are installed into
# /tmp/site. It stays within $BUDGET seconds (default 420) plus a minute, skipping the
# phases that no longer fit, and writes to $OUT: machine.txt, trainer.jsonl (one line
# per phase), trainer.txt (its printed progress), logs.txt (the end of every process's
# log), gpu_outputs.npz, ckpt-N.h5 and params.yaml (the small export model), at most
# eight files of 16 MiB as the device machines return.
#
# DRY_RUN=1 runs the device stage on a CPU at tiny size (BERT-tiny, float32, 20
# training steps killed after 10, 10 numerics steps), the Pallas kernels in Pallas's
# interpreter. Flags after the script go to bench/gpu_trainer.py after the stage's.
set -u
cd "$(dirname "$0")/.."
source bench/gpu_machine.sh
STAGE=${STAGE:-device}
OUT=${OUT:-/tmp/bert_tf_gpu_trainer}
WHEELS=${WHEELS:-.whl}
BUDGET=${BUDGET:-420}
PYTHON=${PYTHON:-python3}
DATA=${DATA:-.gpu_data}
case "$STAGE" in
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
FLAGS=()
if [ "${DRY_RUN:-0}" = 1 ]; then
  FLAGS=(--device=cpu --precision=float32 --size=tiny --batch_size=8 --train_steps=20
         --steps_per_loop=5 --checkpoint_interval=10 --kill_after=10 --numerics_size=tiny
         --numerics_batch_size=4 --numerics_steps=10 --kernel_batch_size=2
         --export_steps=20)
fi
mkdir -p "$OUT"
write_machine_facts
install_wheels keras grain || exit 1
export PYTHONUNBUFFERED=1 KERAS_BACKEND=jax
"$PYTHON" -c "import jax, keras; print('jax', jax.__version__, jax.devices(), 'keras', keras.__version__)" \
  >>"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
timeout $((BUDGET + 60)) "$PYTHON" -m bench.gpu_trainer --stage=device --data_dir="$DATA" \
  --out="$OUT" --time_budget_s="$BUDGET" "${FLAGS[@]}" "$@" 2>&1 | tee "$OUT/trainer.txt"
exit "${PIPESTATUS[0]}"
