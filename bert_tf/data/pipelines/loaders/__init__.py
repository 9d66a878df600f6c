"""Data loaders, one per record kind and input format (as Model Garden's data-loader
factory pairs a data config with its loader): each gives a tf.data form and a host
(NumPy, TensorFlow-free) form of one input from one feature spec and one order
(bert_tf.data.records.record_order). See `registry`."""

from bert_tf.data.pipelines.loaders import features
from bert_tf.data.pipelines.loaders import pretraining
from bert_tf.data.pipelines.loaders import squad
from bert_tf.data.pipelines.loaders.registry import (DUMMY, PREPARED_FORMATS, TFRECORD,
                                                     DataLoader, InputNeeds, formats_of,
                                                     get_loader, register_loader,
                                                     require_tensorflow_text, tf_data)
