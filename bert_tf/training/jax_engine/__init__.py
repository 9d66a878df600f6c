"""The JAX engine of the one trainer: one device, data parallel over the local devices
or every process's, jit-compiled steps (bert_tf.training.jax_engine.engine)."""
