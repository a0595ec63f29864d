"""The EuroBERT encoder network (Boizard et al. 2025)."""

import keras

from bertlayers.layers.initializers import bert_initializer
from bertlayers.layers.token_embedding import TokenEmbedding
from bertlayers.networks.encoder_base import EncoderBase


@keras.saving.register_keras_serializable(package="bertlayers")
class EuroBertEncoder(EncoderBase):
    """EuroBERT: Llama's blocks without the causal mask. Token embedding alone (no norm, no
    segments), pre-norm blocks with RMSNorm, grouped-query rotary attention and SwiGLU, a final
    RMSNorm. Its masked-LM head projects the final states onto the vocabulary directly (no
    transform), and its classifier pools the first token, the mean, or late (`EncoderConfig.pooling`
    "first", "mean", "late") through dense → GELU."""

    architecture = "eurobert"

    def make_embeddings(self, config, dtype):
        return TokenEmbedding(
            vocabulary_size=config.vocabulary_size,
            embedding_size=config.hidden_size,
            max_sequence_length=config.max_sequence_length,
            type_vocab_size=config.type_vocab_size,
            dropout=config.dropout,
            initializer=bert_initializer(config.initializer_range),
            tie_weights=config.tie_word_embeddings,
            dtype=dtype,
            name="embeddings",
        )

    def lm_head_arguments(self):
        return {"transform": False}
