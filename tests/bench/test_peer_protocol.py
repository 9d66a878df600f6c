"""The peers' side of the interleaved benchmarks (bench/peers/protocol.py): it runs in
the peers' own environments, so it must import without this library's dependencies,
and it must build the sizes our encoder config builds."""

import subprocess
import sys

from bench.peers import protocol
from bert_tf import configs

REPO_ROOT = __file__.rsplit("/tests/", 1)[0]


def test_peer_protocol_imports_without_yaml_tensorflow_keras_jax_or_torch():
  blocked = ("yaml", "tensorflow", "keras", "jax", "torch")
  code = ("import sys\n"
          f"for name in {blocked!r}: sys.modules[name] = None\n"
          "from bench.peers import protocol\n"
          "print(protocol.size_args('mini'))\n")
  result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT,
                          capture_output=True, text=True, check=False)
  assert result.returncode == 0, result.stderr
  assert result.stdout.strip() == "(4, 256, 4, 1024)"


def test_peer_sizes_are_the_encoder_configs_released_sizes():
  for size in configs.ENCODER_SIZES:
    encoder = configs.EncoderConfig.from_size(size)
    assert protocol.size_args(size) == (encoder.num_layers, encoder.hidden_size,
                                        encoder.num_attention_heads,
                                        4 * encoder.hidden_size)
