"""The GTE v1.5 encoder network (Li et al. 2023; Alibaba's `gte-*-en-v1.5`)."""

import keras

from bertlayers.layers.gated_feed_forward import GatedFeedForward
from bertlayers.networks.block_parts import register_feed_forward
from bertlayers.networks.encoder_base import EncoderBase


def _gated_output_bias(settings, intermediate_size, activation, kernel_initializer, dtype):
    """GTE's feed-forward: the gate and up projections without biases, the down one with."""
    return GatedFeedForward(
        intermediate_size,
        activation=activation,
        use_bias=False,
        output_bias=True,
        kernel_initializer=kernel_initializer,
        dtype=dtype,
        name="feed_forward",
    )


register_feed_forward("gated_output_bias", _gated_output_bias)


@keras.saving.register_keras_serializable(package="bertlayers")
class GteEncoder(EncoderBase):
    """GTE: BERT's post-norm encoder with rotary attention (biased projections), no learned
    positions, and a gated feed-forward whose down projection alone has a bias
    (`EncoderConfig(feed_forward="gated_output_bias")`). Its masked-LM head reads through GELU
    whatever the blocks' activation (transformers' `GteLMHead`)."""

    architecture = "gte"

    def lm_head_arguments(self):
        return {"activation": "gelu"}
