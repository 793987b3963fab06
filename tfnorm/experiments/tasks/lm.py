"""Next-byte prediction on the Python language reference, for `tfnorm compare --task lm`.

The text is `pydoc_data.topics.topics` (see `tfnorm.experiments.tasks.text`),
which ships with CPython: each topic's UTF-8 bytes followed by the
end-of-text token, topics in sorted order, read as `tfnorm train --task lm`
reads files (`tfnorm.training.data.byte_text`: 257 token ids, nothing
fitted or downloaded). The model is `tfnorm.build_decoder` with the
"llama" preset's layout (rotary positions, SwiGLU, no biases) unless
`preset`, `feed_forward`, `bias` or `init_std` say otherwise, and the
experiment's norm and placement, without dropout.

* split: the last `HELD_OUT_FRACTION` of the token stream is held out, by
  position (never shuffled across the split);
* training: windows of `seq_len + 1` tokens starting anywhere in the
  training part, drawn afresh at every step from the run's seeded
  generator; the model reads the first `seq_len` tokens and predicts each
  next one;
* validation: the held-out part cut into consecutive windows, so that every
  held-out token after the first is predicted once. The curves evaluate
  `eval_size` of them, evenly spaced over the held-out text; the final
  loss and bits per byte read all of them (the last, partial window left
  out);
* baselines: a unigram and a bigram model of the training tokens (each
  count plus one), scored on the same held-out targets. The threshold of
  "steps to threshold" is the bigram's bits per byte: the first evaluation
  at which a decoder predicts the held-out text better than a model that
  knows only the previous byte.

Bits per byte are the mean cross-entropy per token in bits; a token is a
byte (one end-of-text token per topic aside: 8 of the held-out tokens).
"""

from __future__ import annotations

import math

import numpy as np

from tfnorm.choices import NORMS
from tfnorm.experiments.compare_settings import DEFAULT_EPSILON
from tfnorm.experiments.tasks.text import SOURCE
from tfnorm.training.data import byte_text

HELD_OUT_FRACTION = 0.1
#: Held-out windows per call when the whole held-out text is evaluated.
FINAL_BATCH = 256
#: The `build_decoder` preset of the experiment's decoders unless `preset` says another.
PRESET = "llama"


def topic_tokens():
    """The byte tokens of every topic of `pydoc_data.topics`, sorted by topic,
    each followed by `END_OF_TEXT`, as one int32 stream."""
    from pydoc_data.topics import topics

    parts = []
    for key in sorted(topics):
        parts.append(byte_text.encode(topics[key]))
        parts.append(np.array([byte_text.END_OF_TEXT], np.int32))
    return np.concatenate(parts)


def bigram_bits_per_byte(train_tokens, contexts, targets):
    """Bits per token of `targets`, each after its `contexts` token, under the
    training tokens' bigram frequencies (each count plus one)."""
    size = byte_text.VOCAB_SIZE
    counts = np.ones((size, size))
    np.add.at(counts, (train_tokens[:-1], train_tokens[1:]), 1.0)
    log2_p = np.log2(counts / counts.sum(axis=1, keepdims=True))
    return float(-log2_p[contexts, targets].mean())


def norm_epsilon(cfg, norm):
    """The epsilon of `norm` in the experiment: the configured one, or the
    default for a norm other than `cfg.norm`; None for a norm without a
    statistic (DyT)."""
    if not NORMS[norm].takes_epsilon:
        return None
    return cfg.epsilon if cfg.epsilon is not None else DEFAULT_EPSILON


def build_decoder_model(
    num_layers, d_model, num_heads, dff, vocab_size, seq_len, **options
):
    """A `tfnorm.build_decoder` causal language model without dropout.

    `options` are `build_decoder`'s `norm`, `norm_position`, `epsilon`,
    `preset` (`PRESET` when left out), `feed_forward`, `use_bias` and
    `init_std` (each left out when None: the preset's).

    Returns:
        `(model, model)`: the model, and the layer holding its `block_*`
        layers (the model itself), as `compare_runs.build_model` returns.
    """
    from tfnorm.models import build_decoder

    options = {key: value for key, value in options.items() if value is not None}
    options.setdefault("preset", PRESET)
    model = build_decoder(
        num_layers,
        d_model,
        num_heads,
        dff,
        vocab_size=vocab_size,
        max_len=seq_len,
        dropout_rate=0.0,
        **options,
    )
    return model, model


class ByteTextTask:
    """Causal language modelling of `pydoc_data.topics`'s bytes (see the module docstring).

    Args:
        seq_len: int, the context: tokens the model reads per window.
        eval_size: int, at most this many held-out windows in the curves.
    """

    name = "lm"
    #: Not an accuracy task: the threshold is on the held-out loss.
    target_accuracy = None

    def __init__(self, seq_len, eval_size):
        self.description = f"next-byte prediction (causal decoder) on {SOURCE}"
        self.vocab_size = byte_text.VOCAB_SIZE
        self.seq_len = seq_len
        stream = topic_tokens()
        held_out = int(round(HELD_OUT_FRACTION * len(stream)))
        self.train_tokens = stream[: len(stream) - held_out]
        windows = byte_text.TokenWindows(stream[len(stream) - held_out :], seq_len)
        inputs, targets = windows.batch(np.arange(len(windows)))
        self.val_windows = (inputs, targets)
        count = min(eval_size, len(windows))
        picked = np.linspace(0, len(windows) - 1, count).round().astype(int)
        self.eval_data = (
            inputs[picked],
            targets[picked],
            np.ones(targets[picked].shape, "float32"),
        )
        unigram = byte_text.unigram_bits_per_byte(self.train_tokens, targets.ravel())
        bigram = bigram_bits_per_byte(
            self.train_tokens, inputs.ravel(), targets.ravel()
        )
        commonest = np.bincount(self.train_tokens, minlength=self.vocab_size).argmax()
        #: The accuracy of always predicting the commonest training byte.
        self.chance = float(np.mean(targets == commonest))
        #: The threshold, as a loss in nats per token.
        self.target_loss = bigram * math.log(2.0)
        self.sizes = {
            "train_tokens": int(len(self.train_tokens)),
            "held_out_tokens": int(held_out),
            "val_windows": int(len(windows)),
            "val_targets": int(targets.size),
            "eval_windows": int(count),
            "unigram_bits_per_byte": unigram,
            "bigram_bits_per_byte": bigram,
            "threshold_bits_per_byte": bigram,
        }

    def batch(self, rng, batch_size):
        starts = rng.integers(0, len(self.train_tokens) - self.seq_len, batch_size)
        windows = self.train_tokens[starts[:, None] + np.arange(self.seq_len + 1)]
        inputs, targets = windows[:, :-1], windows[:, 1:]
        return inputs, targets, np.ones(targets.shape, "float32")

    def final_measures(self, evaluate):
        """Loss, bits per byte and accuracy on every held-out window.

        `evaluate(inputs, targets, weights)` returns the weighted means
        `(accuracy, loss)` of one batch; the windows go through in batches of
        `FINAL_BATCH` (the last padded with weight 0), so one traced
        function serves every batch.
        """
        inputs, targets = self.val_windows
        chunk = min(FINAL_BATCH, len(inputs))
        total_loss = total_hits = 0.0
        for start in range(0, len(inputs), chunk):
            part_inputs = inputs[start : start + chunk]
            part_targets = targets[start : start + chunk]
            weights = np.ones(part_targets.shape, "float32")
            padding = chunk - len(part_inputs)
            if padding:
                pad = ((0, padding), (0, 0))
                part_inputs = np.pad(part_inputs, pad)
                part_targets = np.pad(part_targets, pad)
                weights = np.pad(weights, pad)
            accuracy, loss = evaluate(part_inputs, part_targets, weights)
            count = float(weights.sum())
            total_hits += float(accuracy) * count
            total_loss += float(loss) * count
        loss = total_loss / targets.size
        return {
            "final_val_loss": loss,
            "final_bits_per_byte": loss / math.log(2.0),
            "final_val_accuracy": total_hits / targets.size,
        }
