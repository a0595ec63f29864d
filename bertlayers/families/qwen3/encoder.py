"""The Qwen3 decoder read as an encoder (Qwen3-Embedding, Qwen3-Reranker)."""

import keras

from bertlayers.networks.encoder_base import EncoderBase, token_embedding_for


@keras.saving.register_keras_serializable(package="bertlayers")
class Qwen3Encoder(EncoderBase):
    """Qwen3 (Yang et al. 2025): Llama's pre-norm blocks (RMSNorm, grouped-query rotary
    attention, SwiGLU) with an RMSNorm over each head's queries and keys, heads of their own
    width (`head_dim`: 128 where H / heads is 64), causal attention and a final RMSNorm. The token
    table alone embeds (no norm, no segments, no positions). Its summary is the last real token
    (the embedders pool there and pad on the left); its LM head projects the final states onto the
    vocabulary directly."""

    architecture = "qwen3"
    pooling_position = "last"

    def make_embeddings(self, config, dtype):
        return token_embedding_for(config, dtype)

    def lm_head_arguments(self):
        return {"transform": False}
