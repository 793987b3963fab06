"""The route a formula call takes (`tfnorm.layers._ops.routes`).

The test machines have no GPU. The per-call choice between the GPU and CPU
routes is tested with device names alone (a graph tensor made under
`tf.device("/GPU:0")` records the name without the device existing) and a
patched `routes.gpus_visible`; the GPU route itself ("reduce") is only run
on the CPU here, forced by the formula tests, never on a GPU.
"""

from __future__ import annotations

import contextlib

import pytest

from tfnorm._keras import in_xla_context, tf
from tfnorm.layers import _ops
from tfnorm.layers._ops import routes

EAGER_CPU = "/job:localhost/replica:0/task:0/device:CPU:0"


@pytest.fixture
def gpus(monkeypatch):
    """`gpus(True)`: from then on, the process sees a GPU."""

    def see(visible):
        monkeypatch.setattr(routes, "gpus_visible", lambda: visible)

    return see


def test_routes_picked_on_cpu(gpus):
    gpus(False)
    with tf.device("/CPU:0"):
        assert routes.route(tf.zeros([2, 3]), [1], 2) == "fused"
        assert routes.route(tf.zeros([2, 3], tf.float64), [1], 2) == "matvec"
        assert routes.route(tf.zeros([2, 3, 4]), [1], 3) == "reduce"
    seen = []

    def under_xla():
        seen.append(routes.route(tf.zeros([2, 3]), [1], 2))
        return tf.constant(0)

    tf.function(under_xla, jit_compile=True)()
    # Under XLA too: matvecs would not fuse with the ops making their input.
    assert seen == ["fused"]


@pytest.mark.parametrize("visible", [False, True])
@pytest.mark.parametrize(
    "device, on_gpu",
    [
        (EAGER_CPU, False),
        ("/device:CPU:1", False),
        ("/cpu:0", False),
        ("/job:localhost/replica:0/task:0/device:GPU:0", True),
        ("/device:GPU:1", True),
        ("/gpu:0", True),
        ("/device:XLA_GPU:0", True),
        ("/device:TPU:0", False),
    ],
)
def test_a_named_device_decides_whatever_the_process_sees(
    gpus, device, on_gpu, visible
):
    gpus(visible)
    assert routes.is_gpu_placement(device) is on_gpu


@pytest.mark.parametrize("device", ["", "/job:worker/task:1"])
@pytest.mark.parametrize("visible", [False, True])
def test_no_device_type_follows_whether_the_process_sees_a_gpu(gpus, device, visible):
    gpus(visible)
    assert routes.is_gpu_placement(device) is visible


def test_gpus_visible_asks_tensorflow():
    assert routes.gpus_visible() is bool(tf.config.list_logical_devices("GPU"))


def test_an_eager_cpu_input_takes_the_cpu_routes_where_a_gpu_is_seen(gpus):
    gpus(True)
    with tf.device("/CPU:0"):
        x = tf.zeros([2, 3])
    assert x.device == EAGER_CPU
    assert routes.route(x, [1], 2) == "fused"
    assert routes.route(tf.cast(x, tf.float64), [1], 2) == "matvec"


def _traced(device):
    """The route, and the op types of a LayerNorm traced (not run) on an
    input made under `tf.device(device)`, or outside any device scope."""
    seen = []

    def fn(x):
        with tf.device(device) if device else contextlib.nullcontext():
            x = tf.identity(x)
        seen.append(routes.route(x, [1], 2))
        return _ops.layer_norm(x, tf.ones([1, 8]), tf.zeros([1, 8]), [1], 1e-5)

    graph = (
        tf.function(fn).get_concrete_function(tf.TensorSpec([4, 8], tf.float32)).graph
    )
    return seen[0], {op.type for op in graph.get_operations()}


@pytest.mark.parametrize(
    "device, visible, expected",
    [
        ("/GPU:0", False, "reduce"),
        ("/GPU:0", True, "reduce"),
        ("/CPU:0", True, "fused"),
        ("/CPU:0", False, "fused"),
        (None, True, "reduce"),
        (None, False, "fused"),
    ],
)
def test_a_graph_input_takes_the_route_of_its_device_scope(
    gpus, device, visible, expected
):
    gpus(visible)
    chosen, op_types = _traced(device)
    assert chosen == expected
    # Only the fused route takes mean squares from EuclideanNorm.
    assert ("EuclideanNorm" in op_types) is (expected == "fused")


def test_the_route_is_decided_per_call(gpus):
    gpus(True)
    assert [_traced(d)[0] for d in ("/CPU:0", "/GPU:0", "/CPU:0", None)] == [
        "fused",
        "reduce",
        "fused",
        "reduce",
    ]


def test_in_xla_context_tells_jit_compile_apart():
    seen = {}

    def probe(key):
        def fn():
            seen[key] = in_xla_context()
            return tf.constant(0)

        return fn

    probe("eager")()
    tf.function(probe("graph"))()
    tf.function(probe("xla"), jit_compile=True)()
    assert seen == {"eager": False, "graph": False, "xla": True}
