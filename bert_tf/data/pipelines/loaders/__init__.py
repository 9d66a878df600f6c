"""Record kinds, each one object registered once with its data loaders, one per input
format (as Model Garden's data-loader factory pairs a data config with its loader):
each loader gives a tf.data form and a host (NumPy, TensorFlow-free) form of one input
from one feature spec and one order (bert_tf.data.records.record_order). See
`registry`; one module per kind (pretraining, squad, and the kinds of featurized
examples of `features`: sentence, tagging, multiple_choice)."""

import importlib
import pkgutil

from bert_tf.data.pipelines.loaders.registry import (DUMMY, PREPARED_FORMATS, TFRECORD,
                                                     DataLoader, InMemoryLoader,
                                                     InputNeeds, RecordKind, formats_of,
                                                     get_kind, get_loader, register_kind,
                                                     require_tensorflow_text, tf_data)

# Importing every module of this package registers its record kinds.
for _module in pkgutil.iter_modules(__path__):
  importlib.import_module(f"{__name__}.{_module.name}")
