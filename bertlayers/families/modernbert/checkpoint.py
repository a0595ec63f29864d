"""ModernBERT's Hugging Face checkpoints (model_type "modernbert"): transformers'
`ModernBertModel`, `ModernBertForMaskedLM` and `ModernBertForSequenceClassification`, tensors under
"model." (the base model), "head." (the prediction head), "decoder." and "classifier."."""

from bertlayers.convert.huggingface import (
    IGNORED_TENSORS,
    add_fused_attention,
    add_linear,
    add_norm,
    add_output_bias,
    add_output_projection,
    config_writer,
    is_token_classifier,
    register_huggingface_family,
    require_keys,
    start_loading,
    tied_output,
    with_task_head,
)
from bertlayers.families.modernbert.encoder import ModernBertEncoder
from bertlayers.families.modernbert.presets import modernbert_config
from bertlayers.models.pretrainer import BertPretrainer
from bertlayers.tokenizers.checkpoint_tokenizer import (
    register_checkpoint_tokenizer,
    tokenizer_json_checkpoint_tokenizer,
)

DEFAULT_THETAS = {"full_attention": 160000.0, "sliding_attention": 10000.0}  # transformers' defaults
POOLINGS = {"cls": "first", "mean": "mean"}


def modernbert_config_from_huggingface(hf_config, source):
    """An `EncoderConfig` from a ModernBERT `config.json` (transformers' names and defaults; the
    older `global_attn_every_n_layers` and `global_rope_theta` / `local_rope_theta` too)."""
    require_keys(
        hf_config,
        ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"),
        source,
    )
    biases = {key: hf_config.get(key, False) for key in ("attention_bias", "mlp_bias", "classifier_bias")}
    if len(set(biases.values())) != 1:
        raise ValueError(
            f"{source}: {', '.join(f'{k}={v}' for k, v in biases.items())}: the encoder takes one bias setting for "
            "its attention, feed-forward and head projections; a checkpoint mixing them is not supported."
        )
    layers = hf_config["num_hidden_layers"]
    layer_types = hf_config.get("layer_types")
    if layer_types is None:
        every = hf_config.get("global_attn_every_n_layers", 3)
        layer_types = ["sliding_attention" if depth % every else "full_attention" for depth in range(layers)]
    unknown = sorted(set(layer_types) - set(DEFAULT_THETAS))
    if unknown:
        raise ValueError(
            f"{source}: layer_types names {unknown}; ModernBERT's are full_attention and sliding_attention."
        )
    thetas = _thetas(hf_config, source)
    pooling = hf_config.get("classifier_pooling", "cls")
    if pooling not in POOLINGS:
        raise ValueError(f"{source}: classifier_pooling {pooling!r} is not one of {', '.join(POOLINGS)}.")
    fields = dict(
        vocabulary_size=hf_config["vocab_size"],
        activation=hf_config.get("hidden_activation", "gelu"),
        pooler_activation=hf_config.get("classifier_activation", "gelu"),
        dropout=float(hf_config.get("mlp_dropout", 0.0)),
        attention_dropout=float(hf_config.get("attention_dropout", 0.0)),
        max_sequence_length=hf_config.get("max_position_embeddings", 8192),
        layer_norm_epsilon=hf_config.get("norm_eps", 1e-5),
        initializer_range=hf_config.get("initializer_range", 0.02),
        normalization="layer_norm" if hf_config.get("norm_bias", False) else "bias_free_layer_norm",
        use_bias=biases["attention_bias"],
        tie_word_embeddings=tied_output(hf_config),
        pooling_position=POOLINGS[pooling],
    )
    try:
        config = modernbert_config(
            layers,
            hf_config["hidden_size"],
            hf_config["num_attention_heads"],
            hf_config["intermediate_size"],
            global_theta=thetas["full_attention"],
            local_theta=thetas["sliding_attention"],
            window=hf_config.get("local_attention", 128),
            **fields,
        )
        return config.replace(layer_types=tuple(layer_types))
    except ValueError as error:
        raise ValueError(f"{source}: {error}") from None


def _thetas(hf_config, source):
    """The rotary base of each layer type: `rope_parameters` (transformers 5), else the older keys."""
    thetas = {
        "full_attention": hf_config.get("global_rope_theta", DEFAULT_THETAS["full_attention"]),
        "sliding_attention": hf_config.get("local_rope_theta", DEFAULT_THETAS["sliding_attention"]),
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


def load_huggingface_modernbert(path, dtype=None):
    """Build a ModernBERT model from a Hugging Face checkpoint folder.

    Args:
      path: a folder with `config.json` (model_type "modernbert") and `model.safetensors`: a
        `ModernBertModel`, `ModernBertForMaskedLM` (tied or untied) or
        `ModernBertForSequenceClassification`.
      dtype: dtype policy, e.g. "mixed_bfloat16"; weights stay float32.

    Returns:
      A `BertPretrainer` without a sentence head for a masked-LM folder (`mlm` ↔ transformers'
      `logits` at the masked positions); a `SequenceClassifier` for a classification folder (its
      encoder's pooler is the checkpoint's `head`, over the first token or the mean as
      `classifier_pooling` says; `logits` ↔ `logits`); else the `ModernBertEncoder`
      (`sequence_output` ↔ `last_hidden_state`, after the final norm).

    Raises:
      As `load_huggingface_bert`; a ValueError names a config setting the encoder cannot take.
    """
    hf_config, tensors, encoder, weights = start_loading(
        path, "modernbert", "model.", ModernBertEncoder, dtype, name="modernbert_encoder"
    )
    if is_token_classifier(hf_config):
        # Its `head` (dense, GELU, norm) transforms every token before the classifier: a layer
        # the library's token head does not have. Read as a sequence head it would be wrong.
        raise ValueError(
            f"{path}: a ModernBertForTokenClassification folder is not supported: its per-token `head` (dense, GELU, "
            "norm) before `classifier` has no counterpart in TokenClassifier."
        )
    _map_encoder(encoder, weights)
    pooler = encoder.pooler
    if "classifier.weight" in tensors:
        _add_dense_and_norm(weights, pooler.dense, pooler.norm, "head.dense", "head.norm")
    model = with_task_head(encoder, hf_config, weights, "classifier")
    if model is encoder and "head.dense.weight" in tensors:
        model = BertPretrainer(encoder, next_sentence=False, name="modernbert_pretrainer")
        head = model.lm_head
        _add_dense_and_norm(weights, head.transform_dense, head.layer_norm, "head.dense", "head.norm")
        add_output_bias(weights, head, "decoder.bias")
        add_output_projection(weights, encoder, "decoder.weight", "embeddings.tok_embeddings.weight")
    weights.apply(ignore=IGNORED_TENSORS + (r"^decoder\.weight$",))
    return model


def _add_dense_and_norm(weights, dense, norm, dense_key, norm_key):
    add_linear(weights, dense, dense_key)
    add_norm(weights, norm, norm_key)


def _map_encoder(encoder, weights):
    """Every encoder variable's name in transformers' `ModernBertModel`."""
    weights.add(encoder.token_embedding.embeddings, "embeddings.tok_embeddings.weight")
    add_norm(weights, encoder.embeddings.layer_norm, "embeddings.norm")
    for index, block in enumerate(encoder.transformer_layers):
        prefix = f"layers.{index}."
        if block.attention_layer_norm is not None:  # layer 0 has none
            add_norm(weights, block.attention_layer_norm, prefix + "attn_norm")
        add_fused_attention(weights, block.attention_layer, encoder.config, prefix + "attn.Wqkv", prefix + "attn.Wo")
        add_norm(weights, block.output_layer_norm, prefix + "mlp_norm")
        # Wi stacks GeGLU's two halves: [2I, H], the activated half first, then the linear one.
        feed_forward = block.feed_forward_layer
        add_linear(weights, feed_forward.gate_dense, prefix + "mlp.Wi", part=0, parts=2)
        add_linear(weights, feed_forward.up_dense, prefix + "mlp.Wi", part=1, parts=2)
        add_linear(weights, feed_forward.output_dense, prefix + "mlp.Wo")
    add_norm(weights, encoder.final_layer_norm, "final_norm")


def modernbert_config_to_huggingface(config, pad_id=None):
    """ModernBERT's `config.json` keys of an EncoderConfig (transformers 5's names)."""
    kinds = config.layer_kinds or {}
    return {
        "vocab_size": config.vocabulary_size,
        "hidden_size": config.hidden_size,
        "num_hidden_layers": config.num_layers,
        "num_attention_heads": config.num_heads,
        "intermediate_size": config.intermediate_size,
        "hidden_activation": config.activation,
        "classifier_activation": config.pooler_activation,
        "mlp_dropout": config.dropout,
        "attention_dropout": config.attention_dropout,
        "max_position_embeddings": config.max_sequence_length,
        "norm_eps": config.layer_norm_epsilon,
        "initializer_range": config.initializer_range,
        "norm_bias": config.normalization == "layer_norm",
        "attention_bias": config.use_bias,
        "mlp_bias": config.use_bias,
        "classifier_bias": config.use_bias,
        "classifier_pooling": {pooling: name for name, pooling in POOLINGS.items()}[config.pooling_position],
        "layer_types": list(config.layer_types),
        "local_attention": kinds.get("sliding_attention", {}).get("attention_window", 128),
        "rope_parameters": {
            kind: {"rope_theta": float(settings["rotary_theta"]), "rope_type": "default"}
            for kind, settings in kinds.items()
        },
        **({"pad_token_id": pad_id} if pad_id is not None else {}),
    }


register_huggingface_family(
    "modernbert",
    modernbert_config_from_huggingface,
    load_huggingface_modernbert,
    config_writer(modernbert_config_to_huggingface),
    {"base": "ModernBertModel", "mlm": "ModernBertForMaskedLM", "classifier": "ModernBertForSequenceClassification"},
)
register_checkpoint_tokenizer("modernbert", tokenizer_json_checkpoint_tokenizer, ["tokenizer.json"])
