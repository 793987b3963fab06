"""`generate`: sample continuations from a causal language model with a KV cache.

When everything fits in the model's context and no callback streams the
tokens, the whole loop (prefill of the prompts, then one token per step) is
one compiled TensorFlow function per batch size and length bucket, so a
call does not retrace per token or per prompt length; XLA compiles it where
the runtime has XLA (every supported TensorFlow, on CPU too). Otherwise
`stepwise` runs one compiled step at a time.
"""

from __future__ import annotations

import warnings
import weakref

import numpy as np

from tfnorm._checks import check_positive_int, check_seed, is_int
from tfnorm._keras import tf
from tfnorm.generation import stepwise
from tfnorm.generation.greedy_sampler import GreedySampler
from tfnorm.generation.registry import get
from tfnorm.generation.sampler import Sampler
from tfnorm.generation.top_k_sampler import TopKSampler
from tfnorm.generation.top_p_sampler import TopPSampler

#: `top_k` of `sampler="top_k"` and `top_p` of `sampler="top_p"` when not given.
DEFAULT_TOP_K = 50
DEFAULT_TOP_P = 0.9

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
    sampler=None,
    temperature=None,
    top_k=None,
    top_p=None,
    seed=None,
    stop_token_ids=None,
    callback=None,
    jit_compile=True,
):
    """Continues each prompt with `max_new_tokens` tokens sampled from `model`.

    Each step feeds one token per sequence and reads the earlier positions'
    keys and values from a cache (`model.call_with_cache`), so a step costs
    one position, not the whole prefix. Prompts of different lengths share
    a batch: shorter ones are padded on the right and keep their own
    positions, so a prompt generates the same tokens alone or in any batch
    (up to float rounding, which can flip a near-tie).

    Past the context: a prompt plus `max_new_tokens` may exceed
    `model.max_len`. The cached path makes the tokens that fit; then each
    further token recomputes the last `max_len` tokens without cache (the
    window slides; rotary and learned positions alike). A prompt longer
    than `max_len` is cropped to its last `max_len` tokens for the model,
    with a warning (the whole prompt is returned).

    Choosing the next token (one vocabulary, as `TextGenerator` and `tfnorm
    generate --temperature --top-k --top-p`):

    ```
    temperature 0               the likeliest token (greedy), any sampler
    top_k=k                     sample from softmax(logits / temperature)
                                over the k largest (k >= 1; 0 is refused)
    top_p=p                     sample from the smallest set of tokens, most
                                likely first, whose probability reaches p
    temperature alone           sample from the whole softmax
    nothing                     greedy
    top_k with top_p            refused: they are two samplers, give one
    ```

    `sampler` may instead name one (`"greedy"`, `"random"`, `"top_k"`,
    `"top_p"`, taking `temperature` and `top_k`/`top_p`, defaults 50 and
    0.9) or be a `tfnorm.generation.Sampler` (then give its arguments to
    it, not here).

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
    >>> seen = []
    >>> _ = tfnorm.generate(model, [[1, 2]], 3, callback=lambda row, t: seen.append(t))
    >>> len(seen)
    3

    Args:
        model: a causal language model from `tfnorm.build_decoder` (anything
            with `init_cache`, `call_with_cache`, `vocab_size` and
            `max_len`, as `tfnorm.models.DecoderModel`).
        prompts: a 2-D int array `(batch, length)`, or a list of 1-D int
            sequences of any (nonzero) lengths.
        max_new_tokens: int >= 1, tokens to add to each prompt.
        sampler: None (chosen from `temperature`, `top_k`, `top_p`), a name
            or a `Sampler`. Defaults to `None`.
        temperature: float >= 0, divides the logits; 0 is greedy. Defaults
            to `None` (1.0 when sampling).
        top_k: int >= 1, or None. Defaults to `None`.
        top_p: float in (0, 1], or None. Defaults to `None`.
        seed: int or None (a fresh random seed). Defaults to `None`.
        stop_token_ids: ids that end a sequence (the stop token is kept),
            or None. Defaults to `None`.
        callback: None, or `callback(row, token_id)`, called for each new
            token as it is made, in order (streaming; the loop then runs a
            compiled step at a time). A true return value ends that row
            after this token (stop strings). Defaults to `None`.
        jit_compile: bool, compile with XLA. Defaults to `True`.

    Returns:
        For a 2-D array, an int array `(batch, length + max_new_tokens)`:
        after a stop, the stop token repeats. For a list, a list of 1-D int
        arrays, each its prompt and its new tokens up to and including a
        stop.

    Raises:
        ValueError: naming the argument and value, for an empty prompt, a
            token id outside `[0, vocab_size)`, `max_new_tokens` < 1, a bad
            or ambiguous sampling argument, or a `model` that is not a
            causal language model.
    """
    vocab_size, max_len = _check_model(model)
    max_new_tokens = check_positive_int("max_new_tokens", max_new_tokens)
    sampler = choose_sampler(sampler, temperature, top_k, top_p)
    seed = np.random.randint(2**31 - 1) if seed is None else check_seed("seed", seed)
    stops = _check_stop_ids(stop_token_ids, vocab_size)
    if callback is not None and not callable(callback):
        raise ValueError(
            f"`callback` must be callable. Received: callback={callback!r}"
        )
    rows, as_array = _check_prompts(prompts, vocab_size)
    _warn_cropped(rows, max_len)
    lengths = np.array([len(row) for row in rows], np.int32)
    longest = int(lengths.max())
    temperature = sampler.temperature or 1.0
    if callback is not None or longest + max_new_tokens > max_len:
        tokens = np.zeros((len(rows), longest + max_new_tokens), np.int32)
        for index, row in enumerate(rows):
            tokens[index, : len(row)] = row
        ends = stepwise.run(model, tokens, lengths, max_new_tokens, sampler, seed,
                            temperature, stops, callback, jit_compile)  # fmt: skip
        if as_array:
            return tokens
        return [tokens[i, : ends[i]] for i in range(len(rows))]
    out = _run_loop(model, rows, lengths, max_new_tokens, sampler, seed,
                    temperature, stops, jit_compile)  # fmt: skip
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


def choose_sampler(sampler, temperature=None, top_k=None, top_p=None):
    """The `Sampler` that `generate`'s `sampler`, `temperature`, `top_k` and
    `top_p` describe (see `generate`)."""
    given = {
        name: value
        for name, value in (
            ("temperature", temperature),
            ("top_k", top_k),
            ("top_p", top_p),
        )
        if value is not None
    }
    if isinstance(sampler, Sampler):
        if given:
            raise ValueError(
                "give the sampling arguments to the Sampler itself, not beside it. "
                f"Received: sampler={sampler!r}, "
                + ", ".join(f"{k}={v!r}" for k, v in given.items())
            )
        return sampler
    if top_k is not None and top_p is not None:
        raise ValueError(
            "`top_k` and `top_p` choose two different samplers; give one. "
            f"Received: top_k={top_k!r}, top_p={top_p!r}"
        )
    options = {} if temperature is None else {"temperature": temperature}
    if sampler is not None:
        name = sampler.lower() if isinstance(sampler, str) else sampler
        if name == "top_k":
            options["k"] = DEFAULT_TOP_K if top_k is None else top_k
        elif name == "top_p":
            options["p"] = DEFAULT_TOP_P if top_p is None else top_p
        elif top_k is not None or top_p is not None:
            raise ValueError(
                f"`top_k` and `top_p` go with sampler='top_k' or 'top_p'. Received: "
                f"sampler={sampler!r}, "
                + ", ".join(f"{k}={v!r}" for k, v in given.items())
            )
        return get(sampler, **options)
    if top_k is not None:
        return TopKSampler(top_k, **options)
    if top_p is not None:
        return TopPSampler(top_p, **options)
    if temperature is None:
        return GreedySampler()
    return Sampler(temperature)


def _warn_cropped(rows, max_len):
    for index, row in enumerate(rows):
        if len(row) > max_len:
            warnings.warn(
                f"prompts[{index}] has {len(row)} tokens, more than the model's "
                f"max_len={max_len}: the model sees only its last {max_len} tokens "
                "(the whole prompt is returned)",
                stacklevel=3,
            )


def _run_loop(model, rows, lengths, max_new_tokens, sampler, seed, temperature,
              stops, jit_compile):  # fmt: skip
    max_len = int(model.max_len)
    longest = int(lengths.max())
    total = min(max_len, _round_up(longest + max_new_tokens))
    prefill = min(total, _round_up(longest))
    tokens = np.zeros((len(rows), total), np.int32)
    for index, row in enumerate(rows):
        tokens[index, : len(row)] = row
    signature = (len(rows), total, prefill, sampler.compile_key(), len(stops),
                 bool(jit_compile))  # fmt: skip
    loop = _compiled_loop(model, signature, sampler)
    out = loop(
        tf.constant(tokens),
        tf.constant(lengths),
        tf.constant(max_new_tokens, tf.int32),
        tf.constant([seed, 0], tf.int64),
        tf.constant(temperature, tf.float32),
        tf.constant(stops, tf.int32),
    )
    return np.array(out)


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


def _check_prompts(prompts, vocab_size):
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
    return [row.astype(np.int32) for row in rows], as_array


def _compiled_loop(model, signature, sampler):
    per_model = _COMPILED.setdefault(model, {})
    if signature not in per_model:
        _, total, prefill, _, _, jit_compile = signature
        loop = _make_loop(model, total, prefill, sampler)
        per_model[signature] = tf.function(loop, jit_compile=jit_compile)
    return per_model[signature]


def _make_loop(model, total, prefill, sample):
    def loop(tokens, lengths, max_new_tokens, seed, temperature, stops):
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
            logits = tf.cast(logits[:, -1, :], tf.float32)
            sampled = sample(logits, step_seed, temperature)
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
