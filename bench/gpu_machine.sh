# Sourced by bench/gpu_run.sh and bench/gpu_trainer.sh (from the repo root, with PYTHON,
# WHEELS and OUT set): what the GPU machine is, and the wheels it lacks.

# $OUT/machine.txt: the GPU, Python, and whether TensorFlow is absent as expected.
write_machine_facts() {
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

# Installs $WHEELS/*.whl into $SITE (default /tmp/site), outside the machine's own
# packages, and puts it on PYTHONPATH. Without wheels (a dry run where they are
# installed) nothing is installed, PYTHONPATH stays as it is, and the modules named as
# arguments must import.
install_wheels() {
  local site=${SITE:-/tmp/site}
  if compgen -G "$WHEELS/*.whl" >/dev/null; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$site" "$WHEELS"/*.whl || return 1
    export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
  elif ! KERAS_BACKEND=jax "$PYTHON" -c "import $(IFS=,; echo "$*")" 2>/dev/null; then
    echo "no wheels in $WHEELS and no $*: see bench/README.md, \"GPU pretraining step\"" >&2
    return 1
  fi
}
