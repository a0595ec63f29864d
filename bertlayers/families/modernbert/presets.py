"""ModernBERT's, mmBERT's and the Ettin encoders' sizes, as named presets (random weights)."""

from bertlayers.networks.encoder_config import EncoderConfig
from bertlayers.networks.presets import register_preset

GLOBAL_EVERY = 3  # full attention in every third layer (transformers' `global_attn_every_n_layers`)


def modernbert_config(
    num_layers,
    hidden_size,
    num_heads,
    intermediate_size,
    vocabulary_size=50368,
    global_theta=160000.0,
    local_theta=10000.0,
    window=128,
    max_sequence_length=8192,
    **fields,
):
    """ModernBERT's architecture at a size: pre-norm, bias-free LayerNorm (ε 1e-5), GeGLU of
    `intermediate_size` per half, no biases, no learned positions or segments, rotary attention
    with `global_theta` in the full-attention layers (0, 3, 6, ...) and `local_theta` with a
    `window`-token sliding window in the others."""
    layer_types = tuple(
        "full_attention" if depth % GLOBAL_EVERY == 0 else "sliding_attention" for depth in range(num_layers)
    )
    arguments = dict(
        architecture="modernbert",
        vocabulary_size=vocabulary_size,
        num_layers=num_layers,
        hidden_size=hidden_size,
        num_heads=num_heads,
        intermediate_size=intermediate_size,
        activation="gelu",
        pooler_activation="gelu",
        dropout=0.0,
        attention_dropout=0.0,
        max_sequence_length=max_sequence_length,
        type_vocab_size=0,
        layer_norm_epsilon=1e-5,
        norm_first=True,
        learned_positions=False,
        attention="rotary",
        normalization="bias_free_layer_norm",
        feed_forward="gated",
        use_bias=False,
        layer_types=layer_types,
        layer_kinds={
            "full_attention": {"rotary_theta": global_theta},
            "sliding_attention": {"rotary_theta": local_theta, "attention_window": window},
        },
    )
    arguments.update(fields)
    return EncoderConfig(**arguments)


# name: (layers, hidden, heads, GeGLU half width, other fields)
_SIZES = {
    "modernbert_base": (22, 768, 12, 1152, {}),
    "modernbert_large": (28, 1024, 16, 2624, {}),
    "mmbert_small": (22, 384, 6, 1152, {"vocabulary_size": 256000, "local_theta": 160000.0}),
    "mmbert_base": (22, 768, 12, 1152, {"vocabulary_size": 256000, "local_theta": 160000.0}),
    "ettin_encoder_17m": (7, 256, 4, 384, {}),
    "ettin_encoder_32m": (10, 384, 6, 576, {}),
    "ettin_encoder_68m": (19, 512, 8, 768, {}),
    "ettin_encoder_150m": (22, 768, 12, 1152, {}),
    "ettin_encoder_400m": (28, 1024, 16, 2624, {}),
    "ettin_encoder_1b": (28, 1792, 28, 3840, {}),
}
for _name, (_layers, _hidden, _heads, _inner, _fields) in _SIZES.items():
    register_preset(_name, modernbert_config(_layers, _hidden, _heads, _inner, **_fields))
