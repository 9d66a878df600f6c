"""The one check that a batch splits over replicas, processes and micro-batches."""

import pytest

from bert_tf import configs
from bert_tf.training import experiments


def test_batch_sizes_that_do_not_split_are_one_config_error_naming_the_setting():
  assert configs.check_batch_sizes(32, 2, 4) == 4
  with pytest.raises(configs.ConfigError, match=r"train_data.global_batch_size \(30\) must "
                     r"be divisible by the number of replicas \(4\)"):
    configs.check_batch_sizes(30, 4)
  with pytest.raises(configs.ConfigError, match=r"The batch of each of the replicas \(6 = "
                     r"train_data.global_batch_size 12 / 2 replicas\) must be divisible by "
                     r"trainer.gradient_accumulation_steps \(4\)"):
    configs.check_batch_sizes(12, 2, 4)
  with pytest.raises(configs.ConfigError, match=r"eval_data.global_batch_size \(9\) must be "
                     r"divisible by the number of processes \(2\)"):
    configs.check_batch_sizes(9, 2, share_name="processes",
                              batch_name="eval_data.global_batch_size")
  with pytest.raises(configs.ConfigError, match="gradient_accumulation_steps"):
    experiments.experiment_from_dict({
        "task": {"name": "pretraining"}, "train_data": {"global_batch_size": 6},
        "trainer": {"gradient_accumulation_steps": 4}})
