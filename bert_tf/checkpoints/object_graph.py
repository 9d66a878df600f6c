"""Reading a TensorFlow object-based checkpoint into models on another Keras backend.

tf.train.Checkpoint restores only TensorFlow trackables, which Keras layers are on the
TensorFlow backend alone. A checkpoint's object graph names each object by the
attribute, list index or dict key that leads to it from its parent
(`encoder/_operations/8/attention/query/_kernel`); the layer classes are the same
on every backend, so the same walk through a JAX (or torch) model reaches the same
variables. Containers that TensorFlow saw through `checkpoint_structure()` (LoRA's
adapters, bert_tf.checkpoints.trackables) are walked through it here too.
"""

from typing import Dict, Mapping

import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from bert_tf.checkpoints import snapshots

_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
_VALUE = "VARIABLE_VALUE"


def _child(obj, name: str):
  """The object that `name` in a checkpoint's object graph names under `obj`, or None."""
  structure = getattr(obj, "checkpoint_structure", None)
  if callable(structure):
    obj = structure()
  if isinstance(obj, Mapping):
    return obj.get(name)
  if isinstance(obj, (list, tuple)):
    return obj[int(name)] if name.isdigit() and int(name) < len(obj) else None
  return getattr(obj, name, None)


def assign_items(prefix: str, items: Mapping[str, object]) -> Dict[str, int]:
  """Assigns the checkpoint's values to every variable of each item it reaches.

  Args:
    prefix: a TensorFlow checkpoint whose root children include the items' names.
    items: {root child name: model object (a Keras layer or model)}.

  Returns:
    {item name: number of variables assigned}.

  Raises:
    ValueError: a value of another shape than its variable's, or a variable of an item
      (dropout seed states aside) that the checkpoint does not reach, naming the
      checkpoint.
  """
  reader = tf.train.load_checkpoint(prefix)
  graph = trackable_object_graph_pb2.TrackableObjectGraph()
  graph.ParseFromString(reader.get_tensor(_GRAPH_KEY))
  roots = {child.local_name: child.node_id for child in graph.nodes[0].children}
  counts = {}
  for name, item in items.items():
    assigned, seen, stack = set(), set(), [(roots[name], item, name)]
    while stack:
      node_id, obj, where = stack.pop()
      if (node_id, id(obj)) in seen:
        continue
      seen.add((node_id, id(obj)))
      node = graph.nodes[node_id]
      for attribute in node.attributes:
        if attribute.name == _VALUE and hasattr(obj, "assign"):
          value = reader.get_tensor(attribute.checkpoint_key)
          if tuple(obj.shape) != tuple(value.shape):
            raise ValueError(f"Checkpoint {prefix}: {where} has shape {tuple(value.shape)}, "
                             f"the model's variable {tuple(obj.shape)}")
          obj.assign(value)
          assigned.add(id(obj))
      for child in node.children:
        target = _child(obj, child.local_name)
        if target is not None:
          stack.append((child.node_id, target, f"{where}/{child.local_name}"))
    missing = [path for path, variable in snapshots.item_variables(item).items()
               if id(variable) not in assigned]
    if missing:
      raise ValueError(f"Checkpoint {prefix} does not cover every variable of '{name}': "
                       f"it lacks {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")
    counts[name] = len(assigned)
  return counts
