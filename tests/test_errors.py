"""`tfnorm._errors.one_line`: the one line every message quotes of an error."""

from __future__ import annotations

from tfnorm._errors import KeyedMessage, named_settings, one_line, setting_key
from tfnorm._keras import tf


def test_one_line_finds_the_reason_of_a_graph_execution_error():
    message = (
        "Graph execution error:\n\nDetected at node 'w' defined at (most recent "
        'call last):\n  File "x.py", line 1, in f\n    g()\n'
        "/logs/norms/events.out.tfevents.1; No space left on device\n"
        "\tFailed to flush 11 events\n [Op:__inference__write_2026]"
    )
    error = tf.errors.ResourceExhaustedError(None, None, message)
    assert one_line(error) == (
        "ResourceExhaustedError: /logs/norms/events.out.tfevents.1; "
        "No space left on device"
    )


def test_a_traced_error_is_reduced_to_the_error_it_quotes():
    message = (
        'in user code:\n\n    File "m.py", line 3, in call\n        x + y\n\n'
        "    ValueError: Dimensions must be equal, but are 4 and 5\n"
        "\nArguments received by Dense.call():\n  \u2022 inputs=tf.Tensor(shape=(2, 4))"
    )
    assert one_line(ValueError(message), with_type=False) == (
        "Dimensions must be equal, but are 4 and 5"
    )


def test_keras_bold_markup_is_dropped_and_a_long_reason_is_cut():
    error = ValueError("\x1b[1m" + "x" * 50 + "\x1b[0m")
    assert one_line(error, limit=20) == "ValueError: xxxxx..."
    assert one_line(ValueError("a\n  b")) == "ValueError: a"
    assert one_line(ValueError("")) == "ValueError"


class _KeyedError(KeyedMessage, ValueError):
    pass


def test_a_marked_setting_reads_as_its_key_unless_the_reporter_renames_it():
    error = _KeyedError(
        f"use another {setting_key('checkpoint_dir')}, or give "
        f"{setting_key('num_classes', 3)}. Received: path='a{{b}}'"
    )
    assert str(error) == (
        "use another checkpoint_dir, or give num_classes=3. Received: path='a{b}'"
    )
    renamed = error.text(lambda key, value: f"<{key}|{value}>")
    assert renamed == (
        "use another <checkpoint_dir|None>, or give <num_classes|3>. "
        "Received: path='a{b}'"
    )
    assert one_line(error) == f"_KeyedError: {error}"
    assert named_settings(f"x {setting_key('seed')}") == "x seed"
