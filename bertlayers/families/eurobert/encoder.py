"""The EuroBERT encoder network (Boizard et al. 2025)."""

import keras

from bertlayers.networks.encoder_base import EncoderBase, token_embedding_for


@keras.saving.register_keras_serializable(package="bertlayers")
class EuroBertEncoder(EncoderBase):
    """EuroBERT: Llama's blocks without the causal mask. Token embedding alone (no norm, no
    segments), pre-norm blocks with RMSNorm, grouped-query rotary attention and SwiGLU, a final
    RMSNorm. Its masked-LM head projects the final states onto the vocabulary directly (no
    transform), and its classifier pools the first token, the mean, or late (`EncoderConfig.pooling_position`
    "first", "mean", "late") through dense → GELU."""

    architecture = "eurobert"

    def make_embeddings(self, config, dtype):
        return token_embedding_for(config, dtype)

    def lm_head_arguments(self):
        return {"transform": False}
