"""The settings of `tfnorm compare` that the claims' second round adds.

Declared here with `setting(...)`, like every other field of
`tfnorm.experiments.compare_settings.CompareConfig` (which places each in
its class body, so `--help` lists them where they belong), and checked
together by `check_claim_settings` from `CompareConfig._finish`:

* `gradient_variance_batches`, `gradient_variance_loss`: the batch-to-batch
  gradient variance per block (`tfnorm.experiments.batch_gradients`);
* `embedding_std`: the embeddings' initial spread (small values give rows
  of near-zero variance, where a norm's epsilon matters);
* `deep_epsilon`: the layered epsilon scheme, one epsilon for the shallow
  half of the blocks and another for the deep half;
* `batchnorm_padding`, `batchnorm_momentum`: the batch-norm control's
  handling of padding and its moving averages' momentum;
* `position_offset`: a per-position scalar added to every feature, the only
  position signal (a "DC component" that carries information);
* `clipnorm`, `clip_groups`: gradient clipping by global norm, over every
  gradient or with the norms' gamma/beta clipped apart
  (`tfnorm.experiments.grouped_clipping`).

Kept apart from the experiment, which imports TensorFlow, so that `tfnorm
compare --help` answers at once.
"""

from __future__ import annotations

from tfnorm._errors import setting_key
from tfnorm.choices import CLIP_GROUPS
from tfnorm.settings.config_error import ConfigError
from tfnorm.settings.readers import choice, integer, number
from tfnorm.settings.setting import setting

# The `--help` sections, as `compare_settings` names them.
MODEL = "model"
TRAINING = "training"
MEASUREMENT = "measurement"

#: What `batchnorm_padding` may say: padding left out of BatchNorm's
#: statistics, or counted in them.
BATCHNORM_PADDING = ("masked", "counted")

GRADIENT_VARIANCE_BATCHES = setting(
    None,
    MEASUREMENT,
    "measure each block's batch-to-batch gradient variance over this many "
    "fixed batches at fixed weights, at initialisation (and at "
    f"{setting_key('gradient_variance_loss')}); 0 or none: not measured",
    integer(2, 4096),
    optional=True,
    off=(0,),
    metavar="K",
)
GRADIENT_VARIANCE_LOSS = setting(
    None,
    MEASUREMENT,
    "also measure it at the first evaluation whose held-out loss (nats) is at "
    "or below this",
    number(above=0.0, maximum=1e4),
    optional=True,
    metavar="LOSS",
)
EMBEDDING_STD = setting(
    None,
    MODEL,
    "standard deviation of the embedding tables' initial values (lm: its "
    "token table); small values make rows of near-zero variance",
    number(above=0.0, maximum=100.0),
    optional=True,
    default_text="1 for reverse and mlm, the decoder's own (0.02) for lm",
)
DEEP_EPSILON = setting(
    None,
    MODEL,
    "the layered epsilon: the epsilon of the deep half of the blocks (from "
    f"block {setting_key('num_layers')} // 2 up, and the final norm), "
    f"{setting_key('epsilon')} then the shallow half's; reverse and mlm only",
    number(above=0.0),
    optional=True,
)
BATCHNORM_PADDING_SETTING = setting(
    None,
    MODEL,
    "norm batch with padded sequences: leave the padding out of BatchNorm's "
    "statistics (masked: Keras 3 and tf_keras; Keras 2.9's layer cannot) or "
    "count it in them (counted)",
    choice(BATCHNORM_PADDING),
    optional=True,
    default_text="masked where the runtime can, counted in Keras 2.9",
)
BATCHNORM_MOMENTUM = setting(
    None,
    MODEL,
    "norm batch: the momentum of BatchNorm's moving averages (a run of N "
    "steps forgets its initial averages to momentum^N)",
    number(0.0, below=1.0),
    optional=True,
    default_text="0.99 (Keras's)",
)
POSITION_OFFSET = setting(
    None,
    MODEL,
    "replace the position embedding with a scalar added to every feature, "
    "from -A at the first position to +A at the last: the only position "
    "signal, a DC component LayerNorm removes and RMSNorm keeps (0: no "
    "position signal); reverse and mlm only",
    number(-1e4, 1e4),
    optional=True,
    metavar="A",
)

CLIPNORM = setting(
    None,
    TRAINING,
    "clip the gradients' global L2 norm (without the loss scale) at this; "
    "0 or none: no clipping (the default: clipping hides the Post-LN "
    "instability)",
    number(above=0.0, maximum=1e30),
    optional=True,
    off=(0,),
    metavar="C",
)
CLIP_GROUPS = setting(
    "global",
    TRAINING,
    "with clipnorm: one global norm over every gradient (global), or the "
    "norms' gamma/beta clipped apart from the other weights, each group to "
    "clipnorm (separate)",
    choice(CLIP_GROUPS),
)

#: The settings the decoder task (lm) refuses: each one's "off" value, and
#: what it does in the encoder tasks.
ENCODER_ONLY = {
    "input_offset": (0.0, "is added to the encoder tasks' embeddings"),
    "position_offset": (None, "is added to the encoder tasks' embeddings"),
    "deep_epsilon": (None, "sets the epsilon of the encoder tasks' blocks"),
}


def check_claim_settings(values):
    """The claims' settings together, after the task's sizes and `epsilon`
    are filled in; fills `batchnorm_padding` for a padded batch-norm run."""
    for key, (off, what) in ENCODER_ONLY.items():
        if values[key] != off and values["task"] == "lm":
            raise ConfigError(
                key,
                f"`{key}` {what} (reverse, mlm) only. Received: "
                f"{key}={values[key]!r} with task='lm'",
            )
    if (
        values["gradient_variance_loss"] is not None
        and not values["gradient_variance_batches"]
    ):
        raise ConfigError(
            "gradient_variance_loss",
            "`gradient_variance_loss` says when to measure the gradient "
            "variance a second time: it needs `gradient_variance_batches`. "
            f"Received: gradient_variance_loss={values['gradient_variance_loss']!r}",
        )
    if values["clip_groups"] != "global" and values["clipnorm"] is None:
        raise ConfigError(
            "clip_groups",
            "`clip_groups` says how the gradients are clipped: it needs "
            f"`clipnorm`. Received: clip_groups={values['clip_groups']!r}",
        )
    _check_deep_epsilon(values)
    _check_batch_norm(values)


def _check_deep_epsilon(values):
    deep = values["deep_epsilon"]
    if deep is None:
        return
    if values["epsilon"] is None:
        raise ConfigError(
            "deep_epsilon",
            f"`norm` {values['norm']!r} divides by no statistic, so it takes "
            f"no `deep_epsilon`. Received: deep_epsilon={deep!r}",
        )
    if values["num_layers"] < 2:
        raise ConfigError(
            "deep_epsilon",
            "`deep_epsilon` sets the deep half of the blocks: it needs "
            f"`num_layers` >= 2. Received: deep_epsilon={deep!r} with "
            f"num_layers={values['num_layers']!r}",
        )
    if values["norm"] != "batch":
        from tfnorm.layers.factory import norm_from_spec

        try:
            norm_from_spec(values["norm"], "deep_epsilon", epsilon=deep)
        except ValueError as error:
            # The norm's own range, said of this setting.
            message = str(error).replace("`epsilon`", "`deep_epsilon`")
            message = message.replace("Received: epsilon=", "Received: deep_epsilon=")
            raise ConfigError("deep_epsilon", message) from None


def _check_batch_norm(values):
    for key in ("batchnorm_padding", "batchnorm_momentum"):
        if values[key] is not None and values["norm"] != "batch":
            raise ConfigError(
                key,
                f"`{key}` sets the batch-norm control: it needs norm 'batch'. "
                f"Received: {key}={values[key]!r} with norm={values['norm']!r}",
            )
    padding = values["batchnorm_padding"]
    if values["norm"] != "batch" or not values["variable_length"]:
        if padding is not None:
            raise ConfigError(
                "batchnorm_padding",
                "`batchnorm_padding` says what BatchNorm does with padding: it "
                "needs `variable_length` (the only padded task). Received: "
                f"batchnorm_padding={padding!r}",
            )
        return
    from tfnorm._keras import BATCH_NORM_TAKES_MASK

    if padding is None:
        values["batchnorm_padding"] = "masked" if BATCH_NORM_TAKES_MASK else "counted"
    elif padding == "masked" and not BATCH_NORM_TAKES_MASK:
        raise ConfigError(
            "batchnorm_padding",
            "this runtime's Keras BatchNormalization takes no mask (Keras "
            "2.9), so the padding counts in its statistics: use 'counted'. "
            "Received: batchnorm_padding='masked'",
        )
