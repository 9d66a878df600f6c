"""Choosing the Keras backend of a training run, and running the experiment on it.

Keras fixes its backend when it is first imported, so tools/train.py reads the run's
`runtime.backend` before anything imports Keras (`requested_backend`, plain YAML over
the experiment, config files and overrides, then the --backend flag), sets
KERAS_BACKEND (`select`), and only then resolves the experiment and calls
`run_experiment`, which fails in one line if Keras runs on another backend and records
the backend in use in params.yaml.

On JAX, KERAS_DISTRIBUTION_NUM_PROCESSES > 1 (with KERAS_DISTRIBUTION_JOB_ADDRESSES,
the coordinator's host:port, and KERAS_DISTRIBUTION_PROCESS_ID) starts
`jax.distributed` (Keras's `keras.distribution.initialize`) before the first
computation (bert_tf.training.jax_engine.devices); on CPUs its collectives go through
gloo.
"""

import os
import sys
from typing import Dict, Optional, Sequence

import yaml

from bert_tf import configs
from bert_tf.kernels.jax_gpu import xla_flags
from bert_tf.training import experiments

def requested_backend(experiment: Optional[str] = None, config_files: Sequence[str] = (),
                      params_override: Optional[str] = None,
                      flag: Optional[str] = None) -> str:
  """runtime.backend as a run's configuration sets it, read without Keras: the last
  of the experiment file, the config files, params_override and the --backend flag
  that names it; "" when none does."""
  value = ""
  paths = ([experiments.experiment_path(experiment)] if experiment else [])
  for path in list(paths) + list(config_files or ()):
    with open(path, encoding="utf-8") as f:
      data = yaml.safe_load(f) or {}
    runtime = data.get("runtime") if isinstance(data, dict) else None
    if isinstance(runtime, dict) and runtime.get("backend") is not None:
      value = str(runtime["backend"])
  if params_override:
    runtime = configs.parse_dotted_overrides(params_override).get("runtime")
    if isinstance(runtime, dict) and runtime.get("backend") is not None:
      value = str(runtime["backend"])
  return flag or value


def select(backend: str) -> None:
  """Makes `backend` Keras's backend ("" leaves KERAS_BACKEND or Keras's default). For
  the JAX engine, adds its XLA defaults to XLA_FLAGS (bert_tf.kernels.jax_gpu.xla_flags).

  Raises:
    ConfigError: an unknown backend, or Keras already imported with another one.
  """
  if backend not in configs.BACKENDS:
    raise configs.ConfigError(f"runtime.backend must be one of "
                              f"{', '.join(b for b in configs.BACKENDS if b)}, got '{backend}'")
  if (backend or os.environ.get("KERAS_BACKEND")) == "jax":
    xla_flags.apply_jax_defaults()
  if not backend:
    return
  if "keras" in sys.modules:
    loaded = sys.modules["keras"].backend.backend()
    if loaded != backend:
      raise configs.ConfigError(f"runtime.backend is '{backend}' but Keras was already "
                                f"imported with the '{loaded}' backend")
  os.environ["KERAS_BACKEND"] = backend


def describe_devices() -> str:
  """The backend and its devices, for the run's first log line."""
  import keras  # pylint: disable=g-import-not-at-top
  backend = keras.backend.backend()
  if backend == "jax":
    import jax  # pylint: disable=g-import-not-at-top
    devices = jax.devices()
    kinds = sorted({d.platform for d in devices})
    return (f"Keras backend jax: {len(devices)} {'/'.join(kinds)} device(s) in "
            f"{jax.process_count()} process(es)")
  if backend == "tensorflow":
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    kinds = {kind: len(tf.config.list_logical_devices(kind)) for kind in ("GPU", "TPU")}
    shown = ", ".join(f"{n} {kind}" for kind, n in kinds.items() if n) or "CPU"
    return f"Keras backend tensorflow: {shown}"
  return f"Keras backend {backend}"


def _keep_tensorflow_off_accelerators() -> None:
  """Where TensorFlow is installed (a tf.data input runs in this process), keeps it off
  the accelerators JAX uses."""
  try:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
  except ImportError:
    return
  try:
    tf.config.set_visible_devices([], "GPU")
  except RuntimeError:
    pass  # TensorFlow initialized its devices already.


def run_experiment(experiment: configs.ExperimentConfig, model_dir: str, mode: str = "train",
                   log_fn=None, replace_params: bool = False) -> Dict[str, float]:
  """Runs `mode` of the experiment with the one Trainer (bert_tf.training.trainer) on
  the engine of Keras's backend, after a first log line naming the backend and its
  devices. params.yaml records the backend in use.

  Raises:
    ConfigError: runtime.backend names another backend than Keras runs on, or a
      setting the engine does not have (TPUStrategy on JAX).
  """
  import keras  # pylint: disable=g-import-not-at-top
  log = log_fn or print
  loaded = keras.backend.backend()
  wanted = experiment.runtime.backend
  if wanted and wanted != loaded:
    raise configs.ConfigError(
        f"runtime.backend is '{wanted}' but Keras runs on '{loaded}' (Keras chose it when "
        f"first imported: set KERAS_BACKEND={wanted} or pass --backend={wanted} to "
        "tools/train.py)")
  experiment = experiment.override({"runtime": {"backend": loaded}})
  if loaded == "jax":
    from bert_tf.training.jax_engine import devices  # pylint: disable=g-import-not-at-top
    devices.check_runtime(experiment.runtime)
    devices.start(experiment.runtime)
    _keep_tensorflow_off_accelerators()
  elif loaded == "tensorflow":
    from bert_tf.training.tf_engine import strategies  # pylint: disable=g-import-not-at-top
    strategies.configure_runtime(experiment.runtime)
  else:
    raise configs.ConfigError(f"Training runs on the tensorflow and jax backends; Keras "
                              f"runs on '{loaded}'")
  log(describe_devices())
  from bert_tf.training import trainer  # pylint: disable=g-import-not-at-top
  return trainer.run_experiment(experiment, model_dir, mode, log_fn=log,
                                replace_params=replace_params)
