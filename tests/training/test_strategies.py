"""Tests of strategy selection and of training under Mirrored and MultiWorkerMirrored
strategies against one device."""

import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import configs
from bert_tf.checkpoints import portable
from bert_tf.training.tf_engine import strategies
from bert_tf.training.trainer import Trainer

import trainer_helpers
import paths

_HERE = paths.TESTS_DIR


def _two_cpus():
  if len(tf.config.list_logical_devices("CPU")) < 2:
    pytest.skip("needs two logical CPU devices (tests/conftest.py)")


def test_one_device_strategy_runs_on_the_first_cpu():
  strategy = strategies.build_strategy(configs.RuntimeConfig())
  assert isinstance(strategy, tf.distribute.OneDeviceStrategy)
  assert strategy.extended.worker_devices[0].endswith("CPU:0")


def test_mirrored_strategy_uses_every_logical_cpu():
  _two_cpus()
  strategy = strategies.build_strategy(configs.RuntimeConfig(distribution_strategy="mirrored"))
  assert strategy.num_replicas_in_sync == len(tf.config.list_logical_devices("CPU"))


def test_a_second_mirrored_strategy_in_one_process_can_gather_after_the_first_reduced():
  _two_cpus()
  runtime = configs.RuntimeConfig(distribution_strategy="mirrored")
  first = strategies.build_strategy(runtime)

  @tf.function
  def reduce_once():
    return first.run(lambda: tf.distribute.get_replica_context().all_reduce(
        tf.distribute.ReduceOp.SUM, tf.constant(1.0)))

  assert float(first.experimental_local_results(reduce_once())[0]) == 2.0
  second = strategies.build_strategy(runtime)

  @tf.function
  def gather_mixed_dtypes():
    per_replica = second.run(lambda: {"ids": tf.constant([7]), "scores": tf.constant([0.5])})
    return {key: second.gather(value, axis=0) for key, value in per_replica.items()}

  gathered = gather_mixed_dtypes()
  np.testing.assert_array_equal(gathered["ids"], [7, 7])
  np.testing.assert_array_equal(gathered["scores"], [0.5, 0.5])


def test_multi_worker_strategy_without_tf_config_is_a_config_error(monkeypatch):
  monkeypatch.delenv("TF_CONFIG", raising=False)
  with pytest.raises(configs.ConfigError, match="TF_CONFIG"):
    strategies.build_strategy(configs.RuntimeConfig(
        distribution_strategy="multi_worker_mirrored"))


def _per_step_losses(tmp_path, name, strategy):
  experiment = trainer_helpers.tiny_experiment(
      strategy=strategy, steps=3, optimizer=dict(warmup_steps=0),
      trainer=dict(steps_per_loop=1, summary_interval=1, log_interval=3,
                   checkpoint_interval=3))
  trainer = Trainer(experiment, os.path.join(str(tmp_path), name), log_fn=lambda _: None)
  losses = [trainer.train(train_steps=s)["loss"] for s in (1, 2, 3)]
  return losses, trainer


@pytest.mark.slow
def test_mirrored_on_two_cpus_follows_the_one_device_loss_trajectory(tmp_path):
  _two_cpus()
  single, single_trainer = _per_step_losses(tmp_path, "one", "one_device")
  mirrored, mirrored_trainer = _per_step_losses(tmp_path, "mirrored", "mirrored")
  assert mirrored_trainer.engine.strategy.num_replicas_in_sync == 2
  np.testing.assert_allclose(mirrored, single, rtol=1e-5)
  assert single[2] != single[0]
  trainer_helpers.assert_weights_close(trainer_helpers.weights_of(single_trainer.model),
                                       trainer_helpers.weights_of(mirrored_trainer.model),
                                       atol=1e-5, rtol=1e-4)


def _free_ports(count):
  sockets = [socket.socket() for _ in range(count)]
  for s in sockets:
    s.bind(("127.0.0.1", 0))
  ports = [s.getsockname()[1] for s in sockets]
  for s in sockets:
    s.close()
  return ports


def _start_workers(tmp_path, ports, model_dir, steps, tag):
  """Two tests/multi_worker_main.py processes writing tmp_path/<tag><index>.npz."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  env.pop("TF_CONFIG", None)
  return [subprocess.Popen(
      [sys.executable, os.path.join(_HERE, "multi_worker_main.py"), str(i), ports, model_dir,
       str(tmp_path / f"{tag}{i}.npz")] + ([str(steps)] if steps else []),
      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
          for i in range(2)]


def _finish(procs, timeout=400):
  """Their outputs once they ended (killed after `timeout` seconds each)."""
  outputs = []
  try:
    for proc in procs:
      out, _ = proc.communicate(timeout=timeout)
      outputs.append(out)
  finally:
    for proc in procs:
      if proc.poll() is None:
        proc.kill()
  return outputs


@pytest.mark.slow
def test_sigterm_to_one_multi_worker_process_saves_one_agreed_step_and_the_rerun_trains_as_one(
    tmp_path):
  model_dir = str(tmp_path / "model")
  ports = ",".join(str(p) for p in _free_ports(2))
  procs = _start_workers(tmp_path, ports, model_dir, 100000, "first")
  seen = []
  deadline = time.time() + 300
  # The second worker (not the chief) gets the notice, once it has trained 3 steps.
  for line in procs[1].stdout:
    seen.append(line)
    if "step 3" in line or time.time() > deadline:
      break
  procs[1].send_signal(signal.SIGTERM)
  rest = _finish(procs, timeout=300)
  outputs = [rest[0], "".join(seen) + rest[1]]
  for proc, out in zip(procs, outputs):
    assert proc.returncode == 0, out[-3000:]
  received = [line for line in outputs[1].splitlines() if line.startswith("Received SIGTERM")]
  told = [line for line in outputs[0].splitlines()
          if line.startswith("Another process received SIGTERM")]
  assert received and told, outputs
  prefix = portable.checkpoints_in(model_dir)[0]
  step = portable.step_of(prefix)
  assert 3 <= step < 100000
  assert f"saved checkpoint {prefix} at step {step}" in received[0]
  assert f"saved checkpoint {prefix} at step {step}" in told[0]

  procs = _start_workers(tmp_path, ports, model_dir, step + 2, "rerun")
  outputs = _finish(procs)
  for proc, out in zip(procs, outputs):
    assert proc.returncode == 0, out[-3000:]
    assert f"Resumed from {prefix} at step {step}" in out
  assert portable.checkpoints_in(model_dir)[0].endswith(f"ckpt-{step + 2}.h5")
  results = [np.load(tmp_path / f"rerun{i}.npz") for i in range(2)]
  assert int(results[0]["replicas"]) == 2
  assert int(results[0]["step"]) == int(results[1]["step"]) == step + 2
  # The two processes trained as one: the same loss and every weight equal.
  assert np.isfinite(float(results[0]["loss"]))
  assert float(results[0]["loss"]) == float(results[1]["loss"])
  weight_keys = [k for k in results[0].files if k not in ("loss", "step", "replicas")]
  assert weight_keys
  for key in weight_keys:
    np.testing.assert_array_equal(results[0][key], results[1][key], err_msg=key)
