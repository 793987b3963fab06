from __future__ import annotations

import re

import numpy as np
import pytest

import tfnorm
from tfnorm import generation
from tfnorm._keras import keras

VOCAB, MAX_LEN = 23, 48
# The sampling argument of each sampler that keeps every token.
BOUNDLESS = {"top_k": {"top_k": VOCAB}, "top_p": {"top_p": 1.0}}


def make_model(preset):
    keras.utils.set_random_seed(1)
    built = tfnorm.build_decoder(
        2,
        16,
        4,
        32,
        vocab_size=VOCAB,
        max_len=MAX_LEN,
        preset=preset,
        num_kv_heads=2,
    )
    # Larger weights than at initialisation: peaked, varied predictions.
    rng = np.random.default_rng(0)
    built.set_weights(
        [
            w + 0.3 * rng.standard_normal(w.shape).astype(w.dtype)
            for w in built.get_weights()
        ]
    )
    return built


# Compiling a generation loop takes seconds: most tests share one model and
# one batch shape; the gpt2 preset is checked where its layers differ.
_MODELS = {}


@pytest.fixture(params=["llama"])
def model(request):
    if request.param not in _MODELS:
        _MODELS[request.param] = make_model(request.param)
    return _MODELS[request.param]


@pytest.fixture(params=["llama", "gpt2"])
def each_preset(request):
    if request.param not in _MODELS:
        _MODELS[request.param] = make_model(request.param)
    return _MODELS[request.param]


def prompts(batch, length, seed=0):
    return np.random.default_rng(seed).integers(0, VOCAB, (batch, length))


def argmax_loop(model, prompt, steps):
    """Greedy decoding by re-running the whole model on the whole prefix."""
    sequence = np.asarray(prompt)[np.newaxis]
    for _ in range(steps):
        logits = np.asarray(model(sequence))
        sequence = np.concatenate([sequence, [[np.argmax(logits[0, -1])]]], 1)
    return sequence[0]


def test_greedy_with_the_cache_equals_an_argmax_loop(each_preset):
    model = each_preset
    batch = prompts(2, 5, seed=1)
    out = tfnorm.generate(model, batch, 7)
    assert out.shape == (2, 12)
    for row, prompt in zip(out, batch):
        np.testing.assert_array_equal(row, argmax_loop(model, prompt, 7))


def test_without_xla_greedy_gives_the_same_tokens(model):
    batch = prompts(2, 4, seed=2)
    np.testing.assert_array_equal(
        tfnorm.generate(model, batch, 6, jit_compile=False),
        tfnorm.generate(model, batch, 6),
    )


def test_a_prompt_generates_the_same_tokens_alone_or_in_a_ragged_batch(each_preset):
    model = each_preset
    rng = np.random.default_rng(3)
    ragged = [rng.integers(0, VOCAB, n) for n in (3, 7, 1, 5)]
    together = tfnorm.generate(model, ragged, 6)
    assert isinstance(together, list) and len(together) == 4
    for prompt, row in zip(ragged, together):
        assert len(row) == len(prompt) + 6
        np.testing.assert_array_equal(row[: len(prompt)], prompt)
        np.testing.assert_array_equal(row, tfnorm.generate(model, [prompt], 6)[0])
        np.testing.assert_array_equal(row, argmax_loop(model, prompt, 6))


@pytest.mark.parametrize("sampler", ["top_k", "top_p"])
def test_a_sampled_prompt_draws_the_same_as_the_first_row_of_any_batch(model, sampler):
    rng = np.random.default_rng(9)
    first = rng.integers(0, VOCAB, 3)
    options = {"sampler": sampler, "temperature": 5.0, "seed": 4, **BOUNDLESS[sampler]}
    alone = tfnorm.generate(model, [first], 8, **options)[0]
    batch = tfnorm.generate(
        model, [first, first, rng.integers(0, VOCAB, 6)], 8, **options
    )
    np.testing.assert_array_equal(batch[0], alone)
    # Equal prompts in one batch draw different continuations.
    assert not np.array_equal(batch[0], batch[1])


@pytest.mark.parametrize("sampler", ["top_k", "top_p"])
def test_the_same_seed_gives_the_same_tokens(model, sampler):
    batch = prompts(3, 4, seed=5)
    options = {"sampler": sampler, "temperature": 5.0, **BOUNDLESS[sampler]}
    first = tfnorm.generate(model, batch, 10, seed=7, **options)
    np.testing.assert_array_equal(
        first, tfnorm.generate(model, batch, 10, seed=7, **options)
    )
    other = tfnorm.generate(model, batch, 10, seed=8, **options)
    assert not np.array_equal(first, other)
    assert ((first >= 0) & (first < VOCAB)).all()


def test_top_k_samples_only_among_the_k_most_likely(model):
    batch = prompts(4, 3, seed=6)
    greedy = tfnorm.generate(model, batch, 6)
    np.testing.assert_array_equal(
        tfnorm.generate(model, batch, 6, sampler="top_k", top_k=1, seed=1), greedy
    )
    # With k=3 at a high temperature, every first new token is among the 3
    # most likely after the prompt.
    logits = np.asarray(model(batch))[:, -1]
    allowed = np.argsort(-logits, axis=-1)[:, :3]
    for seed in range(5):
        out = tfnorm.generate(
            model, batch, 1, sampler="top_k", top_k=3, temperature=10.0, seed=seed
        )
        assert all(out[i, -1] in allowed[i] for i in range(4))


def test_top_p_keeps_the_nucleus(model):
    batch = prompts(4, 3, seed=7)
    greedy = tfnorm.generate(model, batch, 6)
    np.testing.assert_array_equal(
        tfnorm.generate(model, batch, 6, sampler="top_p", top_p=1e-6, seed=2), greedy
    )
    logits = np.asarray(model(batch))[:, -1].astype(np.float64)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    order = np.argsort(-probs, axis=-1)
    for seed in range(5):
        out = tfnorm.generate(model, batch, 1, sampler="top_p", top_p=0.6, seed=seed)
        for i in range(4):
            before = np.cumsum(probs[i, order[i]]) - probs[i, order[i]]
            nucleus = order[i][before < 0.6]
            assert out[i, -1] in nucleus


def test_stop_tokens_end_a_sequence(model):
    batch = prompts(2, 4, seed=8)
    free = tfnorm.generate(model, batch, 8)
    stop = int(free[0, 6])  # the third new token of the first row
    out = tfnorm.generate(model, batch, 8, stop_token_ids=[stop])
    first_stop = 4 + int(np.flatnonzero(free[0, 4:] == stop)[0])
    np.testing.assert_array_equal(out[0, : first_stop + 1], free[0, : first_stop + 1])
    assert (out[0, first_stop:] == stop).all()
    listed = tfnorm.generate(model, list(batch), 8, stop_token_ids=stop)
    np.testing.assert_array_equal(listed[0], free[0, : first_stop + 1])


def test_compiled_once_per_batch_size_and_length_bucket(model):
    generation.generator._COMPILED.pop(model, None)
    for length in (3, 5, 9):
        tfnorm.generate(model, prompts(2, length, seed=length), 4)
    compiled = generation.generator._COMPILED[model]
    assert len(compiled) == 1
    (loop,) = compiled.values()
    assert loop.experimental_get_tracing_count() == 1


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda m: tfnorm.generate(m, [[1, 2], []], 3), "prompts[1]=[]"),
        (lambda m: tfnorm.generate(m, [[1, VOCAB]], 3), f"prompts[0] holds {VOCAB}"),
        (lambda m: tfnorm.generate(m, [[-1, 2]], 3), "prompts[0] holds -1"),
        (lambda m: tfnorm.generate(m, [[1.5, 2]], 3), "prompts[0] of dtype float64"),
        (lambda m: tfnorm.generate(m, [[1, 2]], 0), "max_new_tokens=0"),
        (lambda m: tfnorm.generate(m, np.ones(3, int), 2), "shape (3,)"),
        (lambda m: tfnorm.generate(m, [[1]], 2, sampler="beam"), "sampler='beam'"),
        (lambda m: tfnorm.generate(m, [[1]], 2, top_k=0), "top_k=0"),
        (lambda m: tfnorm.generate(m, [[1]], 2, top_p=0.0), "top_p=0.0"),
        (lambda m: tfnorm.generate(m, [[1]], 2, temperature=-1), "temperature=-1"),
        (
            lambda m: tfnorm.generate(m, [[1]], 2, top_k=2, top_p=0.5),
            "top_k=2, top_p=0.5",
        ),
        (lambda m: tfnorm.generate(m, [[1]], 2, seed=-3), "seed=-3"),
        (
            lambda m: tfnorm.generate(m, [[1]], 2, stop_token_ids=[VOCAB]),
            f"stop_token_ids=[{VOCAB}]",
        ),
    ],
)
def test_bad_input_raises_one_clear_error(model, call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call(model)


def test_a_model_that_is_not_a_causal_language_model_is_rejected():
    encoder = tfnorm.build_encoder(1, 16, 4, 32)
    with pytest.raises(ValueError, match=r"Received: model=<\w+ 'encoder'>"):
        tfnorm.generate(encoder, [[1, 2]], 3)
