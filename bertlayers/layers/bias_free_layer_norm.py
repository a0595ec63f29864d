"""LayerNorm without its bias (β): ModernBERT's norms (`norm_bias` false)."""

import keras


@keras.saving.register_keras_serializable(package="bertlayers")
class BiasFreeLayerNorm(keras.layers.LayerNormalization):
    """y = γ ⊙ (x − mean(x)) / sqrt(var(x) + ε), with no learned shift.

    `keras.layers.LayerNormalization(center=False)` under a name of its own, so an encoder's
    norm kind is one registered class (`EncoderConfig(normalization="bias_free_layer_norm")`)
    built as `cls(epsilon=, dtype=, name=)` like every other. Dropping β removes a parameter
    the following projection's own offset makes redundant (and ModernBERT's linears have none).

    Call args:
      inputs: `[batch, ..., hidden]`, normalized over the last axis.

    Returns:
      `[batch, ..., hidden]`.
    """

    def __init__(self, **kwargs) -> None:
        kwargs["center"] = False
        super().__init__(**kwargs)
