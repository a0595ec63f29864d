"""EmbeddingGemma's size (300M), as a named preset (random weights)."""

from bertlayers.families.gemma3 import layers  # noqa: F401  (registers gemma_rms_norm)
from bertlayers.networks.encoder_config import EncoderConfig
from bertlayers.networks.presets import register_preset


def gemma3_config(
    num_layers,
    hidden_size,
    num_heads,
    intermediate_size,
    num_key_value_heads=1,
    head_dim=256,
    window=512,
    global_theta=1000000.0,
    local_theta=10000.0,
    layer_types=None,
    **fields,
):
    """Gemma 3's text architecture, bidirectional, at a size: sandwich RMSNorms (1 + weight, ε
    1e-6), grouped-query rotary attention over heads of `head_dim` with query/key norms and scores
    scaled by 1 / sqrt(256), five sliding-window layers (`window` tokens, θ `local_theta`) to a
    global one (θ `global_theta`), GeGLU (tanh GELU), no biases, embeddings scaled by sqrt(H),
    the 262,144-token vocabulary, tied."""
    if layer_types is None:  # transformers' default pattern: every sixth layer global
        layer_types = ["full_attention" if (depth + 1) % 6 == 0 else "sliding_attention" for depth in range(num_layers)]
    arguments = dict(
        architecture="gemma3",
        vocabulary_size=262144,
        num_layers=num_layers,
        hidden_size=hidden_size,
        num_heads=num_heads,
        num_key_value_heads=None if num_key_value_heads == num_heads else num_key_value_heads,
        head_dim=head_dim,
        intermediate_size=intermediate_size,
        activation="gelu_approximate",
        dropout=0.0,
        attention_dropout=0.0,
        max_sequence_length=2048,
        type_vocab_size=0,
        layer_norm_epsilon=1e-6,
        norm_first=True,
        learned_positions=False,
        attention="rotary",
        query_key_norm=True,
        attention_scale=256**-0.5,
        post_sublayer_norm=True,
        normalization="gemma_rms_norm",
        feed_forward="gated",
        use_bias=False,
        tie_word_embeddings=True,
        layer_types=tuple(layer_types),
        layer_kinds={
            "full_attention": {"rotary_theta": float(global_theta)},
            "sliding_attention": {"rotary_theta": float(local_theta), "attention_window": int(window)},
        },
    )
    arguments.update(fields)
    return EncoderConfig(**arguments)


register_preset("embeddinggemma_300m", gemma3_config(24, 768, 3, 1152))
