"""Training: one trainer over two engines.

Shared by both engines (this folder): the Trainer and its run (trainer, params_file,
host_loop, reports, evaluation, summaries), the checks before a run writes anything
(run_checks), the checkpoint format (checkpointing), the optimizer and loss-scale maths
and the schedule (update_rule, loss_scale_rule, schedules), the engine interface and
what both engines' steps share (engine, steps), experiments and the choice of backend
and its engine (experiments, backends). Each engine's own: tf_engine/ (TensorFlow) and
jax_engine/ (JAX; imports no TensorFlow).
"""
