"""Training and generation throughput of tfnorm's decoder against keras-hub's Llama.

Three tables, all from one process with the variants interleaved:

1. Training step, tokens/s: `tfnorm.build_decoder(preset="llama")` (4 layers,
   d_model 256, 4 heads, dff 1024, vocabulary 4096, sequence 128, batch 16)
   against keras-hub's `LlamaCausalLM` around a `LlamaBackbone` of the same
   sizes, built from its config (no download): the same layout (the test
   suite checks the parameter counts agree), the same untied output head, the
   same loss (sparse cross-entropy of the logits at position t against token
   t + 1) and Adam, inside one `tf.function` (graph mode, and with `--xla`
   also `jit_compile=True`). Keras 3 only: elsewhere (TensorFlow 2.9) the
   table says why it is missing.
2. Generation, tokens/s: greedy, 256 new tokens after a 32-token prompt, at
   batch 1 and 8. `tfnorm.generate` (KV cache, one XLA loop) against
   keras-hub's `LlamaCausalLM.generate` on the same weights (copied over;
   Keras 3, `preprocessor=None`, token ids in, `sampler="greedy"`, XLA) and
   against an uncached argmax loop that runs the full model over the whole
   288-position buffer for every new token (one XLA loop too; it makes only
   the first `--uncached-tokens` tokens, default 8, since each of its steps
   costs the same). A loop over a growing prefix would average about half
   the buffer per token, so this baseline is up to ~1.8x slower per token
   than the cheapest uncached loop: read "vs uncached" with that in mind.
   "same tokens" says
   whether each reference produced exactly tfnorm's tokens.
3. What the norms cost in the training step, both presets (`llama`, `gpt2`
   with their own dropout): the same decoder with `norm="rms"`,
   `norm="layer"` and an identity norm. A norm's cost is its step time
   minus the identity step's in the same round (median over every round);
   the table gives it as a share of that norm's step, and layer's cost over
   rms's.

The variants of one setting run interleaved (order alternating each round);
one repetition gives each variant's median over `--rounds` (training) or
`--gen-rounds` (generation) calls, and the tables give the median over
`--repeats` repetitions with the spread (min-max) of the ratios. Wall clock;
the load average is checked first (`--require-idle` refuses a busy
machine), and the header names the device: the first GPU TensorFlow sees,
else the CPU.

    python bench/decoder.py [--rounds 4] [--repeats 3] [--gen-rounds 2]
        [--xla] [--require-idle] [--markdown FILE] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import tfnorm  # noqa: E402
from bench import llama_reference  # noqa: E402
from bench.decoder_tables import NORMS, cost_row, generation_row, speed_row  # noqa: E402
from bench.encoder import IdentityNorm  # noqa: E402
from bench.machine import Run, add_report_arguments  # noqa: E402
from tfnorm._keras import keras, tf  # noqa: E402

# Every variant traces its own step: TensorFlow's retracing warning is
# expected here.
tf.get_logger().setLevel("ERROR")

LAYERS, D_MODEL, HEADS, DFF, VOCAB = 4, 256, 4, 1024, 4096
SEQ, BATCH = 128, 16
PROMPT, NEW_TOKENS, GEN_BATCHES = 32, 256, (1, 8)
EPSILON = 1e-6  # the llama preset's and keras-hub Llama's
PRESETS = ("llama", "gpt2")


def tfnorm_decoder(preset="llama", norm=None, max_len=None, width=None):
    """tfnorm's decoder at the bench's sizes, or with `width` = (d_model,
    heads, dff) in their place."""
    d_model, heads, dff = width or (D_MODEL, HEADS, DFF)
    options = {}
    if norm == "identity":
        options = {"norm": IdentityNorm, "epsilon": None}
    elif norm is not None:
        options = {"norm": norm}
    return tfnorm.build_decoder(
        LAYERS,
        d_model,
        heads,
        dff,
        vocab_size=VOCAB,
        max_len=max_len or SEQ,
        preset=preset,
        name=f"tfnorm_{preset}_{norm or 'default'}",
        **options,
    )


def keras_hub_llama():
    """keras-hub's `LlamaCausalLM` of the same sizes (see `bench/llama_reference.py`)."""
    return llama_reference.keras_hub_llama(LAYERS, D_MODEL, HEADS, DFF, VOCAB, EPSILON)


def tfnorm_forward(model, batch=None):
    ones = tf.ones((batch or BATCH, SEQ), tf.float32)
    return lambda ids: model([ids, ones], training=True)


def keras_hub_forward(causal_lm):
    ones = tf.ones((BATCH, SEQ), tf.int32)
    return lambda ids: causal_lm(
        {"token_ids": ids, "padding_mask": ones}, training=True
    )


def timed(function, sync=float):
    """`function` as a call that returns its wall-clock seconds."""

    def run():
        start = time.perf_counter()
        sync(function())
        return time.perf_counter() - start

    return run


def training_step(model, forward, jit_compile, batch=None):
    """One step on a fixed random batch (`batch` sequences, default
    `BATCH`), timed: forward, next-token sparse cross-entropy, backward,
    Adam update, in one `tf.function`."""
    optimizer = keras.optimizers.Adam(1e-4)
    loss_of = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    rng = np.random.default_rng(0)
    ids = tf.constant(rng.integers(0, VOCAB, (batch or BATCH, SEQ)), tf.int32)
    variables = model.trainable_variables

    @tf.function(jit_compile=jit_compile)
    def step():
        with tf.GradientTape() as tape:
            logits = forward(ids)
            loss = loss_of(ids[:, 1:], logits[:, :-1])
        grads = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(grads, variables))
        return loss

    return timed(step)


def norm_step(preset, norm, jit_compile, width=None, batch=None):
    """A timed training step of tfnorm's decoder with `norm` ("identity":
    none), at the bench's sizes or `width` = (d_model, heads, dff), on
    `batch` sequences (default `BATCH`)."""
    model = tfnorm_decoder(preset, norm, width=width)
    return training_step(model, tfnorm_forward(model, batch), jit_compile, batch)


def interleave(calls, args, rounds):
    """Per repetition, every call's seconds, round by round (the order
    alternating each round) after `args.warmup` calls of each."""
    order = list(calls)
    for _ in range(args.warmup):
        for name in order:
            calls[name]()
    repetitions = []
    for _ in range(args.repeats):
        times = {name: [] for name in order}
        for round_index in range(rounds):
            for name in order if round_index % 2 == 0 else reversed(order):
                times[name].append(calls[name]())
        repetitions.append(times)
    return repetitions


def uncached_greedy(model, total, steps):
    """Greedy decoding of `steps` tokens by the full model over the whole
    `total`-position buffer at every step: the loop a KV cache saves,
    compiled once with XLA. Each step costs the same, so its tokens/s does
    not depend on `steps`."""

    @tf.function(jit_compile=True)
    def loop(tokens):
        columns = tf.range(total)[tf.newaxis, :]

        def step(t, tokens):
            logits = model(tokens, training=False)
            chosen = tf.argmax(
                tf.gather(logits, t - 1, axis=1), axis=-1, output_type=tf.int32
            )
            return t + 1, tf.where(columns == t, chosen[:, tf.newaxis], tokens)

        end = PROMPT + steps
        _, tokens = tf.while_loop(lambda t, _: t < end, step, (PROMPT, tokens))
        return tokens

    return lambda tokens: np.array(loop(tf.constant(tokens)))


def generation_calls(model, causal_lm, batch, outputs, uncached_steps):
    """name -> timed call generating NEW_TOKENS greedy tokens for `batch`
    prompts (`uncached_steps` for the uncached loop); each call's tokens
    land in `outputs[name]`."""
    total = PROMPT + NEW_TOKENS
    prompts = np.random.default_rng(batch).integers(0, VOCAB, (batch, PROMPT))
    padded = np.zeros((batch, total), np.int32)
    padded[:, :PROMPT] = prompts
    functions = {"tfnorm": lambda: tfnorm.generate(model, prompts, NEW_TOKENS)}
    if causal_lm is not None:
        mask = np.arange(total)[np.newaxis, :].repeat(batch, 0) < PROMPT
        functions["keras-hub"] = lambda: causal_lm.generate(
            {"token_ids": padded, "padding_mask": mask}, stop_token_ids=None
        )["token_ids"]
    uncached = uncached_greedy(model, total, uncached_steps)
    functions["uncached"] = lambda: uncached(padded)

    def keep(name):
        return lambda tokens: outputs.__setitem__(name, np.asarray(tokens))

    return {name: timed(f, keep(name)) for name, f in functions.items()}


def measure_training(args, reference_missing):
    rows, raw = [], []
    modes = [("graph", False)] + ([("XLA", True)] if args.xla else [])
    for mode, jit_compile in modes:
        if reference_missing:
            rows.append(f"| {mode} | - | - | skipped: {reference_missing} |")
            continue
        keras.utils.set_random_seed(0)
        model, causal_lm = tfnorm_decoder(), keras_hub_llama()
        calls = {
            "tfnorm": training_step(model, tfnorm_forward(model), jit_compile),
            "keras-hub": training_step(
                causal_lm, keras_hub_forward(causal_lm), jit_compile
            ),
        }
        repetitions = interleave(calls, args, args.rounds)
        rows.append(speed_row(mode, repetitions, BATCH * SEQ, "keras-hub"))
        print(rows[-1], flush=True)
        raw.append({"mode": mode, "seconds": repetitions})
    return rows, raw


def measure_generation(args, reference_missing):
    rows, raw = [], []
    keras.utils.set_random_seed(0)
    model = tfnorm_decoder(max_len=PROMPT + NEW_TOKENS)
    causal_lm = None
    if not reference_missing:
        causal_lm = keras_hub_llama()
        llama_reference.copy_weights(model, causal_lm)
        causal_lm.compile(sampler="greedy", jit_compile=True)
    for batch in GEN_BATCHES:
        outputs = {}
        calls = generation_calls(model, causal_lm, batch, outputs, args.uncached_tokens)
        repetitions = interleave(calls, args, args.gen_rounds)
        # The uncached loop stops early: compare the tokens it wrote.
        end = PROMPT + args.uncached_tokens
        same = {
            name: bool(
                np.array_equal(outputs[name][:, :end], outputs["tfnorm"][:, :end])
            )
            for name in outputs
            if name != "tfnorm"
        }
        rows.append(
            generation_row(
                batch,
                repetitions,
                same,
                reference_missing,
                {
                    "tfnorm": NEW_TOKENS,
                    "keras-hub": NEW_TOKENS,
                    "uncached": args.uncached_tokens,
                },
            )
        )
        print(rows[-1], flush=True)
        raw.append({"batch": batch, "seconds": repetitions, "same_tokens": same})
    return rows, raw


def measure_norm_cost(args):
    rows, raw = [], []
    modes = [("graph", False)] + ([("XLA", True)] if args.xla else [])
    for preset in PRESETS:
        for mode, jit_compile in modes:
            keras.utils.set_random_seed(0)
            calls = {norm: norm_step(preset, norm, jit_compile) for norm in NORMS}
            repetitions = interleave(calls, args, args.rounds)
            rows.append(cost_row(preset, mode, repetitions))
            print(rows[-1], flush=True)
            raw.append({"preset": preset, "mode": mode, "seconds": repetitions})
    return rows, raw


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4, help="training steps")
    parser.add_argument("--gen-rounds", type=int, default=2, help="generate calls")
    parser.add_argument(
        "--uncached-tokens",
        type=int,
        default=8,
        help="new tokens of the uncached loop (its steps all cost the same)",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--xla", action="store_true", help="also time jit_compile")
    add_report_arguments(parser, "every time")
    args = parser.parse_args(argv)
    if min(args.repeats, args.rounds, args.gen_rounds, args.uncached_tokens) < 1:
        parser.error(
            "--repeats, --rounds, --gen-rounds and --uncached-tokens must be at least 1"
        )
    if args.uncached_tokens > NEW_TOKENS:
        parser.error(f"--uncached-tokens must be at most {NEW_TOKENS}")
    if args.warmup < 1:
        parser.error("--warmup must be at least 1 (the first call compiles)")
    reference_missing = llama_reference.keras_hub_missing()

    run = Run("wall", args.require_idle)
    print(run.header(), flush=True)
    method = (
        f"{LAYERS} layers, d_model {D_MODEL}, {HEADS} heads, dff {DFF}, "
        f"vocabulary {VOCAB}; training: seq {SEQ}, batch {BATCH}, {args.repeats} "
        f"repetitions x median of {args.rounds} interleaved steps; generation: "
        f"greedy, {NEW_TOKENS} new tokens after {PROMPT} (the uncached loop: "
        f"the first {args.uncached_tokens}), {args.repeats} "
        f"repetitions x median of {args.gen_rounds} interleaved calls; "
        f"{args.warmup} warm-up call(s) each"
    )
    print(method, flush=True)
    with tf.device(run.device):
        train_rows, train_raw = measure_training(args, reference_missing)
        gen_rows, gen_raw = measure_generation(args, reference_missing)
        cost_rows, cost_raw = measure_norm_cost(args)
    run.finish()
    table = "\n".join(
        [
            "Training step (llama preset), tokens/s; speed-up = keras-hub's "
            "step time / tfnorm's (min-max of the repetitions):",
            "",
            "| mode | tfnorm tokens/s | keras-hub tokens/s | tfnorm speed-up |",
            "| --- | ---: | ---: | ---: |",
            *train_rows,
            "",
            "Greedy generation, new tokens/s; speed-up = tfnorm.generate's "
            "tokens/s / the other's:",
            "",
            "| batch | tfnorm.generate | keras-hub generate | uncached loop | "
            "vs keras-hub | vs uncached | same tokens (keras-hub, uncached) |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | --- |",
            *gen_rows,
            "",
            "What the norms take of the training step (step time minus the "
            "identity-norm step's in the same round, median over every round), "
            "as a share of that step:",
            "",
            "| preset | mode | rms share | layer share | layer cost / rms cost |",
            "| --- | --- | ---: | ---: | ---: |",
            *cost_rows,
        ]
    )
    run.report(
        method,
        table,
        args.markdown,
        args.json,
        reference=reference_missing or "keras-hub LlamaCausalLM",
        training=train_raw,
        generation=gen_raw,
        norm_cost=cost_raw,
    )


if __name__ == "__main__":
    main()
