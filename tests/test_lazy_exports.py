import types

import pytest

from tfnorm._lazy_exports import lazy_exports


def _package(exports):
    package = types.ModuleType("example_package")
    namespace = vars(package)
    namespace["__getattr__"], namespace["__dir__"] = lazy_exports(namespace, exports)
    return package


def test_a_name_is_imported_on_first_use_and_kept():
    package = _package({"OrderedDict": "collections"})
    assert "OrderedDict" not in vars(package)
    assert "OrderedDict" in dir(package)
    import collections

    assert package.OrderedDict is collections.OrderedDict
    assert vars(package)["OrderedDict"] is collections.OrderedDict


def test_an_unknown_name_is_an_attribute_error_naming_the_package():
    package = _package({"OrderedDict": "collections"})
    with pytest.raises(AttributeError, match="'example_package' has no attribute 'x'"):
        _ = package.x


def test_training_and_inference_export_their_names_lazily():
    import tfnorm.inference
    import tfnorm.training
    from tfnorm.inference.text_generation import TextGenerator
    from tfnorm.training.config.train_config import TrainConfig

    assert tfnorm.training.TrainConfig is TrainConfig
    assert tfnorm.inference.TextGenerator is TextGenerator
    assert {"Predictor", "predict"} <= set(dir(tfnorm.training))
