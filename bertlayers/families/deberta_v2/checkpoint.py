"""DeBERTa-v2/v3's Hugging Face checkpoints (model_type "deberta-v2"): transformers'
`DebertaV2Model`, `DebertaV2ForMaskedLM` (its legacy `cls.predictions` head and the
`lm_predictions.lm_head` one of the published v3 folders) and `DebertaV2ForSequenceClassification`."""

from bertlayers.convert.huggingface import (
    BERT_CONFIG_KEYS,
    IGNORED_TENSORS,
    add_attention,
    add_embeddings,
    add_lm_transform,
    add_norm,
    add_norms_and_feed_forward,
    add_output_projection,
    config_from_fields,
    config_keys_of,
    is_token_classifier,
    output_bias_key,
    register_huggingface_family,
    renamed_fields,
    start_loading,
    with_task_head,
)
from bertlayers.families.deberta_v2.encoder import DebertaV2Encoder
from bertlayers.models.pretrainer import BertPretrainer

REQUIRED = ("vocab_size", "num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size")


def deberta_v2_config_from_huggingface(hf_config, source):
    """BERT's config names (transformers' `DebertaV2Config` defaults where a key is absent: no
    segments, epsilon 1e-7, positions added to the input unless `position_biased_input` is false)."""
    if hf_config.get("relative_attention", False) is not True:
        raise ValueError(
            f"{source}: relative_attention is {hf_config.get('relative_attention', False)!r}; bertlayers reads "
            "DeBERTa with its disentangled (relative) attention, as every published v2/v3 checkpoint has it."
        )
    fields = renamed_fields(hf_config, BERT_CONFIG_KEYS, REQUIRED, source)
    hidden = fields["hidden_size"]
    expected = {
        "attention_head_size": hidden // max(fields["num_heads"], 1),
        "pooler_hidden_size": hidden,
        "embedding_size": hidden,
    }
    for key, value in expected.items():  # widths transformers allows apart; no published v2/v3 folder sets them so
        if hf_config.get(key, value) != value:
            raise ValueError(
                f"{source}: {key} {hf_config[key]!r} (other than {value}, the hidden size's) is not supported."
            )
    fields.setdefault("type_vocab_size", 0)
    fields.setdefault("layer_norm_epsilon", 1e-7)
    position_biased_input = hf_config.get("position_biased_input", True)
    if not isinstance(position_biased_input, bool):
        raise ValueError(f"{source}: position_biased_input must be true or false, got {position_biased_input!r}.")
    fields.update(
        architecture="deberta_v2",
        attention="disentangled",
        learned_positions=position_biased_input,
        pooler_activation=hf_config.get("pooler_hidden_act", "gelu"),
    )
    return config_from_fields(fields, source)


def deberta_v2_encoder_settings(hf_config, source):
    """`DebertaV2Encoder`'s own arguments from config.json (transformers' defaults where absent)."""
    terms = hf_config.get("pos_att_type") or []
    if isinstance(terms, str):
        terms = [term.strip() for term in terms.lower().split("|") if term.strip()]
    unknown = sorted(set(terms) - {"c2p", "p2c"})
    if unknown:
        raise ValueError(f"{source}: pos_att_type {hf_config.get('pos_att_type')!r} names {unknown}; known: c2p, p2c.")
    norm = [part.strip() for part in str(hf_config.get("norm_rel_ebd", "none")).lower().split("|")]
    settings = dict(
        max_relative_positions=hf_config.get("max_relative_positions", -1),
        position_buckets=hf_config.get("position_buckets", -1),
        share_att_key=hf_config.get("share_att_key", False),
        position_terms=tuple(terms),
        normalize_relative_embeddings="layer_norm" in norm,
        conv_kernel_size=hf_config.get("conv_kernel_size", 0),
        conv_groups=hf_config.get("conv_groups", 1),
        conv_activation=hf_config.get("conv_act", "tanh"),
    )
    for key in ("max_relative_positions", "position_buckets", "conv_kernel_size", "conv_groups"):
        if isinstance(settings[key], bool) or not isinstance(settings[key], int):
            raise ValueError(f"{source}: {key} must be an integer, got {settings[key]!r}.")
    if not isinstance(settings["share_att_key"], bool):
        raise ValueError(f"{source}: share_att_key must be true or false, got {settings['share_att_key']!r}.")
    return settings


def load_huggingface_deberta_v2(path, dtype=None):
    """Build a DeBERTa-v2/v3 model from a Hugging Face checkpoint folder.

    Args:
      path: a folder with `config.json` (model_type "deberta-v2") and `model.safetensors`.
      dtype: dtype policy, e.g. "mixed_bfloat16"; weights stay float32.

    Returns:
      A `BertPretrainer` without a sentence head for a masked-LM folder (`mlm` ↔ `logits` at the
      masked positions), a `SequenceClassifier` for a classification folder (over DeBERTa's
      context pooler, `pooler.dense`), else the `DebertaV2Encoder` (`sequence_output` ↔
      `last_hidden_state`).
    """
    hf_config, tensors, encoder, weights = start_loading(
        path,
        "deberta-v2",
        "deberta.",
        DebertaV2Encoder,
        dtype,
        name="deberta_v2_encoder",
        encoder_settings=deberta_v2_encoder_settings,
    )
    add_embeddings(weights, encoder.embeddings)
    table = encoder.stack.table
    weights.add(table.embeddings, "encoder.rel_embeddings.weight")
    if table.layer_norm is not None:
        add_norm(weights, table.layer_norm, "encoder.LayerNorm")
    if encoder.stack.convolution is not None:
        convolution = encoder.stack.convolution
        # torch Conv1d weight [out, in / groups, width]; Keras Conv1D kernel [width, in / groups, out].
        weights.add(
            convolution.convolution.kernel,
            "encoder.conv.conv.weight",
            lambda w: w.transpose(2, 1, 0),
            shape=tuple(reversed(convolution.convolution.kernel.shape)),
        )
        weights.add(convolution.convolution.bias, "encoder.conv.conv.bias")
        add_norm(weights, convolution.layer_norm, "encoder.conv.LayerNorm")
    config = encoder.config
    for index, block in enumerate(encoder.transformer_layers):
        layer = f"encoder.layer.{index}."
        attention = block.attention_layer
        add_attention(
            weights,
            attention,
            config,
            layer + "attention.self.query_proj",
            layer + "attention.self.key_proj",
            layer + "attention.self.value_proj",
            layer + "attention.output.dense",
        )
        for name, key in (("position_key_dense", "pos_key_proj"), ("position_query_dense", "pos_query_proj")):
            projection = getattr(attention, name, None)
            if projection is not None:
                _add_head_projection(weights, projection, config, layer + "attention.self." + key)
        add_norms_and_feed_forward(
            weights,
            block,
            layer + "attention.output.LayerNorm",
            layer + "intermediate.dense",
            layer + "output.dense",
            layer + "output.LayerNorm",
        )
    model = encoder
    if "pooler.dense.weight" in tensors or is_token_classifier(hf_config):
        model = with_task_head(encoder, hf_config, weights, "classifier", pooler="pooler.dense")
    head = _masked_lm_head_names(tensors)
    if head is not None:
        model = BertPretrainer(encoder, next_sentence=False, name="deberta_v2_pretrainer")
        dense, norm, bias = head
        add_lm_transform(weights, model.lm_head, dense, norm, bias)
        add_output_projection(weights, encoder, "cls.predictions.decoder.weight", "embeddings.word_embeddings.weight")
    weights.apply(
        ignore=IGNORED_TENSORS + (r"^cls\.predictions\.decoder\.weight$", r"^mask_predictions\.")
    )  # mask_predictions: the published folders' replaced-token head, which transformers ignores too
    return model


def _masked_lm_head_names(tensors):
    """(transform dense, its LayerNorm, output bias) of the folder's masked-LM head, in either
    layout transformers reads (`legacy` true: `cls.predictions`; false: `lm_predictions.lm_head`)."""
    if "cls.predictions.transform.dense.weight" in tensors:
        prefix = "cls.predictions."
        return prefix + "transform.dense", prefix + "transform.LayerNorm", output_bias_key(tensors, "cls.predictions")
    if "lm_predictions.lm_head.dense.weight" in tensors:
        prefix = "lm_predictions.lm_head."
        return prefix + "dense", prefix + "LayerNorm", prefix + "bias"
    return None


def _add_head_projection(weights, projection, config, key):
    """A torch Linear `key` (`[N·D, H]`) into an `EinsumDense` projecting to heads (`[H, N, D]`)."""
    heads, head_size, hidden = config.num_heads, config.head_size, config.hidden_size
    weights.add(
        projection.kernel,
        key + ".weight",
        lambda w: w.T.reshape(hidden, heads, head_size),
        shape=(heads * head_size, hidden),
    )
    weights.add(projection.bias, key + ".bias", lambda b: b.reshape(heads, head_size), shape=(heads * head_size,))


def deberta_v2_config_to_huggingface(encoder, pad_id=None):
    """DeBERTa-v2's `config.json` keys of a `DebertaV2Encoder` (its relative-position and convolution
    settings are the encoder's, not the EncoderConfig's)."""
    config = encoder.config
    return {
        **config_keys_of(config, BERT_CONFIG_KEYS),
        "relative_attention": True,
        "position_biased_input": config.learned_positions,
        "max_relative_positions": encoder.max_relative_positions,
        "position_buckets": encoder.position_buckets if encoder.position_buckets > 0 else -1,
        "share_att_key": encoder.share_att_key,
        "pos_att_type": list(encoder.position_terms),
        "norm_rel_ebd": "layer_norm" if encoder.normalize_relative_embeddings else "none",
        "conv_kernel_size": encoder.conv_kernel_size,
        "conv_groups": encoder.conv_groups,
        "conv_act": encoder.conv_activation,
        "pooler_hidden_act": config.pooler_activation,
        "pooler_hidden_size": config.hidden_size,
        "legacy": True,  # the masked-LM head is written as `cls.predictions`
        "pad_token_id": 0 if pad_id is None else pad_id,
    }


register_huggingface_family(
    "deberta-v2",
    deberta_v2_config_from_huggingface,
    load_huggingface_deberta_v2,
    deberta_v2_config_to_huggingface,
    {"base": "DebertaV2Model", "mlm": "DebertaV2ForMaskedLM", "classifier": "DebertaV2ForSequenceClassification"},
    head_names=("pooler",),  # DebertaV2ForSequenceClassification's ContextPooler sits beside its classifier
)
