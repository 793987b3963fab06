from __future__ import annotations

import pytest

import tfnorm
from tfnorm._keras import keras, keras_rms_normalization
from tfnorm.layers import is_norm_layer
from tfnorm.layers.factory import NormSpecError, norm_from_spec


@pytest.mark.parametrize(
    "name, cls",
    [
        ("layer", tfnorm.LayerNormalization),
        ("layernorm", tfnorm.LayerNormalization),
        ("rms", tfnorm.RMSNorm),
        ("RMSNorm", tfnorm.RMSNorm),
        ("scale", tfnorm.ScaleNorm),
    ],
)
def test_names_and_aliases(name, cls):
    assert type(tfnorm.get_norm(name)) is cls


def test_overrides_apply_and_none_epsilon_means_default():
    norm = tfnorm.get_norm("rms", epsilon=1e-5, name="attention_norm")
    assert norm.epsilon == 1e-5 and norm.name == "attention_norm"
    assert tfnorm.get_norm("layer", epsilon=None).epsilon == 1e-5


@pytest.mark.parametrize("spec", [tfnorm.RMSNorm(partial=0.5, epsilon=1e-4)])
def test_config_dict_round_trip(spec):
    norm = tfnorm.get_norm(keras.layers.serialize(spec), name="copy")
    assert type(norm) is tfnorm.RMSNorm
    assert norm.partial == 0.5 and norm.epsilon == 1e-4 and norm.name == "copy"


def test_keras_builtin_config_dict_gives_keras_layer():
    spec = keras.layers.serialize(keras.layers.LayerNormalization(epsilon=1e-6))
    norm = tfnorm.get_norm(spec)
    assert type(norm) is keras.layers.LayerNormalization
    assert norm.epsilon == 1e-6


def test_instance_is_a_template_not_shared():
    template = tfnorm.LayerNormalization(epsilon=1e-6, center=False)
    first, second = tfnorm.get_norm(template), tfnorm.get_norm(template)
    assert first is not template and second is not first
    assert first.epsilon == 1e-6 and first.center is False


def test_class_spec():
    assert type(tfnorm.get_norm(tfnorm.ScaleNorm, epsilon=1e-3)) is tfnorm.ScaleNorm


@pytest.mark.parametrize("spec", ["batch", "", 3, None, {"config": {}}, [1]])
def test_unknown_spec_lists_the_choices(spec):
    with pytest.raises(ValueError, match='"layer", "rms", "scale"'):
        tfnorm.get_norm(spec)


def test_is_norm_layer():
    assert is_norm_layer(tfnorm.RMSNorm())
    assert is_norm_layer(keras.layers.LayerNormalization())
    assert not is_norm_layer(keras.layers.Dense(3))


@pytest.mark.parametrize(
    "make_spec",
    [
        lambda: keras.layers.Dropout(0.1),
        lambda: keras.layers.Dropout,
        lambda: keras.layers.serialize(keras.layers.Dropout(0.1)),
        lambda: keras.layers.Dense,
    ],
    ids=["instance", "class", "config_dict", "dense_class"],
)
def test_a_layer_that_is_not_a_norm_is_rejected(make_spec):
    spec = make_spec()
    with pytest.raises(
        ValueError, match=r"`spec` must describe a normalisation layer.*Received: spec="
    ):
        tfnorm.get_norm(spec)


def test_the_rejection_names_the_callers_argument():
    with pytest.raises(ValueError, match=r"Dropout is not one\. Received: norm="):
        norm_from_spec(keras.layers.Dropout(0.1), "norm")
    with pytest.raises(
        ValueError, match=r"Unknown norm 'batch'.*Received: norm='batch'"
    ):
        norm_from_spec("batch", "norm")


def test_the_error_carries_the_argument_it_blames():
    # A caller reports the setting at fault from `argument`, not from the
    # message's words: a config dict's own epsilon is the spec's fault.
    cases = [
        (("rms", "norm"), {"epsilon": -1.0}, "epsilon"),
        (("batch", "norm"), {"epsilon": 1e-5}, "norm"),
        ((keras.layers.serialize(keras.layers.LayerNormalization(epsilon=-1.0)), "norm"), {}, "norm"),
        ((tfnorm.get_norm("rms"), "norm"), {"name": "n", "epsilon": -1.0}, "epsilon"),
    ]  # fmt: skip
    for args, overrides, blamed in cases:
        with pytest.raises(NormSpecError) as info:
            norm_from_spec(*args, **overrides)
        assert info.value.argument == blamed, (args, overrides)
        assert isinstance(info.value, ValueError)


def test_every_kind_of_norm_spec_is_still_accepted():
    class Custom(tfnorm.layers.BaseNormalization):
        pass

    for spec in (keras.layers.LayerNormalization, Custom, tfnorm.ScaleNorm()):
        assert is_norm_layer(tfnorm.get_norm(spec))
    rms = keras_rms_normalization()
    if rms is not None:
        assert type(tfnorm.get_norm(keras.layers.serialize(rms()))) is rms


@pytest.mark.parametrize("epsilon", [-1, 0, 0.0, float("nan"), "1e-3", True])
def test_keras_builtin_config_dict_with_a_bad_epsilon_is_refused(epsilon):
    # Keras's own layer takes any epsilon; -1 or 0 gives NaN/inf outputs.
    spec = keras.layers.serialize(keras.layers.LayerNormalization())
    spec["config"]["epsilon"] = epsilon
    with pytest.raises(ValueError, match=r"`epsilon` .*spec\.config\.epsilon="):
        tfnorm.get_norm(spec)


def test_keras_builtin_config_dict_with_a_string_center_is_refused():
    spec = keras.layers.serialize(keras.layers.LayerNormalization())
    spec["config"]["center"] = "false"
    with pytest.raises(ValueError, match=r"spec\.config\.center='false'"):
        tfnorm.get_norm(spec)


def test_a_tfnorm_config_dict_with_a_string_center_is_refused():
    spec = keras.layers.serialize(tfnorm.LayerNormalization())
    spec["config"]["center"] = "false"
    with pytest.raises(ValueError, match=r"center='false'"):
        tfnorm.get_norm(spec)
