"""Generation one compiled step at a time: for streaming (a callback sees
each token as it is made) and for continuing past the model's context.

Positions up to `max_len` are fed one token a step with the KV cache;
each further token recomputes the last `max_len` tokens without a cache
(the window slides), so rotary and learned positions alike stay within
what the model was trained on.
"""

from __future__ import annotations

import weakref

import numpy as np

from tfnorm._keras import tf

# Compiled steps per model: {model: {signature: (cached_step, window_step)}}.
_STEPS = weakref.WeakKeyDictionary()


def run(model, tokens, lengths, max_new_tokens, sampler, seed, temperature, stops,
        callback=None, jit_compile=True):  # fmt: skip
    """Fills `tokens` (int32 `(batch, longest + max_new_tokens)`, prompts
    left-aligned) in place; returns each row's end (one past its last token).

    `callback(row, token_id)` is called for each new token, in order; a true
    return value stops that row (the token is kept).
    """
    batch = tokens.shape[0]
    max_len = int(model.max_len)
    ends = lengths + max_new_tokens
    cached_step, window_step = _steps(model, batch, sampler, bool(jit_compile))
    start = int(lengths.min())
    cache = None
    if start <= max_len:
        cache = model.init_cache(batch, max_len)
        if start > 1:
            _, cache = model.call_with_cache(
                tf.constant(tokens[:, : start - 1]), cache, 0
            )
    stopped = np.zeros(batch, bool)
    finished = ends.copy()
    temperature = tf.constant(temperature, tf.float32)
    for t in range(start, int(ends.max())):
        step_seed = tf.constant([seed, t], tf.int64)
        if t <= max_len:
            index = tf.constant(t - 1, tf.int32)
            sampled, cache = cached_step(
                tf.constant(tokens[:, t - 1 : t]), cache, index, step_seed, temperature
            )
        else:
            window = tf.constant(tokens[:, t - max_len : t])
            sampled = window_step(window, step_seed, temperature)
        sampled = np.asarray(sampled)
        for row in range(batch):
            if t < lengths[row] or t >= ends[row]:
                continue
            if stopped[row]:
                tokens[row, t] = tokens[row, t - 1]  # repeats, as the loop does
                continue
            token = int(sampled[row])
            tokens[row, t] = token
            hit = token in stops
            if callback is not None and callback(row, token):
                hit = True
            if hit:
                stopped[row] = True
                finished[row] = t + 1
        if all(stopped[row] or t + 1 >= ends[row] for row in range(batch)):
            for row in np.flatnonzero(stopped):
                tokens[row, t + 1 :] = tokens[row, finished[row] - 1]
            break
    return finished


def _steps(model, batch, sampler, jit_compile):
    per_model = _STEPS.setdefault(model, {})
    key = (batch, sampler.compile_key(), jit_compile)
    if key not in per_model:

        def cached_step(previous, cache, index, seed, temperature):
            logits, cache = model.call_with_cache(previous, cache, index)
            logits = tf.cast(logits[:, -1, :], tf.float32)
            return sampler(logits, seed, temperature), cache

        def window_step(window, seed, temperature):
            logits = tf.cast(model(window, training=False)[:, -1, :], tf.float32)
            return sampler(logits, seed, temperature)

        per_model[key] = (
            tf.function(cached_step, jit_compile=jit_compile),
            tf.function(window_step, jit_compile=jit_compile),
        )
    return per_model[key]
