"""Registering tfnorm's classes, configs both Keras generations read, saving models."""

from __future__ import annotations

from tfnorm._keras.runtime import (
    FLAVOUR,
    IS_KERAS_3,
    KERAS_VERSION,
    NATIVE_FORMAT,
    SAVE_FORMATS,
    keras,
)

_SUFFIX = {"keras": ".keras", "h5": ".h5", "tf": ""}


def register_serializable(cls):
    """Registers `cls` for deserialisation as `tfnorm>ClassName`."""
    return keras.utils.register_keras_serializable(package="tfnorm")(cls)


def register_model_class(cls):
    """Registers a functional `keras.Model` subclass for deserialisation.

    As `register_serializable`, and in Keras 2 under the bare class name as
    well: Keras 2 (tf_keras and 2.9) records a whole model's class by its
    bare name in `.keras`, H5 and SavedModel files, so without it a saved
    model would come back as unknown.
    """
    cls = register_serializable(cls)
    if not IS_KERAS_3:
        keras.utils.get_custom_objects()[cls.__name__] = cls
    return cls


def portable_layer_config(config):
    """A layer config with its dtype policy readable by this Keras.

    Keras 3 writes the policy as `{"class_name": "DTypePolicy", "config":
    {"name": ...}, ...}` and Keras 2 mixed policies as `{"class_name":
    "Policy", ...}`; neither generation reads the other's dict, but both read
    the policy name.
    """
    dtype = config.get("dtype")
    if not isinstance(dtype, dict):
        return config
    native = str(dtype.get("class_name", "")).endswith("DTypePolicy")
    if native == IS_KERAS_3:
        return config
    name = (dtype.get("config") or {}).get("name")
    return dict(config, dtype=name) if isinstance(name, str) else config


def serialized_class_name(config):
    """The name a layer dict from `keras.layers.serialize` is registered under.

    Keras 3 writes the registered name (`tfnorm>RMSNorm`) as
    `registered_name` and the bare class name as `class_name`; Keras 2 has
    only `class_name`, which holds the registered name.
    """
    return str(config.get("registered_name") or config["class_name"])


def single_input_build_config(config):
    """`get_build_config()` of a layer whose `build` needs only its first input.

    Keras 3 records the shape of every tensor argument (`shapes_dict`) when
    a layer is called with masks as well, then rebuilds it from those as
    keyword arguments; this keeps only the first input's shape.
    """
    if config and "shapes_dict" in config:
        return {"input_shape": next(iter(config["shapes_dict"].values()))}
    return config


def model_path(path_without_suffix, save_format):
    """The file or directory name `save_model` writes for `save_format`."""
    return str(path_without_suffix) + _SUFFIX[save_format]


def save_model(model, path_without_suffix, save_format=None):
    """Saves `model` in `save_format`, by default this runtime's native one.

    Public as `tfnorm.models.save_model`. The native format is the `.keras`
    archive with Keras 3 and tf_keras, and a SavedModel directory with Keras
    2.9 (which has no `.keras` format); `tfnorm._keras.SAVE_FORMATS` lists
    what this runtime can write. `keras.models.load_model(path)` reloads the
    model after `import tfnorm`.

    Args:
        model: the Keras model to save.
        path_without_suffix: the path to write, without `.keras` / `.h5`.
        save_format: `"keras"`, `"h5"`, `"tf"` or None (native). Defaults
            to `None`.

    Returns:
        The path written: a `.keras` archive, an `.h5` file, or a SavedModel
        directory for `"tf"`.
    """
    save_format = save_format or NATIVE_FORMAT
    if save_format not in SAVE_FORMATS:
        raise ValueError(
            f"This runtime ({FLAVOUR} {KERAS_VERSION}) saves models as one of "
            f"{SAVE_FORMATS}. Received: save_format={save_format!r}"
        )
    path = model_path(path_without_suffix, save_format)
    if save_format == "tf":
        model.save(path, save_format="tf")
    else:
        model.save(path)
    return path
