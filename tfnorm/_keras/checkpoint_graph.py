"""Reading a checkpoint's object graph, which TensorFlow exposes only as a
protocol buffer of its own (no public Python API in any version)."""

from __future__ import annotations

from tfnorm._keras.runtime import tf


def variables_under(prefix, key):
    """How many variables the checkpoint `prefix` holds below its object `key`
    (the objects reachable from the root's child named `key`)."""
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    reader = tf.train.load_checkpoint(prefix)
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    stack = [c.node_id for c in graph.nodes[0].children if c.local_name == key]
    seen = set()
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(child.node_id for child in graph.nodes[node].children)
    return sum(
        any(a.name == "VARIABLE_VALUE" for a in graph.nodes[node].attributes)
        for node in seen
    )
