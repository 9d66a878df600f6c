r"""int8 products of one Dense layer on CPU, timed alone against float32.

  python -m bench.int8_matmul                  # BERT-base shapes, batch 32 and batch 1
  python -m bench.int8_matmul --rows=4096 --shapes=768x3072

For each shape [rows, I] x [I, O] (rows = batch x seq 128) it times, interleaved round by
round in one process (the CPU kernels the tools choose, bench/common.py):

  float32        a float32 keras.layers.Dense (MatMul, oneDNN's float32 GEMM)
  int8           the same layer quantized as `--quantize=int8` exports it
                 (exporter.quantize: int8 kernel cast to float32, float32 product)
  int8_dynamic   quantized as `--quantize=int8_dynamic` (Keras's int8 scheme: inputs
                 quantized per row, int8 x int8 -> int32 BatchMatMulV3, rescaled)
  int8_onednn    quantized as `--quantize=int8_onednn` (bert_tf.export.int8_onednn:
                 inputs scaled per row to uint8, oneDNN's u8 x s8 GEMM through
                 QuantizedMatMulWithBiasAndDequantize; TensorFlow's oneDNN kernels on)
  int8_product   BatchMatMulV3 on int8 inputs alone (no quantization around it)

and prints the median milliseconds and GOP/s of each, the ratio to float32 and the
load average. Each shape's entry of bench/results/int8_matmul.json is replaced.
"""

import os

from absl import app
from absl import flags

from bench import common
from bench import driver
from bench import stats

FLAGS = flags.FLAGS
flags.DEFINE_list("rows", ["4096", "128"], "Rows of the input (batch x sequence length).")
flags.DEFINE_list("shapes", ["768x768", "768x3072", "3072x768"], "IxO kernel shapes.")
flags.DEFINE_integer("rounds", 9, "Timed interleaved rounds.")


def _products(rows: int, features: int, units: int):
  """{name: zero-argument function computing the product} for one shape."""
  import keras  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.export import exporter  # pylint: disable=g-import-not-at-top
  from bert_tf.export import int8_onednn  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  x = tf.constant(rng.standard_normal((1, rows, features)).astype(np.float32))
  modes = exporter.INT8_MODES
  if not int8_onednn.available():
    print("int8_onednn left out: this TensorFlow cannot run oneDNN's int8 matmul", flush=True)
    modes = tuple(m for m in modes if m != exporter.INT8_ONEDNN)
  layers = {}
  for name in ("float32",) + modes:
    keras.utils.set_random_seed(0)
    inputs = keras.Input((rows, features), batch_size=1)
    model = keras.Model(inputs, keras.layers.Dense(units)(inputs))
    layers[name] = model if name == "float32" else exporter.quantize(model, name)
  calls = {name: tf.function(lambda t, m=model: m(t, training=False))
           for name, model in layers.items()}
  products = {name: (lambda f=f: f(x)) for name, f in calls.items()}

  x8 = tf.cast(tf.clip_by_value(x * 40.0, -127.0, 127.0), tf.int8)
  w8 = tf.constant(rng.integers(-127, 128, (features, units)), tf.int8)
  int8_product = tf.function(lambda a: tf.linalg.matmul(a, w8, output_type=tf.int32))
  products["int8_product"] = lambda: int8_product(x8)
  return products


def main(argv):
  del argv
  entries = {}
  for rows in map(int, FLAGS.rows):
    for shape in FLAGS.shapes:
      features, units = map(int, shape.split("x"))
      products = _products(rows, features, units)
      calls = {name: (lambda f=f: f().numpy()) for name, f in products.items()}
      load_before = os.getloadavg()[0]
      driver.interleaved_times(calls, 2)  # warm-up
      times = driver.interleaved_times(calls, FLAGS.rounds)
      load = f"{load_before:.1f}-{os.getloadavg()[0]:.1f}"
      ops = 2.0 * rows * features * units
      f32 = stats.median(times["float32"])
      row = {}
      for name in calls:
        seconds = stats.median(times[name])
        row[name] = {"ms": 1000 * seconds, "gops": ops / seconds / 1e9,
                     "vs_float32": f32 / seconds}
        print(f"{rows}x{features}x{units} {name:13s} {1000 * seconds:9.2f} ms "
              f"{ops / seconds / 1e9:7.1f} GOP/s  {f32 / seconds:5.2f}x float32 speed",
              flush=True)
      print(f"  load average (1 min) {load}", flush=True)
      entries[f"{rows}x{features}x{units}"] = {
          "command": common.command_line(), "machine": common.machine_description(),
          "load_average_1min": load, "rounds": FLAGS.rounds, "products": row}
  common.merge_results("int8_matmul", "shapes", entries)


if __name__ == "__main__":
  app.run(main)
