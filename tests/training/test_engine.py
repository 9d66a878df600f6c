"""The engine's placement (bert_tf.training.engine.Placement): which process is the chief."""

from bert_tf.training import engine as engine_lib


def test_the_chief_is_process_zero():
  assert engine_lib.Placement(num_replicas=2, description="", process_index=0,
                              process_count=2).is_chief
  assert not engine_lib.Placement(num_replicas=2, description="", process_index=1,
                                  process_count=2).is_chief
