"""The parts an encoder's blocks are built from, each kind in one table chosen by name.

`EncoderConfig.attention`, `.normalization` and `.feed_forward` (per layer, through
`layer_types`) name an entry here. A family or a user adds a kind by registering it, and the
encoder core builds it without knowing it: a rotary attention, RMSNorm, GeGLU.

  attention:      factory(settings, num_heads, key_dim, dropout, kernel_initializer, dtype)
                  -> an attention layer (`TransformerEncoderBlock(attention_layer=)`'s contract),
                  or None for the block's own `MultiHeadAttention`.
  normalization:  a layer class built as cls(epsilon=, dtype=, name=), or None for LayerNorm.
  feed_forward:   factory(settings, intermediate_size, activation, kernel_initializer, dtype)
                  -> a position-wise layer, or None for the block's two dense layers.
"""

from collections.abc import Callable

import keras

from bertlayers.layers.bias_free_layer_norm import BiasFreeLayerNorm
from bertlayers.layers.gated_feed_forward import GatedFeedForward
from bertlayers.layers.initializers import bert_initializer
from bertlayers.layers.mixture_of_experts import MixtureOfExperts
from bertlayers.layers.multi_head_attention import MultiHeadAttention
from bertlayers.layers.registered import registered_name
from bertlayers.layers.rotary_attention import RotaryAttention
from bertlayers.layers.transformer_encoder_block import TransformerEncoderBlock

ATTENTIONS = {}
NORMALIZATIONS = {}
FEED_FORWARDS = {}


def register_attention(name: str, factory: Callable) -> None:
    """Make `EncoderConfig(attention=name)` build its attention with `factory` (see the module doc)."""
    ATTENTIONS[name] = factory


def register_normalization(name: str, layer_class: type | None) -> None:
    """Make `EncoderConfig(normalization=name)` build its norms as `layer_class` (a registered layer class)."""
    NORMALIZATIONS[name] = layer_class


def register_feed_forward(name: str, factory: Callable) -> None:
    """Make `EncoderConfig(feed_forward=name)` build its feed-forward network with `factory`."""
    FEED_FORWARDS[name] = factory


def _multi_head(settings, num_heads, key_dim, dropout, kernel_initializer, dtype):
    if settings.rotary_theta is not None:
        raise ValueError(
            f"attention 'multi_head' has no rotary positions (rotary_theta={settings.rotary_theta}); name an "
            f"attention that rotates (registered: {', '.join(sorted(ATTENTIONS))})."
        )
    if settings.use_bias and settings.num_key_value_heads is None and not _query_key_norms(settings):
        return None  # the block's own, built and named as in every checkpoint mapping
    return MultiHeadAttention(
        num_heads,
        key_dim,
        dropout=dropout,
        use_bias=settings.use_bias,
        num_key_value_heads=settings.num_key_value_heads,
        **_query_key_norms(settings),
        kernel_initializer=kernel_initializer,
        dtype=dtype,
        name="self_attention",
    )


def _query_key_norms(settings):
    """The attention's query/key norm arguments: none, or the layer's norm kind (RMSNorm where
    the layer's is LayerNorm) at the encoder's epsilon; and the scores' scale where it is set."""
    arguments = {"scale": settings.attention_scale} if settings.attention_scale is not None else {}
    if not settings.query_key_norm:
        return arguments
    normalization = _chosen(NORMALIZATIONS, "normalization", settings.normalization)
    return {
        **arguments,
        "query_key_norm_epsilon": settings.layer_norm_epsilon,
        "query_key_normalization": registered_name(normalization) if normalization is not None else None,
    }


def _rotary(settings, num_heads, key_dim, dropout, kernel_initializer, dtype):
    if settings.rotary_theta is None:
        raise ValueError("attention 'rotary' needs its base: set EncoderConfig.rotary_theta (10000.0 in RoFormer).")
    return RotaryAttention(
        num_heads,
        key_dim,
        rotary_theta=settings.rotary_theta,
        num_key_value_heads=settings.num_key_value_heads,
        **_query_key_norms(settings),
        dropout=dropout,
        use_bias=settings.use_bias,
        kernel_initializer=kernel_initializer,
        dtype=dtype,
        name="self_attention",
    )


def _gated(settings, intermediate_size, activation, kernel_initializer, dtype):
    return GatedFeedForward(
        intermediate_size,
        activation=activation,
        use_bias=settings.use_bias,
        kernel_initializer=kernel_initializer,
        dtype=dtype,
        name="feed_forward",
    )


def _mixture_of_experts(settings, intermediate_size, activation, kernel_initializer, dtype):
    return MixtureOfExperts(
        settings.num_experts,
        intermediate_size,
        experts_per_token=settings.experts_per_token,
        activation=activation,
        shared_intermediate_size=settings.shared_expert_size,
        aux_loss_weight=settings.router_aux_loss_weight,
        use_bias=settings.use_bias,
        kernel_initializer=kernel_initializer,
        dtype=dtype,
        name="feed_forward",
    )


register_attention("multi_head", _multi_head)
register_attention("rotary", _rotary)
register_normalization("layer_norm", None)
register_normalization("rms_norm", keras.layers.RMSNormalization)
register_normalization("bias_free_layer_norm", BiasFreeLayerNorm)
register_feed_forward("dense", lambda settings, *args: None)
register_feed_forward("gated", _gated)
register_feed_forward("moe", _mixture_of_experts)


def _chosen(table, what, name):
    if name not in table:
        raise ValueError(
            f"EncoderConfig.{what} {name!r} is not a registered kind; registered: {', '.join(sorted(table))}."
        )
    return table[name]


def block_arguments(config):
    """The config's fields every block takes (sizes, activation, dropout, norm epsilon, initializer)."""
    return dict(
        num_heads=config.num_heads,
        intermediate_size=config.intermediate_size,
        activation=config.activation,
        dropout=config.dropout,
        attention_dropout=config.attention_dropout,
        layer_norm_epsilon=config.layer_norm_epsilon,
        kernel_initializer=bert_initializer(config.initializer_range),
    )


def plugged_parts(config, settings, kernel_initializer, dtype, attention=True):
    """The block arguments `settings` changes from the block's defaults: {} for BERT's block, so a
    block class of the user's that knows none of them still takes the default settings.
    `attention` False: the caller brings the attention layer (none is built from the table)."""
    if attention:
        attention = _chosen(ATTENTIONS, "attention", settings.attention)(
            settings, config.num_heads, config.head_size, config.attention_dropout, kernel_initializer, dtype
        )
    feed_forward = _chosen(FEED_FORWARDS, "feed_forward", settings.feed_forward)(
        settings, config.intermediate_size, config.activation, kernel_initializer, dtype
    )
    normalization = _chosen(NORMALIZATIONS, "normalization", settings.normalization)
    parts = {
        "attention_layer": attention,
        "feed_forward_layer": feed_forward,
        "attention_window": settings.attention_window,
        "normalization": registered_name(normalization) if normalization is not None else None,
    }
    parts = {key: value for key, value in parts.items() if value is not None}
    if not settings.use_bias:
        parts["use_bias"] = False
    if config.post_sublayer_norm:
        parts["post_sublayer_norm"] = True
    return parts


def build_block(config, settings, dtype, name, block_class=None, block_config=None):
    """The block of one layer: `block_class` (default `TransformerEncoderBlock`) from the config's
    sizes, the layer's `settings` and `block_config` (which wins: an `attention_layer` there is
    the layer's attention, and the table's for `settings.attention` is not built)."""
    block_config = block_config or {}
    # One initializer for the block (each made draws the global seed: one more per block would
    # change every later layer's initial weights).
    arguments = block_arguments(config)
    parts = plugged_parts(
        config, settings, arguments["kernel_initializer"], dtype, attention="attention_layer" not in block_config
    )
    arguments.update(norm_first=settings.norm_first, **parts)
    arguments.update(block_config)
    return (block_class or TransformerEncoderBlock)(**arguments, dtype=dtype, name=name)
