"""The settings bench/gpu_pretraining.py A/Bs in one run (--variant): each variant is a
name and settings, NAME=SETTING[;SETTING...], each SETTING one of

  section.key=value    a bert_tf config override, handed to the worker (--override)
  env:NAME=VALUE       an environment variable of the variant's worker processes
  xla:--flag=value     appended to the variant's XLA_FLAGS

so that a lever added to the model (a runtime field, an environment variable, an XLA
flag) is measured without changing the benchmark.
"""

import re
from typing import Dict, List, NamedTuple, Sequence, Tuple


class Variant(NamedTuple):
  """A --variant: its name ("" for the base configuration), the worker's config
  overrides, the environment variables it sets, the XLA flags it appends, and its
  text as given."""

  name: str = ""
  overrides: Tuple[str, ...] = ()
  env: Dict[str, str] = {}
  xla_flags: Tuple[str, ...] = ()
  spec: str = ""

  def runtime_overrides(self) -> List[str]:
    """The overrides of the runtime section, which only bert_tf's step has."""
    return [o for o in self.overrides if o.split("=", 1)[0].strip().startswith("runtime.")]

  def environment(self, base: Dict[str, str]) -> Dict[str, str]:
    """`base` (an environment) with this variant's variables and XLA flags."""
    env = dict(base, **self.env)
    if self.xla_flags:
      env["XLA_FLAGS"] = " ".join([env.get("XLA_FLAGS", ""), *self.xla_flags]).strip()
    return env


def parse_variant(spec: str) -> Variant:
  """'fp8=runtime.float8_training=true;xla:--flag=1' -> its Variant.

  Raises:
    ValueError: no NAME=, a name other than letters, digits, '_', '-' and '.' (it
      names log files), or a setting that is none of the three kinds.
  """
  name, separator, settings = spec.partition("=")
  if not separator or not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or name == "base":
    raise ValueError(f"--variant '{spec}': expected NAME=SETTING[;SETTING...], "
                     "NAME of letters, digits, '_', '-', '.' (not 'base')")
  overrides, env, xla_flags = [], {}, []
  for setting in (s.strip() for s in settings.split(";")):
    if setting.startswith("env:") and "=" in setting:
      key, _, value = setting[len("env:"):].partition("=")
      env[key] = value
    elif setting.startswith("xla:"):
      xla_flags.append(setting[len("xla:"):])
    elif "=" in setting:
      overrides.append(setting)
    elif setting:
      raise ValueError(f"--variant '{spec}': '{setting}' is no key.sub=value, "
                       "env:NAME=VALUE or xla:--flag")
  return Variant(name, tuple(overrides), env, tuple(xla_flags), spec)


def parse(specs: Sequence[str]) -> List[Variant]:
  """The Variants of --variant's values, their config overrides checked against
  bert_tf's schema, so that a typo fails before any device time is spent.

  Raises:
    ValueError: a malformed spec, a name given twice, or an override that is no
      config field (naming the spec).
  """
  from bert_tf import configs  # pylint: disable=g-import-not-at-top
  parsed = [parse_variant(spec) for spec in specs]
  names = [v.name for v in parsed]
  if len(set(names)) != len(names):
    raise ValueError(f"--variant: names repeat: {names}")
  for variant in parsed:
    try:
      configs.ExperimentConfig().override(list(variant.overrides))
    except configs.ConfigError as e:
      raise ValueError(f"--variant '{variant.spec}': {e}") from None
  return parsed
