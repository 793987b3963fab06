"""The claims' second-round settings of `tfnorm compare`,
`tfnorm.experiments.claim_settings`: declared, read and refused like the others."""

from __future__ import annotations

import pytest

from tfnorm import _keras
from tfnorm.cli.main import main
from tfnorm.experiments.compare_settings import CompareConfig
from tfnorm.settings.config_error import ConfigError

PADDED_BATCH_NORM = {"norm": "batch", "variable_length": True}


def test_the_new_settings_default_to_the_plain_experiment():
    config = CompareConfig().resolve()
    assert config.gradient_variance_batches is None
    assert config.gradient_variance_loss is None
    assert config.embedding_std is None and config.position_offset is None
    assert config.deep_epsilon is None
    assert config.batchnorm_padding is None and config.batchnorm_momentum is None
    assert config.clipnorm is None and config.clip_groups == "global"


def test_the_settings_read_flag_strings_and_python_values_alike():
    config = CompareConfig.from_dict(
        {
            "gradient_variance_batches": "8",
            "gradient_variance_loss": "0.5",
            "embedding_std": "1e-4",
            "position_offset": 0,
            "epsilon": 1e-7,
            "deep_epsilon": "1e-5",
            "num_layers": 4,
        }
    ).resolve()
    assert (config.gradient_variance_batches, config.gradient_variance_loss) == (8, 0.5)
    assert (config.embedding_std, config.position_offset) == (1e-4, 0.0)
    assert (config.epsilon, config.deep_epsilon) == (1e-7, 1e-5)
    # 0 batches is "not measured".
    assert (
        CompareConfig(gradient_variance_batches=0).resolve().gradient_variance_batches
        is None
    )


def test_the_batch_norms_padding_is_said_for_the_runtime():
    # Keras 3 and tf_keras leave the padding out of BatchNorm's statistics;
    # Keras 2.9's layer takes no mask, so there it counts.
    expected = "masked" if _keras.BATCH_NORM_TAKES_MASK else "counted"
    assert CompareConfig(**PADDED_BATCH_NORM).resolve().batchnorm_padding == expected
    counted = CompareConfig(batchnorm_padding="counted", **PADDED_BATCH_NORM).resolve()
    assert counted.batchnorm_padding == "counted"
    momentum = CompareConfig(norm="batch", batchnorm_momentum=0.9).resolve()
    assert momentum.batchnorm_momentum == 0.9


def test_masked_padding_is_refused_where_keras_cannot_mask():
    config = CompareConfig(batchnorm_padding="masked", **PADDED_BATCH_NORM)
    if _keras.BATCH_NORM_TAKES_MASK:
        assert config.resolve().batchnorm_padding == "masked"
        return
    with pytest.raises(ConfigError, match="takes no mask .Keras 2.9.") as error:
        config.resolve()
    assert error.value.key == "batchnorm_padding"


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--gradient-variance-batches", "1"], "--gradient-variance-batches: `gradient_variance_batches` must be"),
        (["--gradient-variance-batches", "two"], "Received: gradient_variance_batches='two'"),
        (["--gradient-variance-loss", "1"], "--gradient-variance-loss: `gradient_variance_loss` says when to measure"),
        (["--gradient-variance-batches", "4", "--gradient-variance-loss", "-1"], "Received: gradient_variance_loss=-1"),
        (["--embedding-std", "0"], "--embedding-std: `embedding_std` must be"),
        (["--embedding-std", "nan"], "Received: embedding_std=nan"),
        (["--position-offset", "1e9"], "--position-offset: `position_offset` must be"),
        (["--position-offset", "1", "--task", "lm"], "--position-offset: `position_offset` is added to the encoder tasks' embeddings (reverse, mlm) only. Received: position_offset=1.0 with task='lm'"),
        (["--deep-epsilon", "1e-5", "--task", "lm"], "--deep-epsilon: `deep_epsilon` sets the epsilon of the encoder tasks' blocks"),
        (["--deep-epsilon", "0"], "--deep-epsilon: `deep_epsilon` must be"),
        (["--deep-epsilon", "1e-50"], "--deep-epsilon: `deep_epsilon` must be a number in about [1.18e-38, 3.4e+38] for LayerNormalization: its statistics are float32"),
        (["--deep-epsilon", "1e-50"], "Received: deep_epsilon=1e-50"),
        (["--deep-epsilon", "1e-5", "--norm", "dyt"], "--deep-epsilon: `norm` 'dyt' divides by no statistic"),
        (["--deep-epsilon", "1e-5", "--num-layers", "1"], "needs `num_layers` >= 2. Received: deep_epsilon=1e-05 with num_layers=1"),
        (["--batchnorm-momentum", "0.9"], "--batchnorm-momentum: `batchnorm_momentum` sets the batch-norm control: it needs norm 'batch'. Received: batchnorm_momentum=0.9 with norm='layer'"),
        (["--batchnorm-momentum", "1", "--norm", "batch"], "--batchnorm-momentum: `batchnorm_momentum` must be"),
        (["--batchnorm-padding", "counted", "--norm", "batch"], "--batchnorm-padding: `batchnorm_padding` says what BatchNorm does with padding: it needs `variable_length`"),
        (["--batchnorm-padding", "dropped", "--norm", "batch", "--variable-length"], "Received: batchnorm_padding='dropped'"),
        (["--clipnorm", "-1"], "--clipnorm: `clipnorm` must be"),
        (["--clipnorm", "inf"], "Received: clipnorm=inf"),
        (["--clip-groups", "separate"], "--clip-groups: `clip_groups` says how the gradients are clipped: it needs `clipnorm`. Received: clip_groups='separate'"),
        (["--clip-groups", "norms", "--clipnorm", "1"], "Received: clip_groups='norms'"),
    ],
)  # fmt: skip
def test_bad_values_are_one_line_naming_the_flag(tmp_path, capsys, flags, message):
    output_dir = tmp_path / "out"
    assert main(["compare", "--output-dir", str(output_dir), *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tfnorm compare: error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not output_dir.exists()


def test_the_flags_are_in_the_help(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    text = capsys.readouterr().out
    for flag in (
        "--gradient-variance-batches K",
        "--gradient-variance-loss LOSS",
        "--embedding-std",
        "--position-offset A",
        "--deep-epsilon",
        "--batchnorm-padding {masked,counted}",
        "--batchnorm-momentum",
        "--clipnorm C",
        "--clip-groups {global,separate}",
    ):
        assert flag in text
