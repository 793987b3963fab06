# ruff: noqa: E402
# Source of notebooks/01_quickstart.ipynb (see tools/make_notebooks.py).

# %% [markdown]
# # tfnorm quickstart
#
# tfnorm's normalisation layers are ordinary Keras layers. This notebook puts them
# into **your own** models:
#
# 1. the layers on a tensor: `LayerNormalization`, `RMSNorm`, `ScaleNorm`, `get_norm`;
# 2. a functional model and a subclassed model;
# 3. swapping Keras's `LayerNormalization` for tfnorm's in a trained model, keeping
#    the weights;
# 4. RMSNorm instead of LayerNorm;
# 5. mixed precision;
# 6. saving and reloading.
#
# The next cell holds the parameters (tagged `parameters`, so papermill or
# `nbclient` can override them). The defaults are small so that the notebook runs
# in about a minute on 2 CPU cores.

# %% tags=["parameters"]
# Small defaults for a CPU. On a GPU, try NUM_EXAMPLES = 20000, EPOCHS = 10,
# D_MODEL = 256, BATCH_SIZE = 256, MAX_LEN = 64.
NUM_EXAMPLES = 1024
MAX_LEN = 16
D_MODEL = 32
EPOCHS = 3
BATCH_SIZE = 64
SEED = 0

# %%
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

import tfnorm
from tfnorm.training.data import make_synthetic

# `tf.keras` is Keras 3 on TF >= 2.16, tf_keras with TF_USE_LEGACY_KERAS=1, and
# Keras 2.9 in the TF 2.9 GPU image: the code below runs on all three.
keras = tf.keras
print("TensorFlow", tf.__version__, "| tfnorm", tfnorm.__version__)

# %% [markdown]
# ## 1. The layers on a tensor
#
# * `tfnorm.LayerNormalization`: zero mean, unit variance over the last axis, then a
#   learned scale `gamma` and offset `beta` (same arguments and weights as Keras's;
#   the default `epsilon` is Keras's 1e-3 too, so swapping the class changes
#   nothing; `get_norm("layer")` gives 1e-5, as in PyTorch and the original
#   Transformer).
# * `tfnorm.RMSNorm`: divides by the root mean square, no mean subtraction
#   (Zhang & Sennrich, 2019), one weight vector.
# * `tfnorm.ScaleNorm`: divides by the L2 norm and multiplies by one learned scalar
#   (Nguyen & Salazar, 2019).
# * `tfnorm.get_norm(spec)` makes a fresh norm layer from a name (`"layer"`, `"rms"`,
#   `"scale"`), a config dict, a class or an instance: the way to make the choice of
#   norm a hyper-parameter of your model.
#
# Below we check each formula against NumPy on the same input.

# %%
rng = np.random.default_rng(SEED)
x = (3.0 * rng.standard_normal((4, D_MODEL)) + 5.0).astype("float32")

layer_norm = tfnorm.LayerNormalization()
rms_norm = tfnorm.get_norm("rms")
scale_norm = tfnorm.get_norm("scale")

mean = x.mean(-1, keepdims=True)
expected = {
    "LayerNormalization": (x - mean)
    / np.sqrt(x.var(-1, keepdims=True) + layer_norm.epsilon),
    "RMSNorm": x / np.sqrt(np.mean(x**2, -1, keepdims=True) + rms_norm.epsilon),
    # ScaleNorm's scalar starts at sqrt(d).
    "ScaleNorm": np.sqrt(D_MODEL) * x / np.linalg.norm(x, axis=-1, keepdims=True),
}
for name, layer in [
    ("LayerNormalization", layer_norm),
    ("RMSNorm", rms_norm),
    ("ScaleNorm", scale_norm),
]:
    y = layer(x).numpy()
    error = np.abs(y - expected[name]).max()
    print(
        f"{name:19s} weights={[w.name.split('/')[-1] for w in layer.weights]!s:18s}"
        f" max |tfnorm - numpy| = {error:.1e}"
    )
    assert error < 1e-4, name

# %% [markdown]
# ## 2. A functional model and a subclassed model
#
# The data: the synthetic `majority` task of `tfnorm train` (each token belongs to
# one of three classes, the label is the class with the most tokens). A model
# that pools token features over the sequence can solve it, so even the small
# models below should beat chance (1/3) within a few epochs; how far depends on
# the parameters above.

# %%
train, val = make_synthetic(
    "majority", num_examples=NUM_EXAMPLES, max_len=MAX_LEN, seed=SEED
)
print("train ids", train.ids.shape, "labels", np.bincount(train.labels))


def compile_model(model, optimizer=None):
    # The models output logits; the loss applies the softmax itself, which is
    # exact where a separate softmax would round to 0 or 1.
    model.compile(
        optimizer=optimizer or keras.optimizers.Adam(3e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def fit(model, epochs=EPOCHS):
    history = model.fit(
        train.ids,
        train.labels,
        validation_data=(val.ids, val.labels),
        epochs=epochs,
        batch_size=BATCH_SIZE,
        verbose=0,
    )
    return {name: values[-1] for name, values in history.history.items()}


def build_functional(norm="layer", name="functional"):
    """Embedding -> Dense -> norm -> mean over tokens -> logits."""
    ids = keras.Input((MAX_LEN,), dtype="int32", name="ids")
    h = keras.layers.Embedding(train.vocab_size, D_MODEL, name="embedding")(ids)
    h = keras.layers.Dense(D_MODEL, activation="relu", name="hidden")(h)
    h = tfnorm.get_norm(norm, name="norm")(h)
    h = keras.layers.GlobalAveragePooling1D(name="pool")(h)
    # Logits stay float32 under mixed precision (section 5).
    logits = keras.layers.Dense(train.num_classes, dtype="float32", name="logits")(h)
    return keras.Model(ids, logits, name=name)


keras.utils.set_random_seed(SEED)
functional = compile_model(build_functional("layer"))
functional.summary()
print("after training:", fit(functional))

# %% [markdown]
# A subclassed model holds norm layers as attributes like any other layer. Here a
# Pre-LN residual block, `x + FFN(norm(x))`, followed by a final norm, with the
# norm type as a constructor argument:


# %%
class ResidualClassifier(keras.Model):
    def __init__(self, vocab_size, num_classes, d_model, norm="layer", **kwargs):
        super().__init__(**kwargs)
        self.embedding = keras.layers.Embedding(vocab_size, d_model)
        self.ffn_norm = tfnorm.get_norm(norm)
        self.ffn = keras.layers.Dense(d_model, activation="gelu")
        self.final_norm = tfnorm.get_norm(norm)
        self.pool = keras.layers.GlobalAveragePooling1D()
        self.head = keras.layers.Dense(num_classes, dtype="float32")

    def call(self, ids):
        x = self.embedding(ids)
        x = x + self.ffn(self.ffn_norm(x))
        return self.head(self.pool(self.final_norm(x)))


keras.utils.set_random_seed(SEED)
subclassed = compile_model(
    ResidualClassifier(train.vocab_size, train.num_classes, D_MODEL, norm="rms")
)
print("after training:", fit(subclassed))
print("norm layers:", [type(layer).__name__ for layer in subclassed.layers])

# %% [markdown]
# ## 3. Swapping Keras's LayerNormalization for tfnorm's, keeping the weights
#
# tfnorm's `LayerNormalization` takes the same arguments (and defaults) as Keras's
# and has the same weights (`gamma`, `beta`, same shapes, same order), so a trained
# model can be rebuilt with tfnorm's layers and given the old weights.
# `tfnorm.replace_norms(model)` does exactly that for a Sequential or functional
# model, and `to="keras"` goes back. The epsilon is copied: with the same epsilon
# the outputs agree to float32 rounding, with a different one they do not.


# %%
def build_with_keras_norm():
    ids = keras.Input((MAX_LEN,), dtype="int32", name="ids")
    h = keras.layers.Embedding(train.vocab_size, D_MODEL, name="embedding")(ids)
    h = keras.layers.Dense(D_MODEL, activation="relu", name="hidden")(h)
    h = keras.layers.LayerNormalization(name="norm")(h)
    h = keras.layers.GlobalAveragePooling1D(name="pool")(h)
    logits = keras.layers.Dense(train.num_classes, name="logits")(h)
    return keras.Model(ids, logits, name="keras_norm_model")


keras.utils.set_random_seed(SEED)
keras_model = compile_model(build_with_keras_norm())
fit(keras_model, epochs=1)

swapped = tfnorm.replace_norms(keras_model, to="tfnorm")
print("norm layer now:", type(swapped.get_layer("norm")).__module__)
before = keras_model.predict(val.ids, verbose=0)
after = swapped.predict(val.ids, verbose=0)
print(
    f"max |keras - tfnorm| over {len(val.ids)} examples: {np.abs(before - after).max():.1e}"
)
np.testing.assert_allclose(after, before, atol=1e-4)

# The same weights with the Transformer epsilon give (slightly) different outputs:
gamma_beta = keras_model.get_layer("norm").get_weights()
plain = tfnorm.LayerNormalization(epsilon=1e-5)
plain.build((None, MAX_LEN, D_MODEL))
plain.set_weights(gamma_beta)
hidden = keras.Model(keras_model.input, keras_model.get_layer("hidden").output)
h = hidden.predict(val.ids, verbose=0)
mismatch = np.abs(plain(h).numpy() - keras_model.get_layer("norm")(h).numpy()).max()
print(
    f"epsilon 1e-5 vs Keras's 1e-3 on the same weights: max difference {mismatch:.1e}"
)

# %% [markdown]
# ## 4. RMSNorm instead of LayerNorm
#
# RMSNorm skips the mean subtraction and the offset: fewer weights and less work per
# call, and the choice of LLaMA/T5-style models. With `get_norm` the model builder
# above switches with one argument. Compare the parameter counts and the results:

# %%
keras.utils.set_random_seed(SEED)
rms_model = compile_model(build_functional("rms", name="functional_rms"))
rms_metrics = fit(rms_model)
for model in (functional, rms_model):
    norm = model.get_layer("norm")
    print(
        f"{type(norm).__name__:19s} norm weights: {norm.count_params():3d}  "
        f"val_accuracy: {model.evaluate(val.ids, val.labels, verbose=0)[1]:.3f}"
    )

# %% [markdown]
# ## 5. Mixed precision
#
# `tfnorm.training.set_mixed_precision("float16")` sets Keras's `mixed_float16`
# policy: layers compute in float16 with float32 variables. tfnorm's norms
# keep their **statistics and weights in float32** and return float16. float16's
# narrow range makes small gradients underflow, so the optimizer gets dynamic loss
# scaling from `wrap_for_mixed_precision` (bfloat16 needs none).
#
# Why float32 statistics matter: for inputs with a large offset, computing mean and
# variance in float16 loses most of the digits. Compare both against a float64
# reference (on a CPU float16 brings no speed-up; on a recent GPU it does).

# %%
offset = (rng.standard_normal((8, D_MODEL)) + 100.0).astype("float16")
reference = offset.astype("float64")
reference = (reference - reference.mean(-1, keepdims=True)) / np.sqrt(
    reference.var(-1, keepdims=True) + 1e-5
)
half_stats = offset - offset.mean(-1, keepdims=True)  # float16 throughout
half_stats = half_stats / np.sqrt((half_stats**2).mean(-1, keepdims=True) + 1e-5)
tfnorm_half = tfnorm.LayerNormalization(epsilon=1e-5, dtype="mixed_float16")(
    offset
).numpy()
print("output dtype:", tfnorm_half.dtype)
print(f"float16 statistics: max error {np.abs(half_stats - reference).max():.1e}")
print(
    f"tfnorm (float32 statistics): max error {np.abs(tfnorm_half - reference).max():.1e}"
)

# %%
tfnorm.training.set_mixed_precision("float16")
try:
    keras.utils.set_random_seed(SEED)
    mixed = build_functional("layer", name="functional_mixed")
    for name in ("hidden", "norm", "logits"):
        policy = mixed.get_layer(name).dtype_policy
        print(
            f"{name:7s} computes in {policy.compute_dtype}, "
            f"keeps variables in {policy.variable_dtype}"
        )
    optimizer = tfnorm.training.wrap_for_mixed_precision(keras.optimizers.Adam(3e-3))
    print("optimizer:", type(optimizer).__name__)
    compile_model(mixed, optimizer)
    mixed_metrics = fit(mixed)
    print("after training:", mixed_metrics)
    assert np.isfinite(mixed_metrics["loss"])
finally:
    # The policy is global: set it back before building float32 models.
    tfnorm.training.set_mixed_precision(None)

# %% [markdown]
# ## 6. Save and reload
#
# tfnorm's layers are registered with Keras, so after `import tfnorm` a saved model
# loads with plain `keras.models.load_model`, no `custom_objects`. The native
# format depends on the Keras in use: the `.keras` archive with Keras 3 and
# tf_keras, a SavedModel directory with Keras 2.9 (the TF 2.9 GPU image).
# `tfnorm.models.save_model` writes that format and returns the path it wrote.
#
# Subclassed models (like `ResidualClassifier`) have no config to rebuild them
# from; save their weights and rebuild the class in code.

# %%
model_path = tfnorm.models.save_model(functional, "quickstart_model")
print("saved to", model_path)
reloaded = keras.models.load_model(model_path)
print("reloaded norm layer:", type(reloaded.get_layer("norm")).__name__)
np.testing.assert_allclose(
    reloaded.predict(val.ids, verbose=0),
    functional.predict(val.ids, verbose=0),
    atol=1e-6,
)
print("reloaded model gives the same logits")

subclassed.save_weights("residual_classifier.weights.h5")
rebuilt = ResidualClassifier(train.vocab_size, train.num_classes, D_MODEL, norm="rms")
rebuilt(val.ids[:1])  # creates the weights
rebuilt.load_weights("residual_classifier.weights.h5")
np.testing.assert_allclose(
    rebuilt.predict(val.ids, verbose=0),
    subclassed.predict(val.ids, verbose=0),
    atol=1e-6,
)
print("rebuilt subclassed model gives the same logits")

# %% [markdown]
# ## Your own model, trained in the background over SSH
#
# A notebook is the wrong place for a run of hours: put the model and its data
# in a module with two functions, `build_model()` (a Keras model, compiled or
# not) and `load_data()` (arrays or `tf.data` datasets, or a `(train,
# validation)` pair), and start `tfnorm train` from an SSH session; it survives
# the session, checkpoints as it goes, resumes exactly when rerun after a crash,
# and writes histograms of every norm of your model to TensorBoard. The image
# has three such modules to copy in `/workspace/examples`:
#
# ```sh
# ssh -p 2222 tfnorm@127.0.0.1 'nohup tfnorm train \
#     --model-fn examples/keras_transformer_classifier.py:build_model \
#     --data-fn examples/keras_transformer_classifier.py:load_data \
#     --epochs 3 --logdir runs/mine --log-file runs/mine.log > /dev/null 2>&1 &'
# ```
#
# `runs/` under `/workspace` is the host's `runs/`, so TensorBoard shows the
# run at once; `tail -f runs/mine.log` follows it. From a notebook, `tfnorm.training.train(config, model_fn=...,
# data_fn=...)` runs the same thing in the kernel.

# %% [markdown]
# ## Next
#
# * `02_pre_vs_post_ln.ipynb`: where to put the norm in a Transformer block, and why
#   it decides whether training needs a warm-up.
# * `03_tensorboard_norm_monitoring.ipynb`: watching norm layers in TensorBoard and
#   catching float16 failures.
# * `04_multi_gpu.ipynb`: the same models on several GPUs or machines.
