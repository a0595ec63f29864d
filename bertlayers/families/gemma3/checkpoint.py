"""Gemma 3's Hugging Face text checkpoints (model_type "gemma3_text") made bidirectional
(`use_bidirectional_attention`: EmbeddingGemma): transformers' `Gemma3TextModel`, and
`Gemma3ForCausalLM` (its `lm_head` tied). Tensor names: `embed_tokens`, `q/k/v/o_proj`,
`q_norm`/`k_norm`, `input_layernorm`, `post_attention_layernorm` (the attention's output),
`pre_feedforward_layernorm`, `post_feedforward_layernorm`, `gate/up/down_proj`, `norm`."""

from bertlayers.convert.huggingface import (
    IGNORED_TENSORS,
    add_attention,
    add_linear,
    add_norm,
    add_output_bias,
    add_output_projection,
    config_writer,
    decoder_config_keys,
    register_huggingface_family,
    require_keys,
    start_loading,
    tied_output,
)
from bertlayers.families.gemma3.encoder import Gemma3Encoder
from bertlayers.families.gemma3.presets import gemma3_config
from bertlayers.models.pretrainer import BertPretrainer
from bertlayers.tokenizers.checkpoint_tokenizer import (
    register_checkpoint_tokenizer,
    tokenizer_json_checkpoint_tokenizer,
)

DEFAULT_THETAS = {"full_attention": 1000000.0, "sliding_attention": 10000.0}


def _thetas(hf_config, source):
    """Each layer type's rotary base: `rope_parameters` (transformers 5), else `rope_theta` and
    `rope_local_base_freq`; scaled rotations refused."""
    thetas = {
        "full_attention": hf_config.get("rope_theta", DEFAULT_THETAS["full_attention"]),
        "sliding_attention": hf_config.get("rope_local_base_freq", DEFAULT_THETAS["sliding_attention"]),
    }
    for kind, parameters in (hf_config.get("rope_parameters") or {}).items():
        if kind not in thetas or not isinstance(parameters, dict):
            raise ValueError(f"{source}: rope_parameters[{kind!r}] is not a layer type's parameters.")
        if parameters.get("rope_type", "default") != "default":
            raise ValueError(
                f"{source}: rope_parameters[{kind!r}] has rope_type {parameters['rope_type']!r}; only the default "
                "rotation (no scaling) is supported."
            )
        thetas[kind] = parameters.get("rope_theta", thetas[kind])
    return {kind: float(theta) for kind, theta in thetas.items()}


def gemma3_config_from_huggingface(hf_config, source):
    """An `EncoderConfig` from a `gemma3_text` `config.json` (transformers' names and defaults)."""
    require_keys(
        hf_config,
        ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"),
        source,
    )
    if not hf_config.get("use_bidirectional_attention", False):
        raise ValueError(
            f"{source}: use_bidirectional_attention is not true; a causal Gemma 3 (with its causal sliding window) "
            "is not supported, only the bidirectional encoder (EmbeddingGemma)."
        )
    for key in ("attn_logit_softcapping", "final_logit_softcapping"):
        if hf_config.get(key) is not None:
            raise ValueError(f"{source}: {key} is {hf_config[key]!r}; logit soft-capping is not supported.")
    if hf_config.get("attention_bias", False):
        raise ValueError(f"{source}: attention_bias is true; Gemma 3's projections have no biases here.")
    layers = hf_config["num_hidden_layers"]
    layer_types = hf_config.get("layer_types")
    if layer_types is None:
        every = hf_config.get("sliding_window_pattern", hf_config.get("_sliding_window_pattern", 6))
        layer_types = ["full_attention" if (depth + 1) % every == 0 else "sliding_attention" for depth in range(layers)]
    unknown = sorted(set(layer_types) - set(DEFAULT_THETAS))
    if unknown:
        raise ValueError(f"{source}: layer_types names {unknown}; Gemma 3's are full_attention and sliding_attention.")
    thetas = _thetas(hf_config, source)
    heads = hf_config["num_attention_heads"]
    try:
        return gemma3_config(
            layers,
            hf_config["hidden_size"],
            heads,
            hf_config["intermediate_size"],
            num_key_value_heads=hf_config.get("num_key_value_heads", heads),
            head_dim=hf_config.get("head_dim") or 256,
            window=hf_config.get("sliding_window") or 4096,
            global_theta=thetas["full_attention"],
            local_theta=thetas["sliding_attention"],
            layer_types=layer_types,
            vocabulary_size=hf_config["vocab_size"],
            activation=hf_config.get("hidden_activation", "gelu_pytorch_tanh"),
            attention_dropout=float(hf_config.get("attention_dropout", 0.0)),
            max_sequence_length=hf_config.get("max_position_embeddings", 131072),
            layer_norm_epsilon=hf_config.get("rms_norm_eps", 1e-6),
            initializer_range=hf_config.get("initializer_range", 0.02),
            attention_scale=float(hf_config.get("query_pre_attn_scalar", 256)) ** -0.5,
            tie_word_embeddings=tied_output(hf_config),
        )
    except ValueError as error:
        raise ValueError(f"{source}: {error}") from None


def load_huggingface_gemma3(path, dtype=None):
    """Build a bidirectional Gemma 3 text model from a Hugging Face checkpoint folder.

    Args:
      path: a folder with `config.json` (model_type "gemma3_text", `use_bidirectional_attention`
        true) and `model.safetensors`.
      dtype: dtype policy, e.g. "mixed_bfloat16"; weights stay float32.

    Returns:
      A `BertPretrainer` without a sentence head for a `Gemma3ForCausalLM` folder (`mlm` ↔
      `logits` at the positions asked for), else the `Gemma3Encoder` (`sequence_output` ↔
      `last_hidden_state`, after the final norm).
    """
    hf_config, tensors, encoder, weights = start_loading(
        path, "gemma3_text", "model.", Gemma3Encoder, dtype, name="gemma3_encoder"
    )
    weights.add(encoder.token_embedding.embeddings, "embed_tokens.weight")
    for index, block in enumerate(encoder.transformer_layers):
        layer = f"layers.{index}."
        attention = layer + "self_attn."
        add_attention(
            weights,
            block.attention_layer,
            encoder.config,
            attention + "q_proj",
            attention + "k_proj",
            attention + "v_proj",
            attention + "o_proj",
        )
        add_norm(weights, block.attention_layer.query_norm, attention + "q_norm")
        add_norm(weights, block.attention_layer.key_norm, attention + "k_norm")
        add_norm(weights, block.attention_layer_norm, layer + "input_layernorm")
        add_norm(weights, block.attention_output_norm, layer + "post_attention_layernorm")
        add_norm(weights, block.output_layer_norm, layer + "pre_feedforward_layernorm")
        add_norm(weights, block.feed_forward_output_norm, layer + "post_feedforward_layernorm")
        feed_forward = block.feed_forward_layer
        add_linear(weights, feed_forward.gate_dense, layer + "mlp.gate_proj")
        add_linear(weights, feed_forward.up_dense, layer + "mlp.up_proj")
        add_linear(weights, feed_forward.output_dense, layer + "mlp.down_proj")
    add_norm(weights, encoder.final_layer_norm, "norm")
    model = encoder
    if "lm_head.weight" in tensors or hf_config.get("architectures") == ["Gemma3ForCausalLM"]:
        model = BertPretrainer(encoder, next_sentence=False, name="gemma3_pretrainer")
        add_output_bias(weights, model.lm_head, "lm_head.bias")  # none: zeros
        add_output_projection(weights, encoder, "lm_head.weight", "embed_tokens.weight")
    weights.apply(ignore=IGNORED_TENSORS + (r"^lm_head\.weight$",))
    return model


def gemma3_config_to_huggingface(config, pad_id=None):
    """`gemma3_text`'s `config.json` keys of an EncoderConfig (bidirectional)."""
    kinds = config.layer_kinds or {}
    scalar = config.attention_scale**-2
    if abs(scalar - round(scalar)) > 1e-6 * scalar:  # transformers takes an integer there
        raise ValueError(
            f"EncoderConfig.attention_scale {config.attention_scale} is not 1 / sqrt of an integer: gemma3_text's "
            "query_pre_attn_scalar cannot say it."
        )
    keys = decoder_config_keys(config)
    del keys["hidden_act"]
    return {
        **keys,
        "hidden_activation": "gelu_pytorch_tanh",
        "query_pre_attn_scalar": round(scalar),
        "sliding_window": kinds.get("sliding_attention", {}).get("attention_window", 4096),
        "layer_types": list(config.layer_types),
        "rope_parameters": {
            kind: {"rope_theta": float(settings["rotary_theta"]), "rope_type": "default"}
            for kind, settings in kinds.items()
        },
        "use_bidirectional_attention": True,
        "attention_bias": False,
        "attn_logit_softcapping": None,
        "final_logit_softcapping": None,
        "tie_word_embeddings": config.tie_word_embeddings,
        **({"pad_token_id": pad_id} if pad_id is not None else {}),
    }


register_huggingface_family(
    "gemma3_text",
    gemma3_config_from_huggingface,
    load_huggingface_gemma3,
    config_writer(gemma3_config_to_huggingface),
    {"base": "Gemma3TextModel", "mlm": "Gemma3ForCausalLM"},
)


def gemma3_checkpoint_tokenizer(folder, config, tokenizer_config):
    """Gemma's tokenizer.json (BPE with byte fallback), padded on the left unless its
    tokenizer_config.json says otherwise: transformers' GemmaTokenizer pads left."""
    return tokenizer_json_checkpoint_tokenizer(folder, config, tokenizer_config, default_side="left")


register_checkpoint_tokenizer("gemma3_text", gemma3_checkpoint_tokenizer, ["tokenizer.json"])
