"""Choosing the Keras backend of a training run, and the engine that trains on it.

Keras fixes its backend when it is first imported, so tools/train.py reads the run's
`runtime.backend` before anything imports Keras (`requested_backend`, plain YAML over
the experiment, config files and overrides, then the --backend flag), sets
KERAS_BACKEND (`select`), and only then resolves the experiment and runs it
(bert_tf.training.trainer.run_experiment), which sets up the engine's devices
(`start_runtime`: one line if Keras runs on another backend; params.yaml records the
backend in use). `engine_class` is the one place that maps a backend to its engine.

On JAX, KERAS_DISTRIBUTION_NUM_PROCESSES > 1 (with KERAS_DISTRIBUTION_JOB_ADDRESSES,
the coordinator's host:port, and KERAS_DISTRIBUTION_PROCESS_ID) starts
`jax.distributed` (Keras's `keras.distribution.initialize`) before the first
computation (bert_tf.training.jax_engine.devices); on CPUs its collectives go through
gloo.
"""

import os
import sys
from typing import Optional, Sequence

from bert_tf import configs
from bert_tf.kernels.jax_gpu import xla_flags
from bert_tf.training import experiments
from bert_tf.utils import optional

def requested_backend(experiment: Optional[str] = None, config_files: Sequence[str] = (),
                      params_override: Optional[str] = None,
                      flag: Optional[str] = None) -> str:
  """runtime.backend as a run's configuration sets it, read without Keras: the last
  of the experiment file, the config files, params_override and the --backend flag
  that names it; "" when none does."""
  value = ""
  paths = ([experiments.experiment_path(experiment)] if experiment else [])
  for path in list(paths) + list(config_files or ()):
    runtime = configs.load_yaml(path).get("runtime")
    if isinstance(runtime, dict) and runtime.get("backend") is not None:
      value = str(runtime["backend"])
  if params_override:
    runtime = configs.parse_dotted_overrides(params_override).get("runtime")
    if isinstance(runtime, dict) and runtime.get("backend") is not None:
      value = str(runtime["backend"])
  return flag or value


def select(backend: str) -> str:
  """Makes `backend` Keras's backend ("" leaves KERAS_BACKEND or Keras's default). For
  the JAX engine, adds its XLA defaults to XLA_FLAGS (bert_tf.kernels.jax_gpu.xla_flags).

  Returns:
    the backend Keras runs with: `backend`, else KERAS_BACKEND, else "tensorflow".

  Raises:
    ConfigError: an unknown backend, Keras already imported with another one, or
      TensorFlow's (the default) where TensorFlow is not installed.
  """
  if backend not in configs.BACKENDS:
    raise configs.ConfigError(f"runtime.backend must be one of "
                              f"{', '.join(b for b in configs.BACKENDS if b)}, got '{backend}'")
  chosen = backend or os.environ.get("KERAS_BACKEND") or "tensorflow"
  if chosen == "tensorflow" and not optional.installed("tensorflow"):
    raise configs.ConfigError(
        f"runtime.backend {backend or 'tensorflow (the default)'} needs TensorFlow: "
        f"{optional.TENSORFLOW_INSTALL}; without it, train on JAX: --backend=jax")
  if (backend or os.environ.get("KERAS_BACKEND")) == "jax":
    xla_flags.apply_jax_defaults()
  if not backend:
    return chosen
  if "keras" in sys.modules:
    loaded = sys.modules["keras"].backend.backend()
    if loaded != backend:
      raise configs.ConfigError(f"runtime.backend is '{backend}' but Keras was already "
                                f"imported with the '{loaded}' backend")
  os.environ["KERAS_BACKEND"] = backend
  return chosen


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


def engine_class(backend: Optional[str] = None) -> type:
  """The bert_tf.training.engine.Engine subclass of a Keras backend (default: the one
  Keras runs on). The only place that names the engines: each is imported here when
  chosen, so that a JAX run imports no TensorFlow, and this module imports neither
  Keras nor the engines before a backend is selected.

  Raises:
    ConfigError: a backend without an engine.
  """
  if backend is None:
    import keras  # pylint: disable=g-import-not-at-top
    backend = keras.backend.backend()
  if backend == "jax":
    from bert_tf.training.jax_engine.engine import JaxEngine  # pylint: disable=g-import-not-at-top
    return JaxEngine
  if backend == "tensorflow":
    from bert_tf.training.tf_engine.engine import TensorFlowEngine  # pylint: disable=g-import-not-at-top
    return TensorFlowEngine
  raise configs.ConfigError(f"Training runs on the tensorflow and jax backends; Keras "
                            f"runs on '{backend}'")


def start_runtime(experiment: configs.ExperimentConfig, log_fn) -> configs.ExperimentConfig:
  """Sets up the devices of Keras's backend for `experiment` (before its first
  computation) and logs a line naming the backend and its devices.

  Returns:
    the experiment with runtime.backend set to the backend in use (what params.yaml
    records).

  Raises:
    ConfigError: runtime.backend names another backend than Keras runs on, or a
      setting the engine does not have (TPUStrategy on JAX).
  """
  import keras  # pylint: disable=g-import-not-at-top
  loaded = keras.backend.backend()
  wanted = experiment.runtime.backend
  if wanted and wanted != loaded:
    raise configs.ConfigError(
        f"runtime.backend is '{wanted}' but Keras runs on '{loaded}' (Keras chose it when "
        f"first imported: set KERAS_BACKEND={wanted} or pass --backend={wanted} to "
        "tools/train.py)")
  experiment = experiment.override({"runtime": {"backend": loaded}})
  engine_class(loaded).start_runtime(experiment.runtime)
  log_fn(describe_devices())
  return experiment
