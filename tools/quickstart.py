"""The quickstart: builds a BERT from a named size and prints its summary.

  python3 tools/setup_and_run.py quickstart
"""

from absl import app
from absl import flags

from bert_tf import configs
from bert_tf.models import BertEncoder

_SIZE = flags.DEFINE_enum("size", "mini", list(configs.ENCODER_SIZES), "Encoder size.")


def main(_):
  encoder = BertEncoder.from_config_object(configs.EncoderConfig.from_size(_SIZE.value))
  encoder.summary()
  print(f"BERT-{_SIZE.value}: {encoder.count_params():,} parameters")


if __name__ == "__main__":
  app.run(main)
