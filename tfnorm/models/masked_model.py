"""The functional model base both families share: a `(sequence,
padding_mask)` model that may also be called with the sequence alone."""

from __future__ import annotations

from tfnorm._keras import keras, padding_mask_like, register_model_class


class OptionalMaskModel(keras.Model):
    """A functional model of `(inputs, padding_mask)` that may be called
    with `inputs` alone; subclasses complete the mask in `call`."""

    #: The name of the first input (the second is `padding_mask`).
    main_input = None

    def _split_inputs(self, inputs):
        """`(main input, padding mask or None)` of a call's `inputs`: the main
        input alone, a list of it and optionally the mask, or a dict by the
        inputs' names."""
        main = self.main_input
        if isinstance(inputs, dict):
            if main not in inputs:
                raise ValueError(
                    f"{self.name} takes a dict with the keys '{main}' and, "
                    f"optionally, 'padding_mask'. Received: keys {sorted(inputs)}"
                )
            return inputs[main], inputs.get("padding_mask")
        if isinstance(inputs, (list, tuple)):
            if len(inputs) not in (1, 2):
                raise ValueError(
                    f"{self.name} takes {main} or [{main}, padding_mask]. "
                    f"Received: {len(inputs)} inputs"
                )
            return inputs[0], inputs[1] if len(inputs) == 2 else None
        return inputs, None

    # The two-input spec would reject the one-input form before `call` could
    # complete it; the layers inside check the shapes themselves.
    @property
    def input_spec(self):
        return None

    @input_spec.setter
    def input_spec(self, value):
        pass


@register_model_class
class MaskedSequenceModel(OptionalMaskModel):
    """A functional model of `(sequence, padding_mask)` that also takes `sequence` alone.

    Called with the sequence alone it fills in the padding mask itself: the
    implicit Keras mask of the sequence if it has one, else all ones. The
    implicit mask is passed on to the output in both forms.
    `tfnorm.decoder_layer` returns this class; `tfnorm.models.EncoderModel`
    is the encoder family's name for it.
    """

    main_input = "sequence"

    def _with_padding_mask(self, inputs, mask):
        """`(inputs, mask)` in the two-input form the graph was built for."""
        inputs, padding_mask = self._split_inputs(inputs)
        if padding_mask is not None:
            return [inputs, padding_mask], mask
        if isinstance(mask, (list, tuple)):
            mask = mask[0] if mask else None
        return [inputs, padding_mask_like(inputs, mask)], [mask, None]

    def call(self, inputs, training=None, mask=None):
        inputs, mask = self._with_padding_mask(inputs, mask)
        return super().call(inputs, training=training, mask=mask)

    def compute_output_spec(self, inputs, training=None, mask=None):
        # Keras 3 builds symbolic calls from here instead of `call`.
        inputs, mask = self._with_padding_mask(inputs, mask)
        return super().compute_output_spec(inputs, training=training, mask=mask)

    def compute_mask(self, inputs, mask=None):
        # Every block passes the sequence's implicit mask on unchanged.
        if isinstance(mask, (list, tuple)):
            return mask[0] if mask else None
        return mask
