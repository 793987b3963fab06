"""`tfnorm.generate` past the context, streaming, and the sampler vocabulary."""

from __future__ import annotations

import numpy as np
import pytest

import tfnorm
from tfnorm import generation
from tfnorm.generation import Sampler

VOCAB, MAX_LEN = 19, 8


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def model(request):
    # llama: rotary positions; gpt2: learned positions.
    return tfnorm.build_decoder(
        1, 16, 2, 32, vocab_size=VOCAB, max_len=MAX_LEN, preset=request.param,
        dropout_rate=0.0,
    )  # fmt: skip


def sliding_argmax(model, prompt, steps):
    tokens = list(prompt)
    for _ in range(steps):
        logits = model(np.array([tokens[-MAX_LEN:]]), training=False)
        tokens.append(int(np.argmax(np.asarray(logits)[0, -1])))
    return tokens


def test_greedy_past_the_context_slides_the_window(model):
    out = tfnorm.generate(model, np.array([[1, 2, 3]]), 3 * MAX_LEN, jit_compile=False)
    assert out[0].tolist() == sliding_argmax(model, [1, 2, 3], 3 * MAX_LEN)


def test_a_prompt_longer_than_the_context_is_cropped_with_a_warning(model):
    prompt = [(5 * i) % VOCAB for i in range(MAX_LEN + 4)]
    with pytest.warns(UserWarning, match=r"prompts\[0\] has 12 tokens.*last 8"):
        [out] = tfnorm.generate(model, [prompt], 5, jit_compile=False)
    assert out.tolist() == sliding_argmax(model, prompt, 5)


def test_a_callback_receives_each_token_in_order(model):
    seen = []
    out = tfnorm.generate(
        model, [[1, 2], [3, 4, 5]], 12, temperature=2.0, seed=3,
        callback=lambda row, token: seen.append((row, token)),
    )  # fmt: skip
    for row, prompt_length in ((0, 2), (1, 3)):
        assert [t for r, t in seen if r == row] == out[row][prompt_length:].tolist()
    plain = tfnorm.generate(model, [[1, 2], [3, 4, 5]], 12, temperature=2.0, seed=3)
    assert [o.tolist() for o in out] == [p.tolist() for p in plain]


def test_a_callback_returning_true_ends_its_row(model):
    [out] = tfnorm.generate(
        model, [[1]], 10, temperature=3.0, seed=1, callback=lambda row, t: True
    )
    assert len(out) == 2


class NeverBelow10(Sampler):
    def next_token(self, logits, seed):
        import tensorflow as tf

        low = tf.range(logits.shape[-1]) < 10
        return self.sample(tf.where(low, -1e9, logits), seed)


def test_a_sampler_of_ones_own_overrides_one_method(model):
    out = tfnorm.generate(
        model, np.array([[1, 2]] * 3), 6, sampler=NeverBelow10(5.0), seed=0
    )
    assert (out[:, 2:] >= 10).all()


def test_get_names_the_argument_of_an_unknown_sampler():
    with pytest.raises(ValueError, match=r"Received: sampler='beam'"):
        generation.get("beam")
    assert generation.get("top_p", p=0.5).p == 0.5


@pytest.mark.parametrize(
    "options, message",
    [
        ({"top_k": 0}, r"top_k=0"),
        (
            {"top_k": 3, "top_p": 0.5},
            r"`top_k` and `top_p` .*Received: top_k=3, top_p=0\.5",
        ),
        ({"sampler": Sampler(), "top_k": 3}, r"to the Sampler itself"),
    ],
)
def test_sampling_arguments_that_mean_nothing_are_refused(model, options, message):
    with pytest.raises(ValueError, match=message):
        tfnorm.generate(model, [[1]], 2, **options)


def test_temperature_0_is_greedy_for_every_sampler(model):
    greedy = tfnorm.generate(model, np.array([[4, 5]]), 5)
    for options in ({"top_k": 3}, {"top_p": 0.5}, {}):
        out = tfnorm.generate(
            model, np.array([[4, 5]]), 5, temperature=0, seed=9, **options
        )
        np.testing.assert_array_equal(out, greedy)
