"""The TensorFlow engine of the one trainer: tf.distribute strategies, tf.function
steps and the TensorFlow CPU kernels (bert_tf.training.tf_engine.engine)."""
