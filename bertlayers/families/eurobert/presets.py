"""EuroBERT's sizes (210M, 610M, 2.1B), as named presets (random weights)."""

from bertlayers.networks.encoder_config import EncoderConfig
from bertlayers.networks.presets import register_preset


def eurobert_config(num_layers, hidden_size, num_heads, intermediate_size, num_key_value_heads=None, **fields):
    """EuroBERT's architecture at a size: pre-norm RMSNorm (ε 1e-5), grouped-query rotary attention
    (θ 250,000), SwiGLU, no biases, 8,192 positions, Llama-3's 128,256-token vocabulary, an untied
    output projection, late pooling through GELU."""
    arguments = dict(
        architecture="eurobert",
        vocabulary_size=128256,
        num_layers=num_layers,
        hidden_size=hidden_size,
        num_heads=num_heads,
        num_key_value_heads=num_key_value_heads,
        intermediate_size=intermediate_size,
        activation="silu",
        pooler_activation="gelu",
        dropout=0.0,
        attention_dropout=0.0,
        max_sequence_length=8192,
        type_vocab_size=0,
        layer_norm_epsilon=1e-5,
        norm_first=True,
        learned_positions=False,
        attention="rotary",
        rotary_theta=250000.0,
        normalization="rms_norm",
        feed_forward="gated",
        use_bias=False,
        tie_word_embeddings=False,
        pooling_position="late",
    )
    arguments.update(fields)
    return EncoderConfig(**arguments)


register_preset("eurobert_210m", eurobert_config(12, 768, 12, 3072))
register_preset("eurobert_610m", eurobert_config(26, 1152, 18, 4096, num_key_value_heads=6))
register_preset("eurobert_2_1b", eurobert_config(32, 2304, 18, 6144, num_key_value_heads=6))
