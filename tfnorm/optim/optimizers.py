"""`make_optimizer`: AdamW whose weight decay never touches norms or biases.

Decoupled weight decay (Loshchilov & Hutter, 2019) shrinks every decayed
variable by `learning_rate * weight_decay` each step. Applied to a
normalisation layer's gain γ it pulls the gain towards 0 and so rescales
whole residual branches; applied to β or to biases it only adds noise. Keras's
own `AdamW` decays every variable unless told otherwise, so forgetting the
exclusion is silent. tfnorm's `AdamW` excludes them by default.
"""

from __future__ import annotations

import re

from tfnorm import _keras
from tfnorm._checks import is_real
from tfnorm._keras import keras, register_serializable, variable_path
from tfnorm.choices import OPTIMIZERS
from tfnorm.layers import is_norm_layer

DEFAULT_EXCLUDE = ("norm", "bias")
#: What the weight decay shrinks, by name (`decay_target`): the patterns it
#: skips, and whether the norms' own weights are decayed too.
_DECAY_TARGETS = {
    "matrices": (DEFAULT_EXCLUDE, False),
    "kernels": (DEFAULT_EXCLUDE + ("embedding",), False),
    "matrices_and_biases": (("norm",), False),
    "all": ((), True),
}
# Weight names normalisation layers use for their gain and shift (Keras
# LayerNormalization: gamma/beta; Keras 3 RMSNormalization and tfnorm RMSNorm:
# scale). Always excluded, whatever the layer is called.
NORM_WEIGHT_NAMES = ("gamma", "beta", "scale")


def norm_variable_paths(model_or_layers) -> set:
    """Paths of every variable owned by a normalisation layer in `model_or_layers`.

    A layer counts as a norm when `tfnorm.layers.is_norm_layer` says so (tfnorm's
    norms, Keras's LayerNormalization and RMSNormalization), whatever its name.
    """
    layers = (
        list(model_or_layers)
        if isinstance(model_or_layers, (list, tuple))
        else [model_or_layers]
    )
    paths = set()
    for root in layers:
        for layer in [root] + _keras.sublayers(root):
            if is_norm_layer(layer):
                paths.update(variable_path(v) for v in layer.weights)
    return paths


class _DecayExclusion:
    """Decides which variables the decoupled weight decay skips."""

    def _init_exclusion(self, patterns, decay_norms=False):
        self.decay_norms = bool(decay_norms)
        if isinstance(patterns, str):
            patterns = (patterns,)
        self.exclude_patterns = tuple(patterns or ())
        for pattern in self.exclude_patterns:
            try:
                re.compile(pattern)
            except (re.error, TypeError) as error:
                raise ValueError(
                    "`exclude_from_weight_decay` must hold regular expressions. "
                    f"Received: {pattern!r} ({error})"
                ) from None
        self._excluded_paths = set()

    def exclude_variables(self, model_or_layers):
        """Also skips decay on every variable of the norm layers in `model_or_layers`.

        Call before the first training step. `make_optimizer(model=...)` calls
        it for you.
        """
        self._excluded_paths.update(norm_variable_paths(model_or_layers))
        return self

    def decays_variable(self, variable) -> bool:
        """False when `variable` is a norm weight, a bias or matches a pattern.

        The patterns are searched (case-insensitively) in the last two parts
        of the variable's path, "owning_layer/weight_name", so a Dense kernel
        inside a block called "pre_norm_block" still decays.
        """
        path = variable_path(variable)
        parts = path.split("/")
        if not self.decay_norms and (
            path in self._excluded_paths or parts[-1].lower() in NORM_WEIGHT_NAMES
        ):
            return False
        local = "/".join(parts[-2:])
        return not any(
            re.search(p, local, flags=re.IGNORECASE) for p in self.exclude_patterns
        )


@register_serializable
class Adam(_keras.GlobalClipping, keras.optimizers.Adam):
    """`keras.optimizers.Adam` whose clipping acts on the global gradient."""


@register_serializable
class SGD(_keras.GlobalClipping, keras.optimizers.SGD):
    """`keras.optimizers.SGD` whose clipping acts on the global gradient."""


@register_serializable
class AdamW(_DecayExclusion, _keras.AdamWBase):
    """Adam with decoupled weight decay that skips norm weights and biases by default.

    Keras's AdamW where this Keras has one; elsewhere (Keras 2.9) Adam with
    the same decay added, `var -= learning_rate * weight_decay * var` before
    each update (see `tfnorm._keras.optimizers`). Clipping acts on the
    global gradient.

    Args:
        exclude_from_weight_decay: regular expressions searched in each
            variable's "owning_layer/weight_name"; matching variables are
            not decayed. Norm weights named gamma/beta/scale and the
            variables given to `exclude_variables` are always skipped.
            Defaults to `("norm", "bias")`.
        decay_norms: decay the norms' weights too (only the patterns then
            skip variables). Defaults to False.
        *args, **kwargs: as for `keras.optimizers.AdamW` (learning_rate,
            weight_decay, beta_1, beta_2, epsilon, ...).
    """

    def __init__(
        self, *args, exclude_from_weight_decay=DEFAULT_EXCLUDE, decay_norms=False,
        **kwargs,
    ):  # fmt: skip
        super().__init__(*args, **kwargs)
        self._init_exclusion(exclude_from_weight_decay, decay_norms)

    def get_config(self):
        config = super().get_config()
        config["exclude_from_weight_decay"] = list(self.exclude_patterns)
        config["decay_norms"] = self.decay_norms
        return config


def decay_target(name):
    """`(exclude_from_weight_decay, decay_norms)` for `make_optimizer` of a
    named choice of decayed variables (`tfnorm.choices.DECAY_TARGETS`):

    * "matrices": dense kernels and embeddings, the usual language-model
      practice (no decay on the norms' gain and shift, nor on biases);
    * "kernels": dense kernels only (embeddings not decayed either);
    * "matrices_and_biases": biases decayed too;
    * "all": every variable, the norms' too (Keras's AdamW default).
    """
    if name not in _DECAY_TARGETS:
        raise ValueError(
            f"`weight_decay_on` must be one of {tuple(_DECAY_TARGETS)}. "
            f"Received: weight_decay_on={name!r}"
        )
    return _DECAY_TARGETS[name]


def describe_decay(optimizer, variables):
    """One line saying which of `variables` the optimizer's weight decay
    shrinks: their count and the kinds of weights (last path parts) left out."""
    decide = getattr(optimizer, "decays_variable", None)
    rate = getattr(optimizer, "weight_decay", None)
    # Keras 2.9's AdamW backport keeps it as a variable, mirrored under a
    # distribution strategy (no float() of it there).
    rate = float(rate.numpy() if hasattr(rate, "numpy") else rate or 0.0)
    if decide is None or not rate:
        return "no weight decay"
    decayed = [v for v in variables if decide(v)]
    skipped = sorted(
        {variable_path(v).split("/")[-1] for v in variables if not decide(v)}
    )
    left_out = f"not on: {', '.join(skipped)}" if skipped else "all of them"
    return f"weight decay {rate:g} on {len(decayed)} of {len(variables)} variables ({left_out})"


def make_optimizer(
    name="adamw",
    learning_rate=1e-3,
    weight_decay=0.01,
    exclude_from_weight_decay=DEFAULT_EXCLUDE,
    clipnorm=None,
    decay_norms=False,
    beta_1=0.9,
    beta_2=0.999,
    epsilon=1e-8,
    model=None,
    **kwargs,
):
    """Builds the optimizer `tfnorm train` uses, for any of tfnorm's runtimes.

    `"adamw"` is Adam with decoupled weight decay (Loshchilov & Hutter, 2019)
    that never decays normalisation gains/shifts or biases: variables whose
    own name is gamma, beta or scale, whose "owning_layer/weight_name" matches
    a pattern in `exclude_from_weight_decay` (by default anything in a layer
    whose name contains "norm", and every "bias"), and, when `model` is given,
    every variable of a layer for which `tfnorm.layers.is_norm_layer` is true
    (so a LayerNormalization named "ln_1" or a ScaleNorm named "sn" is
    skipped too). Pass `model` whenever you have it; without it the decision
    rests on names only. Call `optimizer.exclude_variables(layer)` later for
    models built after the optimizer.

    Reference: [Loshchilov & Hutter, 2019, "Decoupled Weight Decay
    Regularization"](https://arxiv.org/abs/1711.05101).

    ```
    adamw:  var <- var - lr * weight_decay * var   (decayed variables only)
            var <- adam_update(var, clip(grad))
    ```

    Example:

    >>> import tfnorm
    >>> schedule = tfnorm.training.WarmupSchedule(1e-3, 100, 1000)
    >>> optimizer = tfnorm.training.make_optimizer("adamw", schedule, clipnorm=1.0)

    Args:
        name: "adamw", "adam" or "sgd". Defaults to "adamw".
        learning_rate: a float > 0 or a `LearningRateSchedule` such as
            `WarmupSchedule`. Defaults to 1e-3.
        weight_decay: float >= 0, the decoupled decay rate; used by "adamw"
            only ("adam" and "sgd" do not decay). Defaults to 0.01.
        exclude_from_weight_decay: regular expressions (case-insensitive)
            naming variables not to decay, see above. Defaults to
            `("norm", "bias")`.
        clipnorm: float > 0 or None; clips the gradients by their global norm
            (across all variables). Defaults to None (no clipping).
        beta_1, beta_2, epsilon: Adam's moment decay rates and stabiliser.
            Defaults to 0.9, 0.999, 1e-8.
        decay_norms: decay the norms' own weights too ("adamw" only; see
            `decay_target`). Defaults to False.
        model: optional Keras model or layer whose norm layers' variables are
            excluded from decay by ownership.
        **kwargs: passed to the Keras optimizer (e.g. `momentum=0.9` for sgd).

    Returns:
        A Keras optimizer.
    """
    if name not in OPTIMIZERS:
        raise ValueError(f"`name` must be one of {OPTIMIZERS}. Received: name={name!r}")
    _check_learning_rate(learning_rate)
    if not is_real(weight_decay) or weight_decay < 0:
        raise ValueError(
            "`weight_decay` must be a number >= 0. "
            f"Received: weight_decay={weight_decay!r}"
        )
    if clipnorm is not None and (not is_real(clipnorm) or clipnorm <= 0):
        raise ValueError(
            f"`clipnorm` must be a number > 0 or None. Received: clipnorm={clipnorm!r}"
        )
    if clipnorm is not None:
        kwargs["global_clipnorm"] = float(clipnorm)
    if name == "sgd":
        return SGD(learning_rate=learning_rate, **kwargs)
    adam_kwargs = dict(beta_1=beta_1, beta_2=beta_2, epsilon=epsilon, **kwargs)
    if name == "adam":
        return Adam(learning_rate=learning_rate, **adam_kwargs)
    optimizer = AdamW(
        learning_rate=learning_rate,
        weight_decay=float(weight_decay),
        exclude_from_weight_decay=exclude_from_weight_decay,
        decay_norms=decay_norms,
        **adam_kwargs,
    )
    if model is not None:
        optimizer.exclude_variables(model)
    return optimizer


def _check_learning_rate(learning_rate):
    if isinstance(learning_rate, keras.optimizers.schedules.LearningRateSchedule):
        return
    if callable(learning_rate):
        return
    if not is_real(learning_rate) or not learning_rate > 0:
        raise ValueError(
            "`learning_rate` must be a number > 0 or a LearningRateSchedule. "
            f"Received: learning_rate={learning_rate!r}"
        )
