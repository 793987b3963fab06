"""Writes tests/data/hf/: tiny random Hugging Face checkpoints and their outputs.

Run in the reference venv (`make hf-reference` builds `.venv-hf`: CPU
PyTorch, transformers, safetensors, tokenizers; no TensorFlow):

    .venv-hf/bin/python tools/make_hf_fixtures.py [--out tests/data/hf]

Each checkpoint directory is what `save_pretrained(..., safe_serialization=
True)` writes (config.json, generation_config.json, model.safetensors or
shards), plus `reference.npz`: a right-padded batch (`token_ids`,
`padding_mask`), the model's float32 `logits` on it (BERT:
`last_hidden_state` and `mlm_logits`, with `segment_ids`), and for decoders a
greedy continuation (`prompt`, `generated`: `max_new_tokens` ids after it).
Models are 2 layers of width 32 with every norm weight and bias randomised
(a fresh model's norms are exactly 1 and 0, which hides a norm mistake).
`tokenizer/` is a byte-level BPE trained here, with `reference.json`: the
ids `transformers` gives some non-ASCII texts. Everything is seeded; the
output is small enough to commit (well under 2 MB).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil

import numpy as np
import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

VOCAB = 300
SEED = 45
BATCH = np.array(
    [
        [5, 17, 42, 99, 7, 250, 3, 64, 128, 11, 200, 31],
        [9, 8, 77, 140, 2, 0, 0, 0, 0, 0, 0, 0],
    ]
)
MASK = np.array([[1] * 12, [1] * 5 + [0] * 7])
PROMPT = np.array([[12, 99, 4, 230, 57, 6], [40, 41, 42, 43, 44, 45]])
NEW_TOKENS = 8
TEXTS = [
    "Hello, world! Grüße aus Köln.",
    "naïve café — déjà vu; 東京タワー and 😀 emoji.",
    "Ελληνικά, русский текст, עברית.",
]

SMALL = {
    "vocab_size": VOCAB,
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "max_position_embeddings": 64,
    "bos_token_id": 1,
    "eos_token_id": 2,
}
LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 16,
}


def decoders_to_make():
    """{name: (config, save options)} of the causal LMs."""
    llama = transformers.LlamaConfig
    return {
        "llama_gqa_llama3": (
            llama(
                **SMALL,
                num_key_value_heads=2,
                tie_word_embeddings=True,
                rms_norm_eps=1e-5,
                rope_theta=500000.0,
                rope_scaling=LLAMA3,
            ),
            {},
        ),
        "llama_linear_bias": (
            llama(
                **SMALL,
                attention_bias=True,
                mlp_bias=True,
                rope_scaling={"rope_type": "linear", "factor": 2.0},
            ),
            {},
        ),
        "llama_dynamic": (
            llama(
                **{**SMALL, "max_position_embeddings": 8},
                num_key_value_heads=1,
                rope_scaling={"rope_type": "dynamic", "factor": 2.0},
            ),
            {},
        ),
        "qwen2": (transformers.Qwen2Config(**SMALL, num_key_value_heads=2), {}),
        "mistral": (
            transformers.MistralConfig(
                **SMALL, num_key_value_heads=2, sliding_window=None
            ),
            {},
        ),
        "gpt2": (
            transformers.GPT2Config(
                vocab_size=VOCAB,
                n_embd=32,
                n_layer=2,
                n_head=4,
                n_positions=32,
                bos_token_id=1,
                eos_token_id=2,
            ),
            {},
        ),
        "llama_bf16": (
            llama(**SMALL, num_key_value_heads=2),
            {"dtype": torch.bfloat16},
        ),
        "llama_sharded": (
            llama(**SMALL, num_key_value_heads=2),
            {"max_shard_size": "40KB"},
        ),
    }


def randomise(model, generator):
    """Norm weights near 1 and every bias (norms' included) away from 0."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("bias"):
                parameter.copy_(0.1 * torch.randn(parameter.shape, generator=generator))
            elif "norm" in name or ".ln_" in name or "LayerNorm" in name:
                parameter.copy_(0.5 + torch.rand(parameter.shape, generator=generator))


def make_decoder(name, config, options, out):
    torch.manual_seed(SEED)
    model = transformers.AutoModelForCausalLM.from_config(
        config, attn_implementation="eager"
    )
    randomise(model, torch.Generator().manual_seed(SEED))
    model.eval()
    folder = os.path.join(out, name)
    dtype = options.get("dtype")
    if dtype is not None:
        # The reference runs the float32 model with the weights rounded to
        # bfloat16, the values the bfloat16 file holds.
        model.to(dtype).save_pretrained(folder, safe_serialization=True)
        model.to(torch.float32)
    else:
        model.save_pretrained(
            folder,
            safe_serialization=True,
            max_shard_size=options.get("max_shard_size", "50GB"),
        )
    write_decoder_reference(model, folder)


def write_decoder_reference(model, folder):
    with torch.no_grad():
        logits = model(
            input_ids=torch.tensor(BATCH), attention_mask=torch.tensor(MASK)
        ).logits.numpy()
        generated = model.generate(
            input_ids=torch.tensor(PROMPT),
            attention_mask=torch.ones(PROMPT.shape, dtype=torch.long),
            max_new_tokens=NEW_TOKENS,
            min_new_tokens=NEW_TOKENS,
            do_sample=False,
            pad_token_id=0,
        ).numpy()[:, PROMPT.shape[1] :]
    np.savez_compressed(
        os.path.join(folder, "reference.npz"),
        token_ids=BATCH.astype(np.int32),
        padding_mask=MASK.astype(np.int32),
        logits=logits.astype(np.float32),
        prompt=PROMPT.astype(np.int32),
        generated=generated.astype(np.int32),
    )


def make_bert(out):
    config = transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=48,
        max_position_embeddings=32,
        type_vocab_size=2,
        pad_token_id=0,
    )
    torch.manual_seed(SEED)
    model = transformers.BertForMaskedLM(config)
    randomise(model, torch.Generator().manual_seed(SEED))
    model.eval()
    folder = os.path.join(out, "bert")
    model.save_pretrained(folder, safe_serialization=True)
    segments = np.array([[0] * 6 + [1] * 6, [0] * 3 + [1] * 2 + [0] * 7])
    with torch.no_grad():
        result = model(
            input_ids=torch.tensor(BATCH),
            attention_mask=torch.tensor(MASK),
            token_type_ids=torch.tensor(segments),
            output_hidden_states=True,
        )
    np.savez_compressed(
        os.path.join(folder, "reference.npz"),
        token_ids=BATCH.astype(np.int32),
        segment_ids=segments.astype(np.int32),
        padding_mask=MASK.astype(np.int32),
        last_hidden_state=result.hidden_states[-1].numpy().astype(np.float32),
        mlm_logits=result.logits.numpy().astype(np.float32),
    )


def make_tokenizer(out):
    """A byte-level BPE of VOCAB ids trained on a few lines, saved and read
    back by transformers for the reference ids."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=["<pad>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    corpus = TEXTS * 3 + [
        "the quick brown fox jumps over the lazy dog " * 4,
        "tfnorm reads Hugging Face checkpoints into Keras models.",
    ]
    tokenizer.train_from_iterator(corpus, trainer)
    folder = os.path.join(out, "tokenizer")
    os.makedirs(folder, exist_ok=True)
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )
    fast.save_pretrained(folder)
    reloaded = transformers.AutoTokenizer.from_pretrained(folder)
    reference = {
        "texts": TEXTS,
        "ids": [reloaded(text)["input_ids"] for text in TEXTS],
        "decoded": [reloaded.decode(reloaded(text)["input_ids"]) for text in TEXTS],
        "special_ids": {
            "bos": reloaded.bos_token_id,
            "eos": reloaded.eos_token_id,
            "pad": reloaded.pad_token_id,
        },
    }
    with open(os.path.join(folder, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(reference, f, ensure_ascii=False, indent=1)
        f.write("\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join("tests", "data", "hf"))
    args = parser.parse_args()
    if os.path.isdir(args.out):
        shutil.rmtree(args.out)
    os.makedirs(args.out)
    torch.set_num_threads(1)
    for name, (config, options) in decoders_to_make().items():
        make_decoder(name, config, options, args.out)
    make_bert(args.out)
    make_tokenizer(args.out)
    with open(os.path.join(args.out, "VERSIONS.json"), "w") as handle:
        versions = {m.__name__: m.__version__ for m in (torch, transformers, np)}
        json.dump(versions, handle, indent=1, sort_keys=True)
        handle.write("\n")


if __name__ == "__main__":
    main()
