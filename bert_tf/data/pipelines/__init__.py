"""Input pipelines: featurizing, masking, packing, padding and batching, as tf.data and as
host (NumPy) batches for the JAX engine."""
