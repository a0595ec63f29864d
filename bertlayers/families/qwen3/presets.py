"""Qwen3-Embedding's sizes (0.6B, 4B, 8B), as named presets (random weights)."""

from bertlayers.networks.encoder_config import EncoderConfig
from bertlayers.networks.presets import register_preset


def qwen3_config(num_layers, hidden_size, num_heads, intermediate_size, num_key_value_heads=8, **fields):
    """Qwen3's architecture at a size: causal pre-norm blocks with RMSNorm (ε 1e-6), grouped-query
    rotary attention (θ 1,000,000) over heads of 128 with their queries and keys RMS-normalized,
    SwiGLU, no biases, 32,768 positions, the embedders' 151,665-token vocabulary."""
    arguments = dict(
        architecture="qwen3",
        vocabulary_size=151665,
        num_layers=num_layers,
        hidden_size=hidden_size,
        num_heads=num_heads,
        num_key_value_heads=num_key_value_heads,
        head_dim=128,
        intermediate_size=intermediate_size,
        activation="silu",
        dropout=0.0,
        attention_dropout=0.0,
        max_sequence_length=32768,
        type_vocab_size=0,
        layer_norm_epsilon=1e-6,
        norm_first=True,
        causal=True,
        learned_positions=False,
        attention="rotary",
        rotary_theta=1000000.0,
        query_key_norm=True,
        normalization="rms_norm",
        feed_forward="gated",
        use_bias=False,
        tie_word_embeddings=True,
    )
    arguments.update(fields)
    return EncoderConfig(**arguments)


register_preset("qwen3_embedding_0_6b", qwen3_config(28, 1024, 16, 3072, vocabulary_size=151669))
register_preset("qwen3_embedding_4b", qwen3_config(36, 2560, 32, 9728))
register_preset("qwen3_embedding_8b", qwen3_config(36, 4096, 32, 12288, tie_word_embeddings=False))
