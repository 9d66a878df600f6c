"""ONNX Runtime and OpenVINO serving workers (run in the `onnxruntime` or `openvino`
peer venv): a Hugging Face BertForSequenceClassification folder, exported and quantized
as each stack's users do, answering protocol.serve_classifier.

  onnxruntime float32       torch.onnx.export of the model, ORT's default graph
                            optimizations
  onnxruntime optimized     onnxruntime.transformers.optimizer (model_type bert): fused
                            attention, LayerNorm and GELU
  onnxruntime int8_dynamic  quantize_dynamic (int8 weights, per-call uint8 activations)
                            of the optimized model
  onnxruntime int8_static   quant_pre_process, then quantize_static (QDQ, per-channel
                            int8 weights, uint8 activations calibrated on the
                            "calibration" rows)
  openvino float32          openvino.convert_model of the torch model, precision hint f32
  openvino bf16             the same, precision hint bf16
  openvino int8             nncf.quantize (ModelType.TRANSFORMER) on the "calibration" rows

Each model file is made once in --work_dir and reused by the later workers of a run.
Spoken to by bench/int8_serving.py through protocol.py.
"""

import json
import os

import numpy as np

from bench.peers import protocol

VARIANTS = {"onnxruntime": ("float32", "optimized", "int8_dynamic", "int8_static"),
            "openvino": ("float32", "bf16", "int8")}
HF_NAMES = ("input_ids", "attention_mask", "token_type_ids")
# The quantizers' shape inference types no output of the optimizer's fused (contrib) ops:
# those are float32.
_CONTRIB_OPS_FLOAT = {"DefaultTensorType": 1}  # onnx.TensorProto.FLOAT


def torch_model(hf_dir):
  """(model, example inputs) of the Hugging Face classifier in hf_dir, in eval mode; the
  eager attention, whose graph ONNX Runtime's optimizer recognizes."""
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  model = transformers.AutoModelForSequenceClassification.from_pretrained(
      hf_dir, attn_implementation="eager", torch_dtype=torch.float32).eval()
  example = {name: torch.ones((2, 8), dtype=torch.int64) for name in HF_NAMES}
  return model, example


def calibration_rows(arrays):
  """The "calibration" rows as a list of one-row feeds {HF name: int64 [1, T]}."""
  ids = protocol.token_ids(arrays, "calibration")
  return [{name: a[i:i + 1].astype(np.int64) for name, a in zip(HF_NAMES, ids)}
          for i in range(len(ids[0]))]


def onnx_file(variant, hf_dir, work_dir, arrays):
  """The ONNX file of an onnxruntime variant, made (with those it derives from) when
  absent from work_dir."""
  path = os.path.join(work_dir, f"onnxruntime_{variant}.onnx")
  if os.path.exists(path):
    return path
  partial = path + ".partial.onnx"
  if variant == "float32":
    import torch  # pylint: disable=g-import-not-at-top
    model, example = torch_model(hf_dir)
    dynamic = {name: {0: "batch", 1: "sequence"} for name in HF_NAMES}
    with torch.no_grad():
      torch.onnx.export(model, (), partial, kwargs=example, input_names=list(HF_NAMES),
                        output_names=["logits"], dynamic_axes=dynamic, opset_version=17,
                        dynamo=False)
  elif variant == "optimized":
    from onnxruntime.transformers import optimizer  # pylint: disable=g-import-not-at-top
    with open(os.path.join(hf_dir, "config.json")) as f:
      config = json.load(f)
    optimizer.optimize_model(
        onnx_file("float32", hf_dir, work_dir, arrays), model_type="bert",
        num_heads=config["num_attention_heads"],
        hidden_size=config["hidden_size"]).save_model_to_file(partial)
  elif variant == "int8_dynamic":
    from onnxruntime import quantization  # pylint: disable=g-import-not-at-top
    quantization.quantize_dynamic(onnx_file("optimized", hf_dir, work_dir, arrays), partial,
                                  weight_type=quantization.QuantType.QInt8,
                                  extra_options=_CONTRIB_OPS_FLOAT)
  else:
    from onnxruntime import quantization  # pylint: disable=g-import-not-at-top
    rows = calibration_rows(arrays)

    class Reader(quantization.CalibrationDataReader):

      def __init__(self):
        self.rows = iter(rows)

      def get_next(self):
        return next(self.rows, None)

    # The documented path: ONNX Runtime's pre-processing (shape inference, graph
    # optimization) of the float32 model; the fused model's ops do not calibrate.
    prepared = os.path.join(work_dir, "onnxruntime_int8_static_prepared.onnx")
    quantization.quant_pre_process(onnx_file("float32", hf_dir, work_dir, arrays), prepared,
                                   skip_symbolic_shape=True)
    quantization.quantize_static(
        prepared, partial, Reader(),
        quant_format=quantization.QuantFormat.QDQ, per_channel=True,
        activation_type=quantization.QuantType.QUInt8,
        weight_type=quantization.QuantType.QInt8)
  os.replace(partial, path)
  return path


def onnxruntime_predict(variant, hf_dir, work_dir, arrays, threads):
  """(predict, info) of an ONNX Runtime session of `variant`."""
  import onnxruntime  # pylint: disable=g-import-not-at-top
  path = onnx_file(variant, hf_dir, work_dir, arrays)
  options = onnxruntime.SessionOptions()
  if threads:
    options.intra_op_num_threads = threads
  session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])

  def predict(*ids):
    return session.run(None, {n: a.astype(np.int64) for n, a in zip(HF_NAMES, ids)})[0]

  return predict, {"framework": f"onnxruntime {onnxruntime.__version__}",
                   "model_mb": os.path.getsize(path) / 2 ** 20}


def openvino_predict(variant, hf_dir, work_dir, arrays, threads):
  """(predict, info) of an OpenVINO CPU model of `variant`."""
  import openvino  # pylint: disable=g-import-not-at-top
  path = os.path.join(work_dir, f"openvino_{'int8' if variant == 'int8' else 'float32'}.xml")
  if not os.path.exists(path):
    model, example = torch_model(hf_dir)
    ov_model = openvino.convert_model(model, example_input=example)
    if variant == "int8":
      import nncf  # pylint: disable=g-import-not-at-top
      rows = calibration_rows(arrays)
      ov_model = nncf.quantize(ov_model, nncf.Dataset(rows), subset_size=len(rows),
                               model_type=nncf.ModelType.TRANSFORMER)
    partial = path[:-len(".xml")] + "_partial.xml"
    openvino.save_model(ov_model, partial, compress_to_fp16=False)
    os.replace(partial[:-len(".xml")] + ".bin", path[:-len(".xml")] + ".bin")
    os.replace(partial, path)
  config = {"PERFORMANCE_HINT": "LATENCY"}
  if variant != "int8":  # int8: the precision of the rest is OpenVINO's default.
    config["INFERENCE_PRECISION_HINT"] = "bf16" if variant == "bf16" else "f32"
  if threads:
    config["INFERENCE_NUM_THREADS"] = threads
  compiled = openvino.Core().compile_model(path, "CPU", config)
  request = compiled.create_infer_request()

  def predict(*ids):
    feed = {n: a.astype(np.int64) for n, a in zip(HF_NAMES, ids)}
    return np.array(request.infer(feed)[compiled.output(0)])

  size = os.path.getsize(path[:-len(".xml")] + ".bin") / 2 ** 20
  return predict, {"framework": f"openvino {openvino.__version__}", "model_mb": size,
                   "precision": compiled.get_property("INFERENCE_PRECISION_HINT").to_string()}


def main():
  parser = protocol.serving_argument_parser(__doc__)
  parser.add_argument("--stack", choices=sorted(VARIANTS), required=True)
  parser.add_argument("--variant", required=True)
  parser.add_argument("--hf_dir", required=True)
  parser.add_argument("--work_dir", required=True)
  args = parser.parse_args()
  if args.variant not in VARIANTS[args.stack]:
    parser.error(f"--variant: {args.stack} has {', '.join(VARIANTS[args.stack])}")
  arrays = dict(np.load(args.inputs))
  build = onnxruntime_predict if args.stack == "onnxruntime" else openvino_predict
  predict, info = build(args.variant, args.hf_dir, args.work_dir, arrays, args.threads)
  protocol.serve_classifier(predict, args, info)


if __name__ == "__main__":
  main()
