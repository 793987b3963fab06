"""Logits and tokenizer ids of a checkpoint directory by transformers (run in .venv-hf).

    .venv-hf/bin/python tools/hf_reference_logits.py CHECKPOINT INPUT.npz OUTPUT.npz

INPUT.npz holds `token_ids` and `padding_mask`; OUTPUT.npz gets `logits`
(float32) from `AutoModelForCausalLM.from_pretrained(CHECKPOINT)`, and, when
the directory has a tokenizer and INPUT.npz a `texts` array, `ids_<i>`: the
ids `AutoTokenizer` gives text `i`. The live tests of tfnorm's Hugging Face
conversions (tests/models/decoder/test_hf_export.py) call it.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import torch
import transformers


def main(checkpoint, inputs, output):
    data = np.load(inputs)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        checkpoint, attn_implementation="eager"
    ).eval()
    with torch.no_grad():
        logits = model(
            input_ids=torch.tensor(data["token_ids"], dtype=torch.long),
            attention_mask=torch.tensor(data["padding_mask"], dtype=torch.long),
        ).logits.numpy()
    results = {"logits": logits.astype(np.float32)}
    if "texts" in data and os.path.exists(os.path.join(checkpoint, "tokenizer.json")):
        tokenizer = transformers.AutoTokenizer.from_pretrained(checkpoint)
        for index, text in enumerate(data["texts"]):
            results[f"ids_{index}"] = np.array(tokenizer(str(text))["input_ids"])
    np.savez(output, **results)


if __name__ == "__main__":
    main(*sys.argv[1:])
