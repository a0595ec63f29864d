"""Gemma 3 made bidirectional: the text encoder of EmbeddingGemma."""

import keras

from bertlayers.families.gemma3.layers import ScaledTokenEmbedding
from bertlayers.networks.encoder_base import EncoderBase, token_embedding_for


@keras.saving.register_keras_serializable(package="bertlayers")
class Gemma3Encoder(EncoderBase):
    """Gemma 3 (Gemma Team 2025) with bidirectional attention (`use_bidirectional_attention`,
    EmbeddingGemma): the token table scaled by sqrt(H), pre-norm blocks with Gemma's RMSNorm
    (1 + weight) before and after both sublayers, grouped-query rotary attention with query/key
    norms and its own score scale (`query_pre_attn_scalar`), sliding-window and global layers
    with their own rotary bases, GeGLU with tanh GELU, a final norm. Its LM head projects the final
    states onto the (tied) vocabulary directly."""

    architecture = "gemma3"
    pooling_position = "mean"

    def make_embeddings(self, config, dtype):
        return token_embedding_for(config, dtype, layer_class=ScaledTokenEmbedding)

    def lm_head_arguments(self):
        return {"transform": False}
