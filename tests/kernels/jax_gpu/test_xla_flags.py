"""The JAX engine's XLA defaults (bert_tf.kernels.jax_gpu.xla_flags): set in XLA_FLAGS where the
JAX backend is selected (bert_tf.training.backends.select), before JAX starts, and never
in place of a user's own entry for the same flag."""

import json
import os
import subprocess
import sys

import pytest

import paths
from bert_tf.kernels.jax_gpu import xla_flags

_OFF = "--xla_gpu_enable_command_buffer="


def test_the_defaults_turn_command_buffers_off():
  assert xla_flags.with_defaults("") == _OFF


@pytest.mark.parametrize("user", [
    "--xla_gpu_enable_command_buffer=FUSION,CUBLAS",
    "--xla_dump_to=/tmp/x --xla_gpu_enable_command_buffer=+FUSION",
    "-xla_gpu_enable_command_buffer=",
])
def test_a_users_own_entry_for_the_flag_is_kept(user):
  assert xla_flags.with_defaults(user) == user


def test_other_user_flags_are_kept_and_the_default_added():
  user = "--xla_gpu_enable_command_buffer_x=1  --xla_dump_to=/tmp/a "
  assert xla_flags.with_defaults(user) == user.strip() + " " + _OFF


def _select_in_a_new_process(backend, **environ):
  """XLA_FLAGS after backends.select(backend) in a fresh process, and whether JAX had
  started a backend by then (it must not have: XLA reads the flags when it does)."""
  code = ("import json, os, sys\n"
          "from bert_tf.training import backends\n"
          f"backends.select({backend!r})\n"
          "print(json.dumps([os.environ.get('XLA_FLAGS'), 'jax' in sys.modules]))\n")
  env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "KERAS_BACKEND")}
  env.update(environ, PYTHONPATH=paths.ROOT)
  result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


def test_selecting_jax_sets_the_defaults_before_jax_loads():
  assert _select_in_a_new_process("jax") == [_OFF, False]
  assert _select_in_a_new_process("", KERAS_BACKEND="jax") == [_OFF, False]


def test_selecting_jax_keeps_the_users_entry():
  user = "--xla_gpu_enable_command_buffer=FUSION"
  assert _select_in_a_new_process("jax", XLA_FLAGS=user) == [user, False]


def test_selecting_tensorflow_leaves_xla_flags_alone():
  assert _select_in_a_new_process("tensorflow") == [None, False]
