"""EuroBERT's Hugging Face checkpoints (model_type "eurobert"): transformers' `EuroBertModel`,
`EuroBertForMaskedLM` and `EuroBertForSequenceClassification` (Llama's tensor names: `embed_tokens`,
`q/k/v/o_proj`, `gate/up/down_proj`, `input_layernorm`, `post_attention_layernorm`, `norm`)."""

from bertlayers.convert.huggingface import (
    IGNORED_TENSORS,
    add_decoder_block,
    add_linear,
    add_norm,
    add_output_bias,
    add_output_projection,
    config_writer,
    decoder_config_keys,
    is_token_classifier,
    register_huggingface_family,
    require_keys,
    rotary_theta,
    start_loading,
    tied_output,
    with_task_head,
)
from bertlayers.families.eurobert.encoder import EuroBertEncoder
from bertlayers.families.eurobert.presets import eurobert_config
from bertlayers.models.pretrainer import BertPretrainer
from bertlayers.tokenizers.checkpoint_tokenizer import (
    register_checkpoint_tokenizer,
    tokenizer_json_checkpoint_tokenizer,
)

POOLINGS = {"bos": "first", "mean": "mean", "late": "late"}


def eurobert_config_from_huggingface(hf_config, source):
    """An `EncoderConfig` from a EuroBERT `config.json` (transformers' names and defaults)."""
    require_keys(
        hf_config,
        ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"),
        source,
    )
    heads, hidden = hf_config["num_attention_heads"], hf_config["hidden_size"]
    if hf_config.get("head_dim") not in (None, hidden // heads):
        raise ValueError(f"{source}: head_dim {hf_config['head_dim']} is not hidden_size / num_attention_heads.")
    if hf_config.get("attention_bias", False) != hf_config.get("mlp_bias", False):
        raise ValueError(
            f"{source}: attention_bias and mlp_bias differ; the encoder takes one bias setting for its projections."
        )
    pooling = hf_config.get("classifier_pooling", "late")
    if pooling not in POOLINGS:
        raise ValueError(f"{source}: classifier_pooling {pooling!r} is not one of {', '.join(POOLINGS)}.")
    kv_heads = hf_config.get("num_key_value_heads")
    fields = dict(
        vocabulary_size=hf_config["vocab_size"],
        num_key_value_heads=None if kv_heads in (None, heads) else kv_heads,
        activation=hf_config.get("hidden_act", "silu"),
        attention_dropout=float(hf_config.get("attention_dropout", 0.0)),
        max_sequence_length=hf_config.get("max_position_embeddings", 8192),
        layer_norm_epsilon=hf_config.get("rms_norm_eps", 1e-5),
        initializer_range=hf_config.get("initializer_range", 0.02),
        rotary_theta=rotary_theta(hf_config, source, default=10000.0),
        use_bias=hf_config.get("attention_bias", False),
        tie_word_embeddings=tied_output({"tie_word_embeddings": False, **hf_config}),
        pooling_position=POOLINGS[pooling],
    )
    try:
        return eurobert_config(hf_config["num_hidden_layers"], hidden, heads, hf_config["intermediate_size"], **fields)
    except ValueError as error:
        raise ValueError(f"{source}: {error}") from None


def load_huggingface_eurobert(path, dtype=None):
    """Build a EuroBERT model from a Hugging Face checkpoint folder.

    Args:
      path: a folder with `config.json` (model_type "eurobert") and `model.safetensors`.
      dtype: dtype policy, e.g. "mixed_bfloat16"; weights stay float32.

    Returns:
      A `BertPretrainer` without a sentence head for a masked-LM folder (`mlm` ↔ `logits`), a
      `SequenceClassifier` for a classification folder (its encoder's pooler the checkpoint's
      `dense` + GELU, pooling bos, mean or late as `classifier_pooling` says), else the
      `EuroBertEncoder` (`sequence_output` ↔ `last_hidden_state`, after the final norm).
    """
    hf_config, tensors, encoder, weights = start_loading(
        path, "eurobert", "model.", EuroBertEncoder, dtype, name="eurobert_encoder"
    )
    weights.add(encoder.token_embedding.embeddings, "embed_tokens.weight")
    for index, block in enumerate(encoder.transformer_layers):
        add_decoder_block(weights, block, encoder.config, f"layers.{index}.")
    add_norm(weights, encoder.final_layer_norm, "norm")
    if "classifier.weight" in tensors and not is_token_classifier(hf_config):  # the sequence head's dense layer
        add_linear(weights, encoder.pooler.dense, "dense")
    model = with_task_head(encoder, hf_config, weights, "classifier")
    if "lm_head.weight" in tensors or (model is encoder and encoder.config.tie_word_embeddings):
        model = BertPretrainer(encoder, next_sentence=False, name="eurobert_pretrainer")
        head = model.lm_head
        add_output_bias(weights, head, "lm_head.bias")
        add_output_projection(weights, encoder, "lm_head.weight", "embed_tokens.weight")
    weights.apply(ignore=IGNORED_TENSORS + (r"^lm_head\.weight$",))
    return model


def eurobert_config_to_huggingface(config, pad_id=None):
    """EuroBERT's `config.json` keys of an EncoderConfig."""
    return {
        **decoder_config_keys(config),
        "attention_bias": config.use_bias,
        "mlp_bias": config.use_bias,
        "classifier_pooling": {pooling: name for name, pooling in POOLINGS.items()}[config.pooling_position],
        **({"pad_token_id": pad_id} if pad_id is not None else {}),
    }


register_huggingface_family(
    "eurobert",
    eurobert_config_from_huggingface,
    load_huggingface_eurobert,
    config_writer(eurobert_config_to_huggingface),
    {"base": "EuroBertModel", "mlm": "EuroBertForMaskedLM", "classifier": "EuroBertForSequenceClassification"},
)
register_checkpoint_tokenizer("eurobert", tokenizer_json_checkpoint_tokenizer, ["tokenizer.json"])
