"""`DecoderModel`: a functional causal language model that generation can step through."""

from __future__ import annotations

import re

from tfnorm._keras import padding_mask_like, register_model_class
from tfnorm.models.masked_model import OptionalMaskModel

_BLOCK_NAME = re.compile(r"block_(\d+)$")


@register_model_class
class DecoderModel(OptionalMaskModel):
    """A functional model from token ids (and a padding mask) to next-token logits.

    `tfnorm.build_decoder` returns this class. It is an ordinary functional
    `keras.Model` with the inputs `token_ids` `(batch, seq)` and
    `padding_mask` `(batch, seq)` (1 for real tokens, 0 for padding) and the
    output `(batch, seq, vocab_size)` float32 logits, where position `t`
    predicts token `t + 1`. Called with the token ids alone it treats every
    position as real.

    For generation (`tfnorm.generate`) it also runs step by step with a
    key/value cache, through its layers by name (`token_embedding`,
    `position_embedding` if learned positions, `block_0 ...`, `final_norm`
    if any, and `lm_head` unless the head is tied to `token_embedding`):

    ```python
    cache = model.init_cache(batch_size, length)
    logits, cache = model.call_with_cache(token_ids, cache, cache_index)
    ```

    `max_len` (the longest sequence it takes) is saved with the model.

    Example:

    >>> import numpy as np, tfnorm
    >>> model = tfnorm.build_decoder(2, 32, 4, 64, vocab_size=100, max_len=16)
    >>> model(np.array([[5, 8, 13]])).shape
    TensorShape([1, 3, 100])
    """

    main_input = "token_ids"

    def _with_padding_mask(self, inputs):
        token_ids, padding_mask = self._split_inputs(inputs)
        if padding_mask is None:
            padding_mask = padding_mask_like(token_ids)
        return [token_ids, padding_mask]

    def call(self, inputs, training=None, mask=None):
        return super().call(self._with_padding_mask(inputs), training=training)

    def compute_output_spec(self, inputs, training=None, mask=None):
        # Keras 3 builds symbolic calls from here instead of `call`.
        return super().compute_output_spec(
            self._with_padding_mask(inputs), training=training
        )

    def get_config(self):
        config = super().get_config()
        config["max_len"] = getattr(self, "max_len", None)
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        max_len = config.pop("max_len", None)
        model = super().from_config(config, custom_objects=custom_objects)
        model.max_len = max_len
        return model

    # -- generation -------------------------------------------------------

    @property
    def blocks(self):
        """The decoder blocks, in order."""
        found = []
        for layer in self.layers:
            match = _BLOCK_NAME.match(layer.name)
            if match:
                found.append((int(match.group(1)), layer))
        return [layer for _, layer in sorted(found, key=lambda pair: pair[0])]

    @property
    def vocab_size(self):
        return self.get_layer("token_embedding").vocab_size

    def optional_layer(self, name):
        """The layer named `name` (`position_embedding`, `final_norm`,
        `lm_head`, which a layout may leave out), or None."""
        return next((layer for layer in self.layers if layer.name == name), None)

    def init_cache(self, batch_size, length):
        """An empty cache for `length` positions: one `(keys, values)` pair per block."""
        return tuple(block.init_cache(batch_size, length) for block in self.blocks)

    def call_with_cache(self, token_ids, cache, cache_index, padding_mask=None):
        """Logits of `token_ids` at positions `cache_index, ...`, and the updated cache.

        Args:
            token_ids: int `(batch, t)`, the tokens at positions
                `cache_index` to `cache_index + t - 1`.
            cache: from `init_cache` or an earlier call.
            cache_index: int or scalar int tensor.
            padding_mask: optional `(batch, cache length)`, nonzero for real
                tokens.

        Returns:
            `(logits, cache)`: float32 `(batch, t, vocab_size)` and the cache
            with these positions' keys and values written in.
        """
        embedding = self.get_layer("token_embedding")
        x = embedding(token_ids)
        positions = self.optional_layer("position_embedding")
        if positions is not None:
            x = positions(x, start_index=cache_index)
        new_cache = []
        for block, block_cache in zip(self.blocks, cache):
            x, block_cache = block.call_with_cache(
                x, block_cache, cache_index, padding_mask
            )
            new_cache.append(block_cache)
        final_norm = self.optional_layer("final_norm")
        if final_norm is not None:
            x = final_norm(x)
        head = self.optional_layer("lm_head")
        logits = embedding(x, reverse=True) if head is None else head(x)
        return logits, tuple(new_cache)
