"""`generate`: sample continuations from a causal language model with a KV cache.

The whole loop (prefill of the prompts, then one token per step) is one
compiled TensorFlow function per batch size and length bucket, so a call
does not retrace per token or per prompt length; XLA compiles it where the
runtime has XLA (every supported TensorFlow, on CPU too).
"""

from __future__ import annotations

import weakref

import numpy as np

from tfnorm._checks import (
    check_choice,
    check_number,
    check_positive_int,
    check_seed,
    is_int,
)
from tfnorm._keras import tf

#: `sampler` choices of `generate`.
SAMPLERS = ("greedy", "top_k", "top_p")

#: Sequence lengths are rounded up to a multiple of this (capped at the
#: model's `max_len`), so prompts of nearby lengths share one compiled loop.
LENGTH_BUCKET = 32

# Compiled loops per model: {model: {signature: tf.function}}.
_COMPILED = weakref.WeakKeyDictionary()


def generate(
    model,
    prompts,
    max_new_tokens,
    *,
    sampler="greedy",
    k=50,
    p=0.9,
    temperature=1.0,
    seed=None,
    stop_token_ids=None,
    jit_compile=True,
):
    """Continues each prompt with `max_new_tokens` tokens sampled from `model`.

    Each step feeds one token per sequence and reads the earlier positions'
    keys and values from a cache (`model.call_with_cache`), so a step costs
    one position, not the whole prefix. Prompts of different lengths share
    a batch: shorter ones are padded on the right and keep their own
    positions, so a prompt generates the same tokens alone or in any batch
    (up to float rounding, which can flip a near-tie).

    ```
    "greedy"  next = argmax(logits)
    "top_k"   sample from softmax(logits / temperature) over the k largest
    "top_p"   sample from the smallest set of tokens, most likely first,
              whose probability reaches p (nucleus sampling)
    ```

    Sampling uses stateless random ops: the same `seed` gives the same
    tokens (in the same runtime and compile mode). Row `i` of the batch
    draws from its own stream of the seed, so a prompt sampled alone gives
    the tokens it gets as the first row of any batch, and equal prompts in
    one batch get different samples.

    Example:

    >>> import numpy as np, tfnorm
    >>> model = tfnorm.build_decoder(2, 32, 4, 64, vocab_size=50, max_len=64)
    >>> out = tfnorm.generate(model, np.array([[1, 2, 3]]), 5)
    >>> out.shape
    (1, 8)

    Args:
        model: a causal language model from `tfnorm.build_decoder` (anything
            with `init_cache`, `call_with_cache`, `vocab_size` and
            `max_len`, as `tfnorm.models.DecoderModel`).
        prompts: a 2-D int array `(batch, length)`, or a list of 1-D int
            sequences of any (nonzero) lengths.
        max_new_tokens: int >= 1, tokens to add to each prompt; the prompt
            plus these must fit in `model.max_len`.
        sampler: `"greedy"`, `"top_k"` or `"top_p"`. Defaults to
            `"greedy"`.
        k: int, the candidates of `"top_k"`. Defaults to `50` (capped at the
            vocabulary size).
        p: float in (0, 1], the probability mass of `"top_p"`. Defaults to
            `0.9`.
        temperature: float > 0, divides the logits before sampling.
            Defaults to `1.0`.
        seed: int or None (a fresh random seed). Defaults to `None`.
        stop_token_ids: ids that end a sequence (the stop token is kept),
            or None. Defaults to `None`.
        jit_compile: bool, compile the loop with XLA. Defaults to `True`.

    Returns:
        For a 2-D array, an int array `(batch, length + max_new_tokens)`:
        after a stop token, the stop token repeats. For a list, a list of
        1-D int arrays, each its prompt and its new tokens up to and
        including a stop token.

    Raises:
        ValueError: naming the argument and value, for an empty prompt, a
            token id outside `[0, vocab_size)`, a prompt longer than
            `model.max_len`, `max_new_tokens` < 1 or a `model` that is not a
            causal language model.
    """
    vocab_size, max_len = _check_model(model)
    max_new_tokens = check_positive_int("max_new_tokens", max_new_tokens)
    sampler = check_choice("sampler", sampler, SAMPLERS)
    k = min(check_positive_int("k", k), vocab_size)
    p = check_number("p", p, above=0.0, maximum=1.0)
    temperature = check_number("temperature", temperature, above=0.0)
    seed = np.random.randint(2**31 - 1) if seed is None else check_seed("seed", seed)
    stops = _check_stop_ids(stop_token_ids, vocab_size)
    rows, as_array = _check_prompts(prompts, vocab_size, max_len)
    lengths = np.array([len(row) for row in rows], np.int32)
    longest = int(lengths.max())
    if longest + max_new_tokens > max_len:
        raise ValueError(
            f"The longest prompt ({longest} tokens) plus `max_new_tokens` "
            f"exceeds the model's max_len={max_len}. Received: "
            f"max_new_tokens={max_new_tokens}"
        )
    total = min(max_len, _round_up(longest + max_new_tokens))
    prefill = min(total, _round_up(longest))
    tokens = np.zeros((len(rows), total), np.int32)
    for index, row in enumerate(rows):
        tokens[index, : len(row)] = row
    loop = _compiled_loop(
        model, (len(rows), total, prefill, sampler, k, len(stops), bool(jit_compile))
    )
    out = loop(
        tf.constant(tokens),
        tf.constant(lengths),
        tf.constant(max_new_tokens, tf.int32),
        tf.constant([seed, 0], tf.int64),
        tf.constant(temperature, tf.float32),
        tf.constant(p, tf.float32),
        tf.constant(stops, tf.int32),
    )
    out = np.array(out)
    if as_array:
        out = out[:, : longest + max_new_tokens]
        for row in out:
            # The loop ends once every row has stopped: repeat each stop token
            # to the end of its row.
            hits = np.flatnonzero(np.isin(row[longest:], stops))
            if hits.size:
                row[longest + hits[0] :] = row[longest + hits[0]]
        return out
    return [
        _trimmed(out[i], lengths[i], max_new_tokens, stops) for i in range(len(rows))
    ]


def _round_up(length):
    return -(-length // LENGTH_BUCKET) * LENGTH_BUCKET


def _trimmed(row, length, max_new_tokens, stops):
    new = row[length : length + max_new_tokens]
    hits = np.flatnonzero(np.isin(new, stops))
    end = length + (hits[0] + 1 if hits.size else max_new_tokens)
    return row[:end]


def _check_model(model):
    needed = ("init_cache", "call_with_cache", "vocab_size", "max_len")
    if not all(hasattr(model, name) for name in needed) or not is_int(
        getattr(model, "max_len", None)
    ):
        raise ValueError(
            "`model` must be a causal language model with a KV cache, such as "
            "tfnorm.build_decoder returns (it needs init_cache, call_with_cache, "
            f"vocab_size and max_len). Received: model={_describe(model)}"
        )
    return int(model.vocab_size), int(model.max_len)


def _describe(model):
    name = getattr(model, "name", None)
    kind = type(model).__name__
    return f"<{kind} {name!r}>" if isinstance(name, str) else repr(model)


def _check_stop_ids(stop_token_ids, vocab_size):
    if stop_token_ids is None:
        return [-1]  # matches no token
    ids = [stop_token_ids] if is_int(stop_token_ids) else list(stop_token_ids)
    if not ids or not all(is_int(i) and 0 <= i < vocab_size for i in ids):
        raise ValueError(
            f"`stop_token_ids` must be token ids in [0, {vocab_size}). "
            f"Received: stop_token_ids={stop_token_ids!r}"
        )
    return [int(i) for i in ids]


def _check_prompts(prompts, vocab_size, max_len):
    """`(rows, as_array)`: the prompts as 1-D int arrays, and whether they came
    as one 2-D array."""
    as_array = not isinstance(prompts, (list, tuple))
    if as_array:
        array = np.asarray(prompts)
        if array.ndim != 2:
            raise ValueError(
                "`prompts` must be a 2-D int array (batch, length) or a list of "
                f"1-D sequences. Received: prompts with shape {array.shape}"
            )
        rows = list(array)
    else:
        rows = [np.asarray(row) for row in prompts]
    if not rows:
        raise ValueError("`prompts` holds no prompt. Received: prompts=[]")
    for index, row in enumerate(rows):
        where = f"prompts[{index}]"
        if row.ndim != 1 or row.size == 0:
            raise ValueError(
                f"Each prompt must be a non-empty 1-D sequence of token ids. "
                f"Received: {where}={row.tolist()!r}"
            )
        if not np.issubdtype(row.dtype, np.integer):
            raise ValueError(
                f"Token ids must be integers. Received: {where} of dtype {row.dtype}"
            )
        bad = row[(row < 0) | (row >= vocab_size)]
        if bad.size:
            raise ValueError(
                f"Token ids must be in [0, vocab_size={vocab_size}). Received: "
                f"{where} holds {int(bad[0])}"
            )
        if row.size > max_len:
            raise ValueError(
                f"A prompt is longer than the model's max_len={max_len}. "
                f"Received: {where} of length {row.size}"
            )
    return [row.astype(np.int32) for row in rows], as_array


def _compiled_loop(model, signature):
    per_model = _COMPILED.setdefault(model, {})
    if signature not in per_model:
        _, total, prefill, sampler, k, _, jit_compile = signature
        loop = _make_loop(model, total, prefill, _make_sampler(sampler, k))
        per_model[signature] = tf.function(loop, jit_compile=jit_compile)
    return per_model[signature]


def _make_sampler(sampler, k):
    def greedy(logits, seed, temperature, p):
        return tf.argmax(logits, axis=-1, output_type=tf.int32)

    def top_k(logits, seed, temperature, p):
        values, indices = tf.math.top_k(logits, k=k)
        choice = _sample_categorical(values / temperature, seed)
        return tf.gather(indices, choice, batch_dims=1)

    def top_p(logits, seed, temperature, p):
        values, indices = tf.math.top_k(logits, k=logits.shape[-1])
        scaled = values / temperature
        before = tf.math.cumsum(tf.nn.softmax(scaled), axis=-1, exclusive=True)
        # The most likely token always stays (its mass before it is 0).
        kept = tf.where(before < p, scaled, tf.float32.min)
        choice = _sample_categorical(kept, seed)
        return tf.gather(indices, choice, batch_dims=1)

    return {"greedy": greedy, "top_k": top_k, "top_p": top_p}[sampler]


def _sample_categorical(logits, seed):
    """One draw per row from softmax(logits): the Gumbel-max trick.

    Row `i` draws its noise from the stateless stream `(seed[0], seed[1] +
    i * 2**20)`, so a row's draws depend on its index and the step, not on
    the batch size. Stateless uniform draws compile under XLA in every
    runtime (`stateless_categorical` does not in every one).
    """
    rows, vocab = logits.shape
    uniform = tf.stack(
        [
            tf.random.stateless_uniform(
                [vocab],
                seed + tf.constant([0, row * 2**20], seed.dtype),
                minval=1e-20,
                maxval=1.0,
                dtype=tf.float32,
            )
            for row in range(rows)
        ]
    )
    gumbel = -tf.math.log(-tf.math.log(uniform))
    return tf.argmax(logits + gumbel, axis=-1, output_type=tf.int32)


def _make_loop(model, total, prefill, sample):
    def loop(tokens, lengths, max_new_tokens, seed, temperature, p, stops):
        batch = tf.shape(tokens)[0]
        cache = model.init_cache(batch, total)
        _, cache = model.call_with_cache(tokens[:, :prefill], cache, 0)
        ends = lengths + max_new_tokens
        columns = tf.range(total)[tf.newaxis, :]

        def running(t, tokens, cache, stopped):
            finished = tf.logical_or(stopped, t >= ends)
            return tf.logical_and(t < tf.reduce_max(ends), ~tf.reduce_all(finished))

        def step(t, tokens, cache, stopped):
            # Feed position t - 1 (rewriting its cache entry: it may hold a
            # padded prompt's filler), predict position t.
            previous = tf.gather(tokens, t - 1, axis=1)
            logits, cache = model.call_with_cache(previous[:, tf.newaxis], cache, t - 1)
            step_seed = seed + tf.cast(tf.stack([0, t]), seed.dtype)
            sampled = sample(logits[:, -1, :], step_seed, temperature, p)
            in_prompt = t < lengths
            chosen = tf.where(in_prompt, tf.gather(tokens, t, axis=1), sampled)
            chosen = tf.where(stopped, previous, chosen)
            is_stop = tf.reduce_any(chosen[:, tf.newaxis] == stops[tf.newaxis], -1)
            stopped = tf.logical_or(stopped, tf.logical_and(~in_prompt, is_stop))
            tokens = tf.where(columns == t, chosen[:, tf.newaxis], tokens)
            return t + 1, tokens, cache, stopped

        start = tf.reduce_min(lengths)
        stopped = tf.zeros([batch], tf.bool)
        _, tokens, _, _ = tf.while_loop(
            running, step, (start, tokens, cache, stopped), maximum_iterations=total
        )
        return tokens

    return loop
