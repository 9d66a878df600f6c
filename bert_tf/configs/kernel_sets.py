"""The kernel sets by name: each speed path of bert_tf.kernels declared once, with the
Keras backend and the platforms it serves, its settings class and how it is built; and
the runtime.kernels section built from them (KernelsConfig).

Several sets may serve one (backend, platform); at most one is that pair's default. An
experiment names its set in `runtime.kernels.set`, or takes the default of the backend
and platform its model runs on (bert_tf.kernels.for_runtime). A set's settings are the
section of runtime.kernels named after it: KernelsConfig reads that section with the
settings classes registered here, so a new set's settings need no edit of the schema.

The package's sets register when bert_tf.kernels is imported; the task registry imports
it, so every experiment read through bert_tf.training.experiments knows them. This
module imports no framework and no other config module but the framework's base.
"""

import dataclasses
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from bert_tf.configs.base import Config, ConfigError, field_path, nearest_name

# The platforms a model runs on (bert_tf.kernels.platform_of).
PLATFORMS = ("cpu", "gpu", "tpu")
# The key of runtime.kernels that names the set; no set takes it as its name.
CHOICE_KEY = "set"


@dataclasses.dataclass(frozen=True)
class KernelSet:
  """A speed path for one Keras backend on some platforms.

  Attributes:
    name: the set's name: what runtime.kernels.set names, and the section of
      runtime.kernels holding its settings.
    backend: the Keras backend it computes on ("tensorflow", "jax", ...).
    platforms: where it can run: some of PLATFORMS.
    build: the experiment's runtime section (configs.RuntimeConfig) -> the Kernels
      object (bert_tf.kernels.protocol.Kernels) the model is built with; it imports
      its framework when called, not when registered.
    settings: its settings, a configs.Config subclass whose defaults are the set's
      defaults (None: it takes none); `build` reads `runtime.kernels.settings(name)`.
    default_platforms: the platforms where an experiment that names no set takes this
      one (of `platforms`; None: all of them).
  """

  name: str
  backend: str
  platforms: Tuple[str, ...]
  build: Callable[[Any], object]
  settings: Optional[type] = None
  default_platforms: Optional[Tuple[str, ...]] = None

  def __post_init__(self):
    object.__setattr__(self, "platforms", tuple(self.platforms))
    defaults = self.platforms if self.default_platforms is None else self.default_platforms
    object.__setattr__(self, "default_platforms", tuple(defaults))
    unknown = set(self.platforms) - set(PLATFORMS)
    if unknown or not self.platforms:
      raise ValueError(f"Kernel set '{self.name}': platforms must be some of "
                       f"{', '.join(PLATFORMS)}, got {self.platforms}")
    if not set(self.default_platforms) <= set(self.platforms):
      raise ValueError(f"Kernel set '{self.name}': default_platforms "
                       f"{self.default_platforms} are not among its platforms")

  def serves(self, backend: str, platform: str) -> bool:
    """Whether it can run a model on `backend` and `platform`."""
    return backend == self.backend and platform in self.platforms

  def where(self) -> str:
    """Where it runs, for messages: "jax on gpu"."""
    return f"{self.backend} on {', '.join(self.platforms)}"


_SETS: Dict[str, KernelSet] = {}


def register(kernel_set: KernelSet) -> KernelSet:
  """Registers `kernel_set` under its name; returns it.

  Raises:
    ValueError: the name is taken by another set, or is runtime.kernels' own key; or
      another set is already the default where this one would be.
  """
  name = kernel_set.name
  if name == CHOICE_KEY or not name.isidentifier():
    raise ValueError(f"Kernel set name '{name}': a set is named by an identifier other "
                     f"than '{CHOICE_KEY}'")
  if _SETS.get(name, kernel_set) is not kernel_set:
    raise ValueError(f"Kernel set '{name}' is registered twice")
  for platform in kernel_set.default_platforms:
    other = default_for(kernel_set.backend, platform)
    if other is not None and other is not kernel_set:
      raise ValueError(f"Kernel set '{name}': '{other.name}' is already the default of "
                       f"{kernel_set.backend} on {platform}; register it with "
                       "default_platforms=() and choose it by name (runtime.kernels.set)")
  _SETS[name] = kernel_set
  return kernel_set


def unregister(name: str) -> Optional[KernelSet]:
  """Removes the set named `name`; returns it, or None where there was none."""
  return _SETS.pop(name, None)


def registered(name: str) -> Optional[KernelSet]:
  """The set named `name`, or None."""
  return _SETS.get(name)


def names() -> Tuple[str, ...]:
  """The registered sets' names, in the order they were registered."""
  return tuple(_SETS)


def of_backend(backend: str) -> Tuple[KernelSet, ...]:
  """The sets that compute on `backend`, in registration order."""
  return tuple(s for s in _SETS.values() if s.backend == backend)


def serving(backend: str, platform: str) -> Tuple[KernelSet, ...]:
  """The sets that can run a model on `backend` and `platform`, in registration order."""
  return tuple(s for s in _SETS.values() if s.serves(backend, platform))


def default_for(backend: str, platform: str) -> Optional[KernelSet]:
  """The set an experiment naming none takes on `backend` and `platform`, or None."""
  return next((s for s in _SETS.values()
               if s.backend == backend and platform in s.default_platforms), None)


def settings_classes() -> Dict[str, type]:
  """{set name: its settings class} of every registered set that takes settings."""
  return {name: s.settings for name, s in _SETS.items() if s.settings is not None}


def describe() -> str:
  """The registered sets and where they run, for messages."""
  return "; ".join(f"{s.name} ({s.where()})" for s in _SETS.values()) or "none"


@dataclasses.dataclass(eq=False)
class KernelsConfig(Config):
  """runtime.kernels: the kernel set chosen by name, and beside it a section of settings
  per registered set that takes any (runtime.kernels.jax_gpu.attention, ...), read with
  the set's settings class. A section left out holds the set's defaults.

  As YAML: {set: NAME or "", SET_NAME: {setting: value, ...}, ...}, every registered
  set's section written out.
  """

  # The kernel set by name; "" takes the default set of the backend and platform the
  # model runs on (bert_tf.kernels.for_runtime).
  set: str = ""
  # {set name: its settings}, the sections given; read and written beside `set`.
  sections: Dict[str, Config] = dataclasses.field(default_factory=dict)

  def validate(self):
    if self.set and registered(self.set) is None:
      nearest = nearest_name(self.set, names())
      hint = f"; did you mean '{nearest}'?" if nearest else ""
      raise ConfigError(f"{CHOICE_KEY}: no kernel set '{self.set}'{hint} Kernel sets: "
                        f"{describe()}{_HOW_SETS_REGISTER if not _SETS else ''}")

  @classmethod
  def from_dict(cls, data: Optional[Mapping[str, Any]], path: str = ""):
    """Reads the section: `set`, and each registered set's settings by its class.

    Raises:
      ConfigError: a key that is neither `set` nor a registered set's name (naming the
        nearest), or a bad value (naming the field).
    """
    data = dict(data or {})
    classes = settings_classes()
    chosen = data.pop(CHOICE_KEY, "")
    if not isinstance(chosen, str):
      raise ConfigError(f"{field_path(path, CHOICE_KEY)} must be a string, got {chosen!r}")
    sections = {}
    for key, value in data.items():
      if key not in classes:
        valid = [CHOICE_KEY, *classes]
        nearest = nearest_name(key, valid)
        hint = f"; did you mean '{field_path(path, nearest)}'?" if nearest else ""
        raise ConfigError(f"Unknown config key '{field_path(path, key)}'{hint} Valid keys "
                          f"here: {', '.join(sorted(valid))} (the sets with settings)."
                          f"{_HOW_SETS_REGISTER if not _SETS else ''}")
      if not isinstance(value, (Mapping, classes[key])):
        raise ConfigError(f"{field_path(path, key)} must be a mapping of "
                          f"{classes[key].__name__} fields, got {value!r}")
      sections[key] = (value if isinstance(value, classes[key]) else
                       classes[key].from_dict(value, field_path(path, key)))
    try:
      return cls(set=chosen, sections=sections)
    except ConfigError as e:
      raise ConfigError(f"{path}.{e}" if path else str(e)) from None

  def settings(self, name: str) -> Config:
    """The settings of the set `name`: its section, or its settings class's defaults.

    Raises:
      AttributeError: no registered set of that name takes settings.
    """
    if name in self.sections:
      return self.sections[name]
    classes = settings_classes()
    if name not in classes:
      raise AttributeError(f"runtime.kernels has no section '{name}': no registered "
                           f"kernel set of that name takes settings ({describe()})")
    return classes[name]()

  def __getattr__(self, name: str):
    # runtime.kernels.jax_gpu: a set's section, as if it were a field.
    if name.startswith("_") or name in ("set", "sections"):
      raise AttributeError(name)
    return self.settings(name)

  def as_dict(self) -> Dict[str, Any]:
    out: Dict[str, Any] = {CHOICE_KEY: self.set}
    for name in [*settings_classes(), *self.sections]:
      if name not in out:
        out[name] = self.settings(name).as_dict()
    return out

  def __eq__(self, other):
    return type(other) is type(self) and other.as_dict() == self.as_dict()


_HOW_SETS_REGISTER = (" No kernel set is registered: read experiments with "
                      "bert_tf.training.experiments, or import bert_tf.kernels first.")
