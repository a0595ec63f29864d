"""GTE v1.5's sizes (`gte-base-en-v1.5`, `gte-large-en-v1.5`), as named presets (random weights)."""

from bertlayers.networks.encoder_config import EncoderConfig
from bertlayers.networks.presets import register_preset


def gte_config(num_layers, hidden_size, num_heads, intermediate_size, **fields):
    """GTE's architecture at a size: post-norm, rotary attention with biases (θ 160,000), the gated
    feed-forward with a biased down projection, 8,192 positions, a 30,528-token WordPiece vocabulary."""
    arguments = dict(
        architecture="gte",
        vocabulary_size=30528,
        num_layers=num_layers,
        hidden_size=hidden_size,
        num_heads=num_heads,
        intermediate_size=intermediate_size,
        max_sequence_length=8192,
        type_vocab_size=0,
        learned_positions=False,
        attention="rotary",
        rotary_theta=160000.0,
        feed_forward="gated_output_bias",
    )
    arguments.update(fields)
    return EncoderConfig(**arguments)


register_preset("gte_base_en_v1_5", gte_config(12, 768, 12, 3072))
register_preset("gte_large_en_v1_5", gte_config(24, 1024, 16, 4096, type_vocab_size=2))
